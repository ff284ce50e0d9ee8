//! `ember init` and the CSV reader on thousands of mutated files: truncated rows, stray quotes,
//! binary and non-UTF-8 bytes, a huge cell, duplicate header names, a BOM, CRLF line ends and
//! other delimiters. None may panic; each either drafts a job file that parses and checks, or
//! fails with one line.

use super::from_csv;
use crate::config::{RawConfig, parse};

/// A 64-bit LCG: the mutations are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

const BASE: &str = include_str!("../../examples/penguins.csv");

/// `text` with one mutation drawn by `rng`.
fn mutate(rng: &mut Lcg, text: Vec<u8>) -> Vec<u8> {
    let mut t = text;
    let at = rng.below(t.len() + 1);
    match rng.below(10) {
        0 => t.truncate(at),
        1 => t.insert(at, b'"'),
        2 => {
            let bytes = [0u8, 0xff, 0xfe, 0xc3, 0x80, b'\r', b'\n', b','];
            t.insert(at, bytes[rng.below(bytes.len())]);
        }
        3 if !t.is_empty() => {
            let i = at.min(t.len() - 1);
            t[i] = rng.below(256) as u8;
        }
        4 => {
            // A column renamed to another's name (the label's, or an input's).
            let twin = ["species", "sex"][rng.below(2)];
            let text = String::from_utf8_lossy(&t).replacen("island", twin, 1);
            t = text.into_bytes();
        }
        5 => t.splice(0..0, *b"\xef\xbb\xbf").for_each(drop),
        6 => {
            t = String::from_utf8_lossy(&t)
                .replace('\n', "\r\n")
                .into_bytes()
        }
        7 => {
            let sep = [b';', b'\t', b'|'][rng.below(3)];
            t.iter_mut().filter(|b| **b == b',').for_each(|b| *b = sep);
        }
        8 => {
            if let Some(i) = t[at..].iter().position(|b| *b == b',') {
                t.remove(at + i);
            }
        }
        _ => t.splice(at..at, *b"\n,,,\n").for_each(drop),
    }
    t
}

/// The mutated files both tests read, the same on every run: one to four mutations each.
fn mutated_files() -> impl Iterator<Item = (usize, Vec<u8>)> {
    let mut rng = Lcg(2026);
    (0..3000).map(move |case| {
        let mut text = BASE.as_bytes().to_vec();
        for _ in 0..=rng.below(3) {
            text = mutate(&mut rng, text);
        }
        (case, text)
    })
}

/// What `init` made of `path`: a draft that parses and checks, or an error of one line.
fn outcome(path: &std::path::Path) -> Result<(), String> {
    match from_csv(path, "species", &[]) {
        Ok(draft) => {
            let raw: RawConfig = parse(path, &draft.toml).map_err(|e| e.to_string())?;
            raw.check()
                .map(drop)
                .map_err(|e| format!("drafted job: {e}"))
        }
        Err(e) if e.to_string().contains('\n') => Err(format!("a multi-line error: {e}")),
        Err(_) => Ok(()),
    }
}

#[test]
fn init_survives_thousands_of_mutated_files() {
    let (mut drafted, mut refused) = (0, 0);
    for (case, text) in mutated_files() {
        let path = crate::data::test_file("mutated", "t.csv", &text);
        let result = std::panic::catch_unwind(|| outcome(&path));
        match result {
            Ok(Ok(())) => match from_csv(&path, "species", &[]) {
                Ok(_) => drafted += 1,
                Err(_) => refused += 1,
            },
            Ok(Err(why)) => panic!("case {case}: {why}\n{}", String::from_utf8_lossy(&text)),
            Err(_) => panic!(
                "case {case} panicked on\n{}",
                String::from_utf8_lossy(&text)
            ),
        }
    }
    // A 10 MB cell reads (or is refused) like any other.
    let mut huge = BASE.replacen("Torgersen", &"x".repeat(10 << 20), 1);
    huge.push('\n');
    let path = crate::data::test_file("mutated", "t.csv", huge);
    assert_eq!(outcome(&path), Ok(()));
    eprintln!("3000 mutated files: {drafted} drafted, {refused} refused with one line");
    // Both kinds happen: the mutations neither always break nor never break a file.
    assert!(
        drafted > 300 && refused > 300,
        "{drafted} drafted, {refused} refused"
    );
}

/// A reader's header and records (each with its line), or its error.
type Reading = Result<(Vec<String>, Vec<(u64, Vec<String>)>), String>;

fn reading(csv: crate::error::Result<crate::data::table::TextCsv>) -> Reading {
    csv.map(|csv| (csv.header.clone(), csv.lines_and_cells()))
        .map_err(|e| e.to_string())
}

#[test]
fn two_readers_read_mutated_files_as_one_does() {
    use crate::data::text_csv::read_text_at;
    for (case, text) in mutated_files() {
        let path = crate::data::test_file("mutated-halves", "t.csv", &text);
        let one = reading(read_text_at(&path, None, &|_| None));
        // The middle, and a byte that moves over the file from case to case.
        for cut in [text.len() / 2, case * 7919 % (text.len() + 1)] {
            let two = reading(read_text_at(&path, Some(cut as u64), &|_| None));
            assert_eq!(two, one, "case {case}, cut at {cut}");
        }
    }
}

/// What the csv crate reads from `path`, with ember's rules (records trimmed, blank lines
/// skipped, each numbered with its line, one field per column) and its messages: the reader
/// ember had before its own scan (`data::csv_scan`), which must read every file as this does.
fn csv_crate_reading(path: &std::path::Path) -> Reading {
    let text = std::fs::read(path).unwrap();
    let fail = |what: String| crate::error::EmberError::file(path, what).to_string();
    let head = &text[..text.len().min(64 * 1024)];
    let first = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(crate::data::text_csv::delimiter_of(first))
        .flexible(true)
        .from_reader(text.as_slice());
    // A record's line: the line ends before it, and those of blank lines skipped there.
    let line_of = |byte: usize| {
        let blank = text[byte..]
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'));
        let ends = text[..byte].iter().chain(blank).filter(|b| **b == b'\n');
        1 + ends.count() as u64
    };
    let utf8 = |line: u64| fail(format!("line {line}: not valid UTF-8 text"));
    let raw = reader.byte_headers().unwrap().clone();
    let header: Vec<String> = (raw.iter())
        .map(|f| std::str::from_utf8(f).map(|t| t.trim().to_string()))
        .collect::<Result<_, _>>()
        .map_err(|_| utf8(line_of(raw.position().map_or(0, |p| p.byte() as usize))))?;
    if header.iter().all(String::is_empty) {
        return Err(fail("empty file: expected a header row".into()));
    }
    if let Some((_, twice)) = (header.iter().enumerate()).find(|(i, h)| header[..*i].contains(h)) {
        return Err(fail(format!(
            "the header names column \"{twice}\" twice; rename one"
        )));
    }
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| match e.kind() {
            csv::ErrorKind::Utf8 { pos: Some(p), .. } => utf8(line_of(p.byte() as usize)),
            _ => e.to_string(),
        })?;
        let line = line_of(record.position().unwrap().byte() as usize);
        if record.len() == 1 && record[0].trim().is_empty() {
            continue;
        }
        if record.len() != header.len() {
            let n = record.len();
            return Err(fail(format!(
                "line {line}: {n} fields, but the header has {}",
                header.len()
            )));
        }
        records.push((line, record.iter().map(|c| c.trim().to_string()).collect()));
    }
    Ok((header, records))
}

#[test]
fn the_reader_reads_mutated_files_as_the_csv_crate_does() {
    use crate::data::text_csv::read_text_at;
    for (case, text) in mutated_files() {
        let path = crate::data::test_file("mutated-csv", "t.csv", &text);
        let ours = reading(read_text_at(&path, None, &|_| None));
        let theirs = csv_crate_reading(&path);
        assert_eq!(
            ours,
            theirs,
            "case {case}:\n{}",
            String::from_utf8_lossy(&text)
        );
    }
}
