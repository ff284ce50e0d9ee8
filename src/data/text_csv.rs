//! A CSV file read as text, column by column: each column's cells back to back in one string,
//! with the line number of every record, so that each column can be parsed as the job needs it.
//! A table of millions of rows costs its text plus 4 bytes a cell, read in one pass (two readers
//! side by side, each on half of a large file); a record is never held as text of its own.
//! A column the job reads as numbers may instead be parsed as it is read ([`read_parsing`]):
//! its text is then never copied nor kept, only each cell's value (8 bytes).

use super::csv_scan::{NOT_UTF8, Next, Scanner};
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

/// One column's cells: cell `r` is `text[ends[r - 1]..ends[r]]`, or, in a column parsed as
/// it was read, `values[r]`; the cells after those are in `after` (the second half of a file
/// read by two readers side by side).
#[derive(Default)]
struct ColumnText {
    text: String,
    ends: Vec<u32>,
    /// Whether the column is parsed as read: its cells are then in `values` (NaN where missing
    /// or unreadable) and `unreadable` (each cell that did not parse: its row and text).
    parsed: bool,
    values: Vec<f64>,
    unreadable: Vec<(usize, String)>,
    after: Option<Box<ColumnText>>,
}

/// A parser of one column's cells as they are read: a cell's value, NaN for a missing cell,
/// `None` for a cell that is neither (the error is the caller's to word, from its text).
pub type CellParser<'a> = &'a (dyn Fn(&str) -> Option<f64> + Sync);

impl ColumnText {
    fn parsed() -> ColumnText {
        ColumnText {
            parsed: true,
            ..ColumnText::default()
        }
    }

    /// Rows in this half.
    fn len(&self) -> usize {
        match self.parsed {
            true => self.values.len(),
            false => self.ends.len(),
        }
    }

    /// This half's cells in order (a text column): each from the end of the one before, where
    /// [`ColumnText::cell`] looks up both ends of each.
    fn own_cells(&self) -> impl Iterator<Item = &str> {
        debug_assert!(!self.parsed, "a parsed column keeps no text");
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let cell = &self.text[start..end as usize];
            start = end as usize;
            cell
        })
    }

    fn cell(&self, r: usize) -> &str {
        debug_assert!(!self.parsed, "a parsed column keeps no text");
        if let Some(after) = &self.after
            && r >= self.ends.len()
        {
            return after.cell(r - self.ends.len());
        }
        let start = if r == 0 { 0 } else { self.ends[r - 1] as usize };
        &self.text[start..self.ends[r] as usize]
    }

    /// Appends a cell; `false` when the column's text would pass 4 GiB.
    fn push(&mut self, cell: &str) -> bool {
        debug_assert!(
            self.after.is_none(),
            "cells are pushed while one reader reads"
        );
        self.text.push_str(cell);
        match u32::try_from(self.text.len()) {
            Ok(end) => {
                self.ends.push(end);
                true
            }
            Err(_) => false,
        }
    }

    /// Appends a parsed cell: its value, or (`None`) the text of a cell that did not parse.
    fn push_value(&mut self, value: Option<f64>, cell: &str) {
        if value.is_none() {
            self.unreadable.push((self.values.len(), cell.to_string()));
        }
        self.values.push(value.unwrap_or(f64::NAN));
    }

    /// The first row whose cell did not parse, and its text (a parsed column).
    fn first_unreadable(&self) -> Option<(usize, &str)> {
        let own = self.unreadable.first().map(|(r, t)| (*r, t.as_str()));
        own.or_else(|| {
            let (r, t) = self.after.as_ref()?.first_unreadable()?;
            Some((self.values.len() + r, t))
        })
    }

    /// The same column with the rows where `keep` is false left out, each half on its own (so
    /// neither can pass 4 GiB).
    fn retain(&self, keep: &[bool]) -> ColumnText {
        let (mine, later) = keep.split_at(self.len().min(keep.len()));
        let mut kept = ColumnText {
            parsed: self.parsed,
            ..ColumnText::default()
        };
        if self.parsed {
            // Each kept row's new index, for the unreadable cells.
            let mut index = Vec::with_capacity(mine.len());
            for (value, &k) in self.values.iter().zip(mine) {
                index.push(kept.values.len());
                if k {
                    kept.values.push(*value);
                }
            }
            kept.unreadable = (self.unreadable.iter())
                .filter(|(r, _)| mine[*r])
                .map(|(r, t)| (index[*r], t.clone()))
                .collect();
        } else {
            for (cell, _) in self.own_cells().zip(mine).filter(|(_, k)| **k) {
                kept.push(cell);
            }
        }
        kept.after = self
            .after
            .as_ref()
            .map(|after| Box::new(after.retain(later)));
        kept
    }
}

/// The delimiters a header row may use, the comma first (the default).
const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// The delimiter of a file whose first line is `header`: the one of [`DELIMITERS`] it holds
/// most often outside quotes (`;` in much of Europe, tab in `.tsv` files), else the comma.
pub(crate) fn delimiter_of(header: &[u8]) -> u8 {
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

/// Records read before the columns' final sizes are estimated and reserved.
const SAMPLE_RECORDS: usize = 1024;

/// Files at least this large are read in two halves side by side when the pool has threads.
const SPLIT_BYTES: u64 = 8 << 20;

/// Reads a CSV file with a header row; every record must have one field per column. The
/// delimiter is the header's: a comma, a semicolon, a tab or a bar.
pub fn read_text(path: &Path) -> Result<TextCsv> {
    read_parsing(path, &|_| None)
}

/// The file's records that start before byte `bytes` (all of them in a smaller file), as
/// [`read_text`] reads them: a sample of a large file's first rows.
pub fn read_head(path: &Path, bytes: u64) -> Result<TextCsv> {
    let (mut head, header, _) = open_at_header(path)?;
    let parsers: Vec<Option<CellParser>> = vec![None; header.len()];
    let mut records = Records::new(&parsers);
    head.read_until(bytes, &mut records, path)?;
    Ok(records.into_csv(path, header))
}

/// [`read_text`], where each column that `parser_of` (given the column's name) gives a parser
/// is parsed as it is read and keeps no text.
pub fn read_parsing<'a>(
    path: &Path,
    parser_of: &dyn Fn(&str) -> Option<CellParser<'a>>,
) -> Result<TextCsv> {
    let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let split = file_bytes >= SPLIT_BYTES && rayon::current_num_threads() > 1;
    read_text_at(path, split.then_some(file_bytes / 2), parser_of)
}

/// [`read_text`]; with `half`, the records from the first line end at or after that byte are
/// read by a second reader side by side with the first. The first reader checks that a record
/// starts there (a line end inside a quoted cell is not a record's end) and else reads on
/// alone, so the records are always those one reader finds.
pub(crate) fn read_text_at<'a>(
    path: &Path,
    half: Option<u64>,
    parser_of: &dyn Fn(&str) -> Option<CellParser<'a>>,
) -> Result<TextCsv> {
    let (mut head, header, delimiter) = open_at_header(path)?;
    let parsers: Vec<Option<CellParser>> = header.iter().map(|h| parser_of(h)).collect();
    let boundary = match half {
        Some(byte) => line_start_after(path, byte)?,
        None => None,
    };
    let Some(boundary) = boundary else {
        let mut records = Records::new(&parsers);
        head.read_until(u64::MAX, &mut records, path)?;
        return Ok(records.into_csv(path, header));
    };
    let (first, second) = rayon::join(
        || {
            let mut records = Records::new(&parsers);
            let next = head.read_until(boundary, &mut records, path)?;
            Ok::<_, EmberError>((head, records, next))
        },
        || -> Result<Records> {
            let mut records = Records::new(&parsers);
            Reader::open(path, delimiter, boundary)?.read_until(u64::MAX, &mut records, path)?;
            Ok(records)
        },
    );
    let (mut head, mut records, next) = first?;
    match (next, second) {
        // The file ended before the second half's first record.
        (None, _) => {}
        (Some(at), Ok(second)) if at == boundary => {
            // The held record starts the cut's line.
            records.append(second, head.scanner.line() - 1);
        }
        // The second reader began inside a record, or met an error (whose line it cannot
        // number): this reader reads the rest itself.
        (Some(at), second) => {
            drop(second);
            reserve(&mut records, head.bytes as f64 / at.max(1) as f64);
            head.read_until(u64::MAX, &mut records, path)?;
        }
    }
    Ok(records.into_csv(path, header))
}

/// A reader of the file from its start, past its header row; the header's names; and the
/// delimiter, the header's.
fn open_at_header(path: &Path) -> Result<(Reader, Vec<String>, u8)> {
    let delimiter = delimiter_of(&first_line(path)?);
    let mut head = Reader::open(path, delimiter, 0)?;
    let header = head.header().map_err(|what| EmberError::file(path, what))?;
    Ok((head, header, delimiter))
}

/// Where a second reader may start: the byte after the first `\n` at or after `byte`. `None`
/// when the file has no line end there, or when a byte-order mark follows it (a reader skips
/// one at the file's start only, but the second reader's start must read as one reader would).
fn line_start_after(path: &Path, byte: u64) -> Result<Option<u64>> {
    use std::io::{BufRead, Read, Seek};
    let fail = |e: std::io::Error| EmberError::file(path, io(&e));
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut reader = std::io::BufReader::new(file);
    reader.seek(std::io::SeekFrom::Start(byte)).map_err(fail)?;
    let mut line = Vec::new();
    let n = reader.read_until(b'\n', &mut line).map_err(fail)? as u64;
    let mut next = Vec::new();
    reader.take(3).read_to_end(&mut next).map_err(fail)?;
    Ok(match line.as_slice() {
        _ if next == [0xEF, 0xBB, 0xBF] => None,
        [.., b'\n'] => Some(byte + n),
        _ => None,
    })
}

fn io(e: &std::io::Error) -> String {
    crate::fs::describe_io(e)
}

/// Each column's cells and each record's line, as records are read.
struct Records<'a> {
    columns: Vec<ColumnText>,
    /// The parser of each column parsed as read.
    parsers: &'a [Option<CellParser<'a>>],
    lines: Vec<u64>,
}

impl<'a> Records<'a> {
    fn new(parsers: &'a [Option<CellParser<'a>>]) -> Records<'a> {
        let column = |p: &Option<CellParser>| match p {
            Some(_) => ColumnText::parsed(),
            None => ColumnText::default(),
        };
        Records {
            columns: parsers.iter().map(column).collect(),
            parsers,
            lines: Vec::new(),
        }
    }

    /// Appends the records of a later stretch of the file, read by a reader that numbered its
    /// first line 1: that line is line `lines_before + 1` of the file. Their text stays where
    /// it was read, not copied.
    fn append(&mut self, later: Records<'a>, lines_before: u64) {
        for (column, more) in self.columns.iter_mut().zip(later.columns) {
            column.after = Some(Box::new(more));
        }
        self.lines
            .extend(later.lines.iter().map(|l| l + lines_before));
    }

    /// Appends a record's cells, trimmed of white space; it must have one per column.
    fn push<'c>(
        &mut self,
        line: u64,
        cells: impl Iterator<Item = &'c str>,
    ) -> std::result::Result<(), String> {
        let mut count = 0;
        for cell in cells {
            if let Some(column) = self.columns.get_mut(count) {
                let cell = trim(cell);
                match self.parsers[count] {
                    Some(parse) => column.push_value(parse(cell), cell),
                    None => {
                        if !column.push(cell) {
                            return Err(format!("line {line}: {OVER_4_GIB}"));
                        }
                    }
                }
            }
            count += 1;
        }
        if count != self.columns.len() {
            return Err(format!(
                "line {line}: {count} fields, but the header has {}",
                self.columns.len()
            ));
        }
        self.lines.push(line);
        Ok(())
    }

    fn into_csv(self, path: &Path, header: Vec<String>) -> TextCsv {
        TextCsv {
            path: path.to_path_buf(),
            header,
            columns: self.columns,
            lines: self.lines,
        }
    }
}

/// `cell` without white space at either end. Most cells begin and end with a printable ASCII
/// byte, which is never white space, and skip `str::trim`'s scan for Unicode white space.
fn trim(cell: &str) -> &str {
    let printable = |b: Option<&u8>| b.is_some_and(|b| (0x21..0x7f).contains(b));
    match printable(cell.as_bytes().first()) && printable(cell.as_bytes().last()) {
        true => cell,
        false => cell.trim(),
    }
}

const OVER_4_GIB: &str = "a column holds over 4 GiB of text; ember reads tables up to that";

/// A reader of a file from one byte on, into columns of text.
struct Reader {
    scanner: Scanner,
    /// Where the reader began, and the file's bytes from there on: for the estimate of what
    /// the columns will hold.
    start: u64,
    bytes: u64,
}

impl Reader {
    /// A reader from byte `start`, which numbers its line 1.
    fn open(path: &Path, delimiter: u8, start: u64) -> Result<Reader> {
        let fail = |e: std::io::Error| EmberError::file(path, io(&e));
        let file = std::fs::File::open(path).map_err(fail)?;
        let bytes = file.metadata().map_err(fail)?.len().saturating_sub(start);
        Ok(Reader {
            scanner: Scanner::new(file, start, delimiter).map_err(fail)?,
            start,
            bytes,
        })
    }

    /// The header row's names (the first record, trimmed); an empty header, or one naming a
    /// column twice, is an error.
    fn header(&mut self) -> std::result::Result<Vec<String>, String> {
        let header: Vec<String> = match self.scanner.next(u64::MAX, true).map_err(|e| io(&e))? {
            Next::Record { cells, .. } => cells.map(|c| c.trim().to_string()).collect(),
            Next::NotUtf8(line) => return Err(format!("line {line}: {NOT_UTF8}")),
            Next::End | Next::Held(_) => Vec::new(),
        };
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

    /// Reads records into `records` until the end of the file, or until a record starts at or
    /// after byte `stop`: then that record is left unread, and its byte is returned.
    fn read_until(&mut self, stop: u64, records: &mut Records, path: &Path) -> Result<Option<u64>> {
        let fail = |what: String| EmberError::file(path, what);
        let start = self.start;
        loop {
            let (line, cells) = match self.scanner.next(stop, false).map_err(|e| fail(io(&e)))? {
                Next::End => return Ok(None),
                Next::Held(at) => return Ok(Some(at)),
                Next::NotUtf8(line) => return Err(fail(format!("line {line}: {NOT_UTF8}"))),
                Next::Record { line, cells } => (line, cells),
            };
            records.push(line, cells).map_err(fail)?;
            if records.lines.len() == SAMPLE_RECORDS {
                // What this reader will read: up to `stop`, or to the end of the file.
                let end = stop.min(start + self.bytes);
                let read = (self.scanner.at() - start).max(1);
                reserve(records, (end - start) as f64 / read as f64);
            }
        }
    }
}

/// Reserves what the whole file will need, `scale` times what its first records hold (with a
/// tenth more): growing a column's text by doubling would touch twice its final size.
fn reserve(records: &mut Records, scale: f64) {
    let more = |have: usize| ((have as f64 * scale * 1.1) as usize).saturating_sub(have);
    for column in &mut records.columns {
        column.text.reserve(more(column.text.len()));
        column.ends.reserve(more(column.ends.len()));
        column.values.reserve(more(column.values.len()));
    }
    records.lines.reserve(more(records.lines.len()));
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

    /// Whether column `c` was parsed as it was read: it has values, not text.
    pub fn is_parsed(&self, c: usize) -> bool {
        self.columns[c].parsed
    }

    /// The values of column `c`, parsed as it was read (NaN where a cell was missing or did not
    /// parse), in the two parts its readers read: the rows of the second follow the first's
    /// (it is empty when one reader read the file).
    pub fn value_halves(&self, c: usize) -> [&[f64]; 2] {
        let column = &self.columns[c];
        let after = column.after.as_ref().map_or(&[][..], |a| &a.values[..]);
        [&column.values, after]
    }

    /// The first row of column `c`, parsed as it was read, whose cell did not parse, and the
    /// cell's text.
    pub fn first_unreadable(&self, c: usize) -> Option<(usize, &str)> {
        self.columns[c].first_unreadable()
    }

    /// The text of column `c`, row by row, with each row's line.
    pub fn texts(&self, c: usize) -> impl Iterator<Item = (&str, u64)> {
        let column = &self.columns[c];
        let after = column.after.iter().flat_map(|a| a.own_cells());
        column
            .own_cells()
            .chain(after)
            .zip(self.lines.iter().copied())
    }
}

#[cfg(test)]
impl TextCsv {
    /// Every record's line and cells, for tests that compare two readings of a file.
    pub(crate) fn lines_and_cells(&self) -> Vec<(u64, Vec<String>)> {
        (0..self.rows())
            .map(|r| (self.line(r), self.record(r).map(str::to_string).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &[u8]) -> std::path::PathBuf {
        crate::data::test_file("text-csv", name, text)
    }

    fn rows(csv: &TextCsv) -> Vec<(u64, Vec<String>)> {
        csv.lines_and_cells()
    }

    /// What cuts a file badly: quoted cells holding line ends, delimiters and quotes, blank
    /// lines (CRLF too), a quote inside an unquoted cell, a byte-order mark starting a line.
    const AWKWARD: &str = "a,b,c\n1,\"x\ny\",3\n\n4,5,NA\r\n\r\n7,\"q\"\"\n,\",9\n10,ab\"c,12\n\u{feff}19,20,21\n\n\n13, 14 ,15\n\"16\",\"\n\n\",18";

    #[test]
    fn two_readers_read_what_one_does_wherever_the_file_is_cut() {
        let path = file("awkward.csv", AWKWARD.as_bytes());
        let one = read_text_at(&path, None, &|_| None).unwrap();
        assert_eq!(one.rows(), 7);
        assert_eq!(one.line(6), 14);
        assert_eq!(
            one.cell(0, 4),
            "\u{feff}19",
            "a byte-order mark inside the file is text"
        );
        let labelled = |mut csv: TextCsv| {
            let missing = crate::data::columns::Missing::default();
            assert_eq!(csv.drop_missing_labels(&["c".into()], &missing).unwrap(), 1);
            rows(&csv)
        };
        let one_labelled = labelled(read_text_at(&path, None, &|_| None).unwrap());
        for byte in 0..=AWKWARD.len() as u64 + 1 {
            let two = read_text_at(&path, Some(byte), &|_| None).unwrap();
            assert_eq!(two.header, one.header, "cut at {byte}");
            assert_eq!(rows(&two), rows(&one), "cut at {byte}");
            assert_eq!(labelled(two), one_labelled, "cut at {byte}");
        }
    }

    #[test]
    fn a_column_parsed_as_read_holds_what_its_text_parses_to_wherever_the_file_is_cut() {
        let path = file("parsed.csv", AWKWARD.as_bytes());
        let parse = |t: &str| match t {
            "NA" => Some(f64::NAN),
            _ => t.parse::<f64>().ok(),
        };
        // Column `a` parsed as read (its byte-order-marked "19" does not parse); `c`, the
        // label, stays text.
        let parser_of = |name: &str| (name == "a").then_some(&parse as CellParser);
        // Column a's values as bits, and its first cell that did not parse.
        let parsed = |csv: &TextCsv| {
            let first = csv.first_unreadable(0).map(|(r, t)| (r, t.to_string()));
            (
                csv.value_halves(0)
                    .concat()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                first,
            )
        };
        let from_text = |csv: &TextCsv| {
            let value = |r: usize| parse(csv.cell(0, r));
            let bits = (0..csv.rows()).map(|r| value(r).unwrap_or(f64::NAN).to_bits());
            let first = (0..csv.rows()).find(|&r| value(r).is_none());
            (
                bits.collect(),
                first.map(|r| (r, csv.cell(0, r).to_string())),
            )
        };
        let missing = crate::data::columns::Missing::default();
        let label = |csv: &mut TextCsv| csv.drop_missing_labels(&["c".into()], &missing).unwrap();
        let mut text = read_text_at(&path, None, &|_| None).unwrap();
        let expected = from_text(&text);
        assert_eq!(expected.1, Some((4, "\u{feff}19".to_string())));
        assert_eq!(label(&mut text), 1);
        let expected_labelled = from_text(&text);
        for byte in [None]
            .into_iter()
            .chain((0..=AWKWARD.len() as u64 + 1).map(Some))
        {
            let mut read = read_text_at(&path, byte, &parser_of).unwrap();
            assert_eq!(parsed(&read), expected, "cut at {byte:?}");
            assert_eq!(read.texts(1).count(), 7);
            // Rows left out for a missing label: the values and unreadable cells follow them.
            assert_eq!(label(&mut read), 1);
            assert_eq!(parsed(&read), expected_labelled, "cut at {byte:?}");
            assert_eq!(rows_of(&read, 1), rows_of(&text, 1), "cut at {byte:?}");
        }
    }

    /// Column `c`'s text with each row's line.
    fn rows_of(csv: &TextCsv, c: usize) -> Vec<(String, u64)> {
        csv.texts(c).map(|(t, l)| (t.to_string(), l)).collect()
    }

    #[test]
    fn lf_and_crlf_files_are_read_in_two_halves() {
        for end in ["\n", "\r\n"] {
            let rows_text: String = (0..100).map(|i| format!("{i},{}{end}", 2 * i)).collect();
            let text = format!("a,b{end}{rows_text}");
            let path = file(&format!("halves-{}.csv", end.len()), text.as_bytes());
            let one = read_text_at(&path, None, &|_| None).unwrap();
            let two = read_text_at(&path, Some(text.len() as u64 / 2), &|_| None).unwrap();
            assert!(
                two.columns[0].after.is_some(),
                "{end:?}: the second half was kept"
            );
            assert_eq!(rows(&two), rows(&one), "{end:?}");
        }
    }

    #[test]
    fn an_error_after_the_cut_names_the_files_line() {
        let mut bad_utf8 = b"a,b\n1,2\n3,4\n\n5,6\n7,\xff\n9,10\n".to_vec();
        let short = b"a,b\n1,2\n3,4\n\n5,6\n7\n9,10\n".to_vec();
        for (name, text, error) in [
            ("utf8.csv", &mut bad_utf8, "line 6: not valid UTF-8 text"),
            (
                "short.csv",
                &mut short.clone(),
                "line 6: 1 fields, but the header has 2",
            ),
        ] {
            let path = file(name, text);
            for byte in 0..=text.len() as u64 {
                let err = read_text_at(&path, Some(byte), &|_| None)
                    .err()
                    .unwrap()
                    .to_string();
                assert!(err.ends_with(error), "cut at {byte}: {err}");
            }
        }
    }
}
