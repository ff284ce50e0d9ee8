//! A CSV file read as text, column by column: each column's cells back to back in one string,
//! with the line number of every record, so that each column can be parsed as the job needs it.
//! A table of millions of rows costs its text plus 4 bytes a cell, read in one pass; a record
//! is never held as text of its own.

use crate::error::{EmberError, Result};
use std::path::{Path, PathBuf};

/// A CSV file with a header row and records of as many fields, cells trimmed of whitespace.
pub struct TextCsv {
    pub path: PathBuf,
    pub header: Vec<String>,
    columns: Vec<ColumnText>,
    /// The file's line of each record (CSV errors name it).
    lines: Vec<u64>,
}

/// One column's cells: cell `r` is `text[ends[r - 1]..ends[r]]`.
#[derive(Default)]
struct ColumnText {
    text: String,
    ends: Vec<u32>,
}

impl ColumnText {
    fn cell(&self, r: usize) -> &str {
        let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
        &self.text[start..self.ends[r] as usize]
    }

    /// Appends a cell; `false` when the column's text would pass 4 GiB.
    fn push(&mut self, cell: &str) -> bool {
        self.text.push_str(cell);
        match u32::try_from(self.text.len()) {
            Ok(end) => {
                self.ends.push(end);
                true
            }
            Err(_) => false,
        }
    }

    /// The same column with the rows where `keep` is false left out.
    fn retain(&self, keep: &[bool]) -> ColumnText {
        let mut kept = ColumnText::default();
        for (r, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            kept.push(self.cell(r));
        }
        kept
    }
}

/// The delimiters a header row may use, the comma first (the default).
const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// The delimiter of a file whose first line is `header`: the one of [`DELIMITERS`] it holds
/// most often outside quotes (`;` in much of Europe, tab in `.tsv` files), else the comma.
pub(super) fn delimiter_of(header: &[u8]) -> u8 {
    let mut counts = [0usize; DELIMITERS.len()];
    let mut quoted = false;
    for &b in header {
        if b == b'"' {
            quoted = !quoted;
        } else if !quoted && let Some(i) = DELIMITERS.iter().position(|d| *d == b) {
            counts[i] += 1;
        }
    }
    let best = (0..DELIMITERS.len()).max_by_key(|&i| (counts[i], usize::MAX - i));
    best.filter(|&i| counts[i] > 0)
        .map_or(b',', |i| DELIMITERS[i])
}

/// The first line of `path` (up to 64 KiB), to find its delimiter.
fn first_line(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
    let mut head = Vec::new();
    file.take(64 * 1024)
        .read_to_end(&mut head)
        .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
    let end = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    head.truncate(end);
    Ok(head)
}

/// A field as trimmed UTF-8 text (trimmed as the csv crate's `Trim::All` does for strings).
fn text_of(field: &[u8]) -> Option<&str> {
    std::str::from_utf8(field).ok().map(str::trim)
}

/// Records read before the columns' final sizes are estimated and reserved.
const SAMPLE_RECORDS: usize = 1024;

/// Reads a CSV file with a header row; every record must have one field per column. The
/// delimiter is the header's: a comma, a semicolon, a tab or a bar.
pub fn read_text(path: &Path) -> Result<TextCsv> {
    let fail = |what: String| EmberError::file(path, what);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter_of(&first_line(path)?))
        .flexible(true)
        .from_path(path)
        .map_err(|e| fail(csv_reason(&e)))?;
    let header = header_of(&mut reader).map_err(fail)?;
    let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut columns: Vec<ColumnText> = (0..header.len()).map(|_| ColumnText::default()).collect();
    let mut lines = Vec::new();
    let mut line_ends = LineCounter::open(path)?;
    // One record, reused: the csv crate checks its UTF-8 once for the whole record.
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(fail(read_error(&e, &mut line_ends))),
        }
        let line = match record.position() {
            Some(p) => line_ends
                .line_at(p.byte())
                .map_err(|e| fail(crate::fs::describe_io(&e)))?,
            None => 0,
        };
        if record.len() == 1 && record[0].trim().is_empty() {
            continue; // a blank line
        }
        if record.len() != header.len() {
            return Err(fail(format!(
                "line {line}: {} fields, but the header has {}",
                record.len(),
                header.len()
            )));
        }
        for (column, cell) in columns.iter_mut().zip(record.iter()) {
            if !column.push(cell.trim()) {
                return Err(fail(format!(
                    "line {line}: a column holds over 4 GiB of text; ember reads tables up to that"
                )));
            }
        }
        lines.push(line);
        if lines.len() == SAMPLE_RECORDS {
            let read = record.position().map_or(0, |p| p.byte()).max(1);
            reserve(&mut columns, &mut lines, file_bytes as f64 / read as f64);
        }
    }
    Ok(TextCsv {
        path: path.to_path_buf(),
        header,
        columns,
        lines,
    })
}

/// Reserves what the whole file will need, `scale` times what its first records hold (with a
/// tenth more): growing a column's text by doubling would touch twice its final size.
fn reserve(columns: &mut [ColumnText], lines: &mut Vec<u64>, scale: f64) {
    let more = |have: usize| ((have as f64 * scale * 1.1) as usize).saturating_sub(have);
    for column in columns {
        column.text.reserve(more(column.text.len()));
        column.ends.reserve(more(column.ends.len()));
    }
    lines.reserve(more(lines.len()));
}

/// A reading error as one line; a UTF-8 error names the line ember counted.
fn read_error(e: &csv::Error, line_ends: &mut LineCounter) -> String {
    if let csv::ErrorKind::Utf8 { pos: Some(p), .. } = e.kind()
        && let Ok(line) = line_ends.line_at(p.byte())
    {
        return format!("line {line}: not valid UTF-8 text");
    }
    csv_reason(e)
}

/// The header row's names; an empty header, or one naming a column twice, is an error.
fn header_of(reader: &mut csv::Reader<std::fs::File>) -> std::result::Result<Vec<String>, String> {
    let raw = reader.byte_headers().map_err(|e| csv_reason(&e))?;
    let header: Vec<String> = raw
        .iter()
        .map(|f| text_of(f).map(str::to_string))
        .collect::<Option<_>>()
        .ok_or("line 1: not valid UTF-8 text")?;
    if header.iter().all(String::is_empty) {
        return Err("empty file: expected a header row".into());
    }
    if let Some(twice) = header
        .iter()
        .enumerate()
        .find(|(i, h)| header[..*i].contains(h))
    {
        return Err(format!(
            "the header names column \"{}\" twice; rename one",
            twice.1
        ));
    }
    Ok(header)
}

/// The line numbers of records, from their byte offsets. The csv crate's own
/// (`Position::line`) are one short in a file with CRLF line ends and for a record after a
/// blank line (rust-csv issues 395 and 208), so ember counts the line ends itself, in a second
/// sequential read of the file.
struct LineCounter {
    reader: std::io::BufReader<std::fs::File>,
    offset: u64,
    line: u64,
}

impl LineCounter {
    fn open(path: &Path) -> Result<LineCounter> {
        let file = std::fs::File::open(path)
            .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
        Ok(LineCounter {
            reader: std::io::BufReader::with_capacity(1 << 16, file),
            offset: 0,
            line: 1,
        })
    }

    /// The line of the record the csv reader places at `byte` (offsets only grow): past the
    /// line ends before it, and past the ends of blank lines that the reader skipped there.
    fn line_at(&mut self, byte: u64) -> std::io::Result<u64> {
        use std::io::BufRead;
        loop {
            let buf = self.reader.fill_buf()?;
            let n = match usize::try_from(byte.saturating_sub(self.offset)) {
                Ok(0) => buf
                    .iter()
                    .take_while(|b| matches!(b, b'\r' | b'\n'))
                    .count(),
                Ok(left) => left.min(buf.len()),
                Err(_) => buf.len(),
            };
            if n == 0 {
                return Ok(self.line);
            }
            self.line += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
            self.reader.consume(n);
            self.offset += n as u64;
        }
    }
}

impl TextCsv {
    pub fn fail(&self, what: String) -> EmberError {
        EmberError::file(&self.path, what)
    }

    /// Data rows (records that are not blank lines).
    pub fn rows(&self) -> usize {
        self.lines.len()
    }

    /// The index of column `name`, which the config names in `field`.
    pub fn column(&self, name: &str, field: &str) -> Result<usize> {
        self.header.iter().position(|h| h == name).ok_or_else(|| {
            self.fail(format!(
                "no column named \"{name}\" ({field}); the header has {}",
                self.header.join(",")
            ))
        })
    }

    /// Columns `cols` as a row-major matrix of finite numbers.
    pub fn numbers(&self, cols: &[usize]) -> Result<super::Matrix> {
        let rows = self.rows();
        let mut values = Vec::with_capacity(rows * cols.len());
        // Row by row, so that the first bad cell reported is the file's first.
        for (r, line) in self.lines.iter().enumerate() {
            for &c in cols {
                let cell = self.columns[c].cell(r);
                match cell.parse::<f32>() {
                    Ok(v) if v.is_finite() => values.push(v),
                    _ => {
                        return Err(self.fail(format!(
                            "line {line}: column \"{}\" holds \"{cell}\", not a finite number",
                            self.header[c]
                        )));
                    }
                }
            }
        }
        Ok(super::Matrix {
            rows,
            cols: cols.len(),
            values,
        })
    }

    /// Drops the rows where a column of `targets` is missing; returns how many went.
    pub fn drop_missing_labels(
        &mut self,
        targets: &[String],
        missing: &super::columns::Missing,
    ) -> Result<usize> {
        let cols: Vec<usize> = targets
            .iter()
            .map(|t| self.column(t, "data.label"))
            .collect::<Result<_>>()?;
        let keep: Vec<bool> = (0..self.rows())
            .map(|r| !cols.iter().any(|&c| missing.is(self.columns[c].cell(r))))
            .collect();
        let dropped = keep.iter().filter(|k| !**k).count();
        if dropped > 0 {
            self.columns = self.columns.iter().map(|c| c.retain(&keep)).collect();
            self.lines = (self.lines.iter().zip(&keep))
                .filter(|(_, k)| **k)
                .map(|(l, _)| *l)
                .collect();
        }
        Ok(dropped)
    }

    /// The cell of column `c` in row `r`.
    pub fn cell(&self, c: usize, r: usize) -> &str {
        self.columns[c].cell(r)
    }

    /// Row `r`'s cells, column by column.
    pub fn record(&self, r: usize) -> impl Iterator<Item = &str> {
        self.columns.iter().map(move |column| column.cell(r))
    }

    /// The file's line of row `r`.
    pub fn line(&self, r: usize) -> u64 {
        self.lines[r]
    }

    /// The text of column `c`, row by row, with each row's line.
    pub fn texts(&self, c: usize) -> impl Iterator<Item = (&str, u64)> {
        let column = &self.columns[c];
        (self.lines.iter().enumerate()).map(move |(r, line)| (column.cell(r), *line))
    }
}

fn csv_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => crate::fs::describe_io(io),
        csv::ErrorKind::Utf8 { pos, .. } => format!(
            "line {}: not valid UTF-8 text",
            pos.as_ref().map_or(0, |p| p.line())
        ),
        _ => e.to_string(),
    }
}
