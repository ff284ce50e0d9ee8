//! The records of a CSV file, from one byte on, as the csv crate reads them, but faster: a line
//! with no quote, and no carriage return before its end, is split at the delimiter directly
//! (its end found with `memchr`); only the other records go through `csv_core`'s parser, the
//! csv crate's own. Blank lines are skipped, and each record is numbered with its line in the
//! file, counted here as the bytes go by (the csv crate's numbers are one short after CRLF line
//! ends and blank lines: rust-csv issues 395 and 208), so the file is read once.

use std::io::Read;

/// Bytes read from the file at a time; the buffer grows past it only for a longer record.
const CHUNK: usize = 1 << 20;

/// A reader of one stretch of a CSV file, whose first line is numbered 1.
pub(super) struct Scanner {
    file: std::fs::File,
    buf: Vec<u8>,
    /// The unread bytes are `buf[pos..len]`; the file has no more when `eof`.
    pos: usize,
    len: usize,
    eof: bool,
    /// The file offset of `buf[0]`.
    offset: u64,
    /// The line of `buf[pos]`.
    line: u64,
    delimiter: u8,
    /// The parser of records with quotes or stray carriage returns, and its last record: the
    /// fields' bytes, their ends, and whether every field is UTF-8.
    core: csv_core::Reader,
    output: Vec<u8>,
    ends: Vec<usize>,
    fields: usize,
    utf8: bool,
}

/// What [`Scanner::next`] found.
pub(super) enum Next<'a> {
    /// The end of the file.
    End,
    /// A record starting at this byte, at or after the stop: left unread.
    Held(u64),
    /// A record that is not UTF-8 text, on this line.
    NotUtf8(u64),
    /// A record: its line and its cells, untrimmed.
    Record { line: u64, cells: Cells<'a> },
}

/// A record's cells: the parts of a plain line, or the fields `csv_core` wrote.
pub(super) enum Cells<'a> {
    /// The rest of a line from byte `at`, cut at the delimiter (none once the last is taken).
    Line {
        text: &'a str,
        at: Option<usize>,
        delimiter: u8,
    },
    Fields {
        text: &'a str,
        ends: &'a [usize],
        at: usize,
    },
}

impl<'a> Iterator for Cells<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        match self {
            Cells::Line {
                text,
                at,
                delimiter,
            } => {
                // memchr's search, not `str::split`'s: the cells are short, and std's search
                // of each cost a tenth of reading a large table.
                let start = (*at)?;
                let rest = &text.as_bytes()[start..];
                let end = memchr::memchr(*delimiter, rest).map(|i| start + i);
                *at = end.map(|e| e + 1);
                // The delimiter is ASCII, so the cuts are character boundaries.
                text.get(start..end.unwrap_or(text.len()))
            }
            Cells::Fields { text, ends, at } => {
                let end = *ends.get(*at)?;
                let start = if *at == 0 { 0 } else { ends[*at - 1] };
                *at += 1;
                // Each field was checked to be UTF-8, so its ends are character boundaries.
                text.get(start..end)
            }
        }
    }
}

/// Why a record was refused (after "line N: ").
pub(super) const NOT_UTF8: &str = "not valid UTF-8 text";

/// Where the next record is: a plain line `buf[start..end]`, already consumed, or the fields
/// `csv_core` parsed.
#[derive(Clone, Copy)]
enum Span {
    Plain(usize, usize),
    Parsed,
}

impl Scanner {
    /// A scanner from byte `start` of `file`; at the file's start, a UTF-8 byte-order mark is
    /// skipped (the csv crate strips one there, and nowhere else).
    pub fn new(mut file: std::fs::File, start: u64, delimiter: u8) -> std::io::Result<Scanner> {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(start))?;
        let mut scanner = Scanner {
            file,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            eof: false,
            offset: start,
            line: 1,
            delimiter,
            core: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            output: vec![0; 4096],
            ends: vec![0; 64],
            fields: 0,
            utf8: true,
        };
        // csv_core strips a byte-order mark from its first input: a blank line goes first, so
        // that one starting a later record stays text.
        scanner.core.read_record(b"\n", &mut [], &mut []);
        if start == 0 {
            while scanner.len < 3 && scanner.fill()? {}
            if scanner.buf[..scanner.len].starts_with(b"\xef\xbb\xbf") {
                scanner.pos = 3;
            }
        }
        Ok(scanner)
    }

    /// The file offset of the next unread byte.
    pub fn at(&self) -> u64 {
        self.offset + self.pos as u64
    }

    /// The line the next unread byte is on.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next record, or [`Next::Held`] where it starts at or after byte `stop`. Blank lines
    /// (one cell of white space) are skipped unless `keep_blank` (a header row).
    pub fn next(&mut self, stop: u64, keep_blank: bool) -> std::io::Result<Next<'_>> {
        let (line, span) = loop {
            if !self.skip_line_ends()? {
                return Ok(Next::End);
            }
            let at = self.at();
            if at >= stop {
                return Ok(Next::Held(at));
            }
            let line = self.line;
            let span = match self.plain_line()? {
                Some((start, end)) => Span::Plain(start, end),
                None => {
                    self.parse_record()?;
                    Span::Parsed
                }
            };
            if keep_blank || !self.is_blank(span) {
                break (line, span);
            }
        };
        let cells = match span {
            Span::Plain(start, end) => {
                std::str::from_utf8(&self.buf[start..end])
                    .ok()
                    .map(|text| Cells::Line {
                        text,
                        at: Some(0),
                        delimiter: self.delimiter,
                    })
            }
            Span::Parsed => self
                .utf8
                .then(|| std::str::from_utf8(&self.output[..self.ends[self.fields - 1]]).ok())
                .flatten()
                .map(|text| Cells::Fields {
                    text,
                    ends: &self.ends[..self.fields],
                    at: 0,
                }),
        };
        Ok(cells.map_or(Next::NotUtf8(line), |cells| Next::Record { line, cells }))
    }

    /// Whether a record is a blank line: one cell of white space. One that is not UTF-8 is
    /// not (it is reported).
    fn is_blank(&self, span: Span) -> bool {
        let text = match span {
            Span::Plain(start, end) => {
                let bytes = &self.buf[start..end];
                if memchr::memchr(self.delimiter, bytes).is_some() {
                    return false;
                }
                std::str::from_utf8(bytes).ok()
            }
            Span::Parsed if self.fields == 1 && self.utf8 => {
                std::str::from_utf8(&self.output[..self.ends[0]]).ok()
            }
            Span::Parsed => None,
        };
        text.is_some_and(|t| t.trim().is_empty())
    }

    /// Moves the unread bytes to the buffer's start and reads more after them (the buffer
    /// doubles when they fill it); false when the file had no more.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.buf.copy_within(self.pos..self.len, 0);
        self.offset += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        if self.len == self.buf.len() {
            self.buf.resize(2 * self.buf.len(), 0);
        }
        let n = loop {
            match self.file.read(&mut self.buf[self.len..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                read => break read?,
            }
        };
        self.len += n;
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// Skips line ends (blank lines) at the next unread byte; false at the end of the file.
    fn skip_line_ends(&mut self) -> std::io::Result<bool> {
        loop {
            while let Some(&b) = self.buf[..self.len].get(self.pos) {
                match b {
                    b'\n' => self.line += 1,
                    b'\r' => {}
                    _ => return Ok(true),
                }
                self.pos += 1;
            }
            if !self.fill()? {
                return Ok(false);
            }
        }
    }

    /// The next record as a plain line, consumed: its bytes `buf[start..end]`, without the
    /// line end. `None`, with nothing consumed, where it holds a quote or a carriage return
    /// before its end: the csv parser reads it.
    fn plain_line(&mut self) -> std::io::Result<Option<(usize, usize)>> {
        let mut searched = 0;
        let newline = loop {
            let from = self.pos + searched;
            if let Some(i) = memchr::memchr(b'\n', &self.buf[from..self.len]) {
                break Some(from + i);
            }
            searched = self.len - self.pos;
            if !self.fill()? {
                break None;
            }
        };
        let end = newline.unwrap_or(self.len);
        let body = match newline {
            Some(n) if n > self.pos && self.buf[n - 1] == b'\r' => n - 1,
            _ => end,
        };
        if memchr::memchr2(b'"', b'\r', &self.buf[self.pos..body]).is_some() {
            return Ok(None);
        }
        let start = self.pos;
        self.pos = newline.map_or(end, |n| n + 1);
        self.line += u64::from(newline.is_some());
        Ok(Some((start, body)))
    }

    /// Parses the next record with csv_core, consuming it (and counting the line ends inside
    /// quoted cells): its fields go to `output`, `ends` and `fields`.
    fn parse_record(&mut self) -> std::io::Result<()> {
        use csv_core::ReadRecordResult as R;
        let (mut out, mut end) = (0, 0);
        loop {
            let input = &self.buf[self.pos..self.len];
            let (result, nin, nout, nend) =
                (self.core).read_record(input, &mut self.output[out..], &mut self.ends[end..]);
            self.line += memchr::memchr_iter(b'\n', &input[..nin]).count() as u64;
            self.pos += nin;
            out += nout;
            end += nend;
            match result {
                R::InputEmpty => {
                    // At the end of the file, the empty input tells csv_core so.
                    self.fill()?;
                }
                R::OutputFull => self.output.resize(2 * self.output.len(), 0),
                R::OutputEndsFull => self.ends.resize(2 * self.ends.len(), 0),
                R::Record | R::End => break,
            }
        }
        if end == 0 {
            // Only an End with nothing read could leave no field: an empty record.
            self.ends[0] = 0;
            end = 1;
        }
        self.fields = end;
        self.utf8 = (0..end).all(|i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            std::str::from_utf8(&self.output[start..self.ends[i]]).is_ok()
        });
        Ok(())
    }
}
