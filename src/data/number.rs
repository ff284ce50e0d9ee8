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
    let (negative, digits) = match bytes.first()? {
        b'-' => (true, &bytes[1..]),
        b'+' => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let (mut mantissa, mut count, mut decimals, mut point) = (0u64, 0usize, 0usize, false);
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                // 19 digits always fit in a u64; longer ones go to the full parser.
                count += 1;
                if count > 19 {
                    return None;
                }
                mantissa = mantissa * 10 + u64::from(b - b'0');
                decimals += usize::from(point);
            }
            b'.' if !point => point = true,
            _ => return None,
        }
    }
    if count == 0 || mantissa > EXACT_INTEGERS {
        return None;
    }
    let value = mantissa as f64 / *EXACT_POWERS.get(decimals)?;
    Some(if negative { -value } else { value })
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
