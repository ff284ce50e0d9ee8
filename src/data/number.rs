//! A table cell's number, as Rust's own parser reads it, faster for the plain decimals most
//! cells hold ("-1.39028", "42"): their digits are read here and the value computed as Rust's
//! parser computes it for them (Clinger's fast path: an exact integer divided by an exact power
//! of ten, one correctly rounded division), so the bits are the same. Any other spelling
//! (an exponent, many digits, `inf`, text) goes to `str::parse`.

/// Powers of ten that f64 holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The largest integer below which every integer is an exact f64.
const EXACT_INTEGERS: u64 = 1 << 53;

/// `cell`'s value when it is a finite number, else `None`.
pub fn finite(cell: &str) -> Option<f64> {
    match plain_decimal(cell.as_bytes()) {
        Some(v) => Some(v),
        None => cell.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// The value of `[+-]digits[.digits]` (a digit on at least one side of the point) when its
/// digits make an integer below 2^53 and it has at most 22 after the point; else `None`.
fn plain_decimal(bytes: &[u8]) -> Option<f64> {
    let first = *bytes.first()?;
    // The sign is read without a branch on it: half the cells of a centred column have one.
    let negative = first == b'-';
    let signed = usize::from(negative || first == b'+');
    let (mantissa, point) = digits_from(bytes, signed, 0);
    let (mantissa, end, decimals) = match bytes.get(point) {
        Some(b'.') => {
            let (m, end) = digits_from(bytes, point + 1, mantissa);
            (m, end, end - point - 1)
        }
        _ => (mantissa, point, 0),
    };
    // 19 digits always fit in a u64; longer ones (whose mantissa may have wrapped) go to the
    // full parser.
    let count = (point - signed) + decimals;
    if end != bytes.len() || count == 0 || count > 19 || mantissa > EXACT_INTEGERS {
        return None;
    }
    let value = mantissa as f64 / *EXACT_POWERS.get(decimals)?;
    Some(if negative { -value } else { value })
}

/// `mantissa` extended by the digits of `bytes` from `i` on (four at a time while there are
/// four), and the index of the first byte that is not a digit. Wraps past 20 digits.
fn digits_from(bytes: &[u8], mut i: usize, mut mantissa: u64) -> (u64, usize) {
    while let Some(&chunk) = bytes.get(i..).and_then(|rest| rest.first_chunk::<4>()) {
        match four_digits(u32::from_le_bytes(chunk)) {
            Some(v) => mantissa = mantissa.wrapping_mul(10_000).wrapping_add(u64::from(v)),
            None => break,
        }
        i += 4;
    }
    while let Some(d) = bytes
        .get(i)
        .map(|b| b.wrapping_sub(b'0'))
        .filter(|d| *d <= 9)
    {
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    (mantissa, i)
}

/// The value of four ASCII digits (the first in the lowest byte of `chunk`), or `None` when a
/// byte is not a digit: the digits are paired, then the pairs joined, in three multiplications
/// where a loop would take four dependent steps.
fn four_digits(chunk: u32) -> Option<u32> {
    let v = chunk.wrapping_sub(0x3030_3030);
    // A byte above '9' sets its high bit when 0x46 is added; one below '0' wrapped above 0x7f.
    if (chunk.wrapping_add(0x4646_4646) | v) & 0x8080_8080 != 0 {
        return None;
    }
    let pairs = v.wrapping_mul(10).wrapping_add(v >> 8) & 0x00ff_00ff;
    Some((pairs.wrapping_mul(1 + (100 << 16)) >> 16) & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn std_parse(cell: &str) -> Option<f64> {
        cell.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    #[test]
    fn every_cell_reads_as_rusts_parser_reads_it() {
        let fixed = [
            "0",
            "-0",
            "+0",
            "-0.0",
            "0.97624",
            "-1.39028",
            "42",
            "007",
            "5.",
            ".5",
            "-.5",
            ".",
            "-",
            "+",
            "",
            "1e5",
            "1E-3",
            "inf",
            "-inf",
            "NaN",
            "nan",
            "1.2.3",
            "1,5",
            " 1",
            "1 ",
            "0x10",
            "9007199254740992",
            "9007199254740993",
            "12345678901234567890",
            "0.1234567890123456789012",
            "0.12345678901234567890123",
            "1_000",
            "١٢",
            "3.14159",
            "123456.789",
            "-99999999.99999999",
            "0.3",
            "2.675",
            "1e400",
            "-1e-400",
            "1234.5678",
            "12345678",
            "-.1234",
            "0.0001",
            "9999.9999",
            "12/4",
            "1:34",
            "123456789012345678.9",
            "1234567890123456789.0",
            "12345678901234567890.5",
            "00000000000000000000001",
        ];
        for cell in fixed {
            let (ours, theirs) = (finite(cell), std_parse(cell));
            assert_eq!(ours.map(f64::to_bits), theirs.map(f64::to_bits), "{cell:?}");
        }
        // Random decimals of every length and precision.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200_000 {
            let whole = next() % 10u64.pow((next() % 12) as u32);
            let places = (next() % 12) as usize;
            let frac = next() % 10u64.pow(places as u32);
            let sign = ["", "-", "+"][(next() % 3) as usize];
            let cell = if places == 0 {
                format!("{sign}{whole}")
            } else {
                format!("{sign}{whole}.{frac:0places$}")
            };
            let (ours, theirs) = (finite(&cell), std_parse(&cell));
            assert_eq!(ours.map(f64::to_bits), theirs.map(f64::to_bits), "{cell:?}");
        }
    }
}
