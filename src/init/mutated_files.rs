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

/// What `init` made of `path`: a draft that parses and checks, or an error of one line.
fn outcome(path: &std::path::Path) -> Result<(), String> {
    match from_csv(path, "species") {
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
    let dir = std::env::temp_dir().join(format!("ember-mutated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv");
    let mut rng = Lcg(2026);
    let (mut drafted, mut refused) = (0, 0);
    for case in 0..3000 {
        let mut text = BASE.as_bytes().to_vec();
        for _ in 0..=rng.below(3) {
            text = mutate(&mut rng, text);
        }
        std::fs::write(&path, &text).unwrap();
        let kept = text.clone();
        let result = std::panic::catch_unwind(|| outcome(&path));
        match result {
            Ok(Ok(())) => match from_csv(&path, "species") {
                Ok(_) => drafted += 1,
                Err(_) => refused += 1,
            },
            Ok(Err(why)) => panic!("case {case}: {why}\n{}", String::from_utf8_lossy(&kept)),
            Err(_) => panic!(
                "case {case} panicked on\n{}",
                String::from_utf8_lossy(&kept)
            ),
        }
    }
    // A 10 MB cell reads (or is refused) like any other.
    let mut huge = BASE.replacen("Torgersen", &"x".repeat(10 << 20), 1);
    huge.push('\n');
    std::fs::write(&path, huge).unwrap();
    assert_eq!(outcome(&path), Ok(()));
    eprintln!("3000 mutated files: {drafted} drafted, {refused} refused with one line");
    // Both kinds happen: the mutations neither always break nor never break a file.
    assert!(
        drafted > 300 && refused > 300,
        "{drafted} drafted, {refused} refused"
    );
}

/// What a reader made of a file: every record's line and cells, or its error.
fn records(csv: crate::error::Result<crate::data::table::TextCsv>) -> Result<Vec<String>, String> {
    let csv = csv.map_err(|e| e.to_string())?;
    let rows =
        (0..csv.rows()).map(|r| format!("{} {:?}", csv.line(r), csv.record(r).collect::<Vec<_>>()));
    Ok(std::iter::once(format!("{:?}", csv.header))
        .chain(rows)
        .collect())
}

#[test]
fn two_readers_read_mutated_files_as_one_does() {
    use crate::data::text_csv::read_text_at;
    let dir = std::env::temp_dir().join(format!("ember-mutated-halves-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv");
    let mut rng = Lcg(2026);
    for case in 0..3000 {
        let mut text = BASE.as_bytes().to_vec();
        for _ in 0..=rng.below(3) {
            text = mutate(&mut rng, text);
        }
        std::fs::write(&path, &text).unwrap();
        let one = records(read_text_at(&path, None));
        // Cuts spread over the file without drawing from `rng`, so the cases are the other
        // test's.
        for cut in [text.len() / 2, case * 7919 % (text.len() + 1)] {
            let two = records(read_text_at(&path, Some(cut as u64)));
            assert_eq!(two, one, "case {case}, cut at {cut}");
        }
    }
}
