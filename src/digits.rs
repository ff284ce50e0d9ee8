//! Numbers written for a reader: a few significant digits, no trailing zeros.

/// `x` with `digits` significant digits and no trailing zeros: plain between 1e-3 and 1e5,
/// scientific (`6.027e-4`) outside.
pub fn significant(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return x.to_string();
    }
    // The exponent after rounding (9.99996 is 1.000e1), which log10 would not give.
    let text = format!("{:.*e}", digits.saturating_sub(1), x);
    let (mantissa, exponent) = text.split_once('e').expect("{:e} writes an exponent");
    let magnitude: i32 = exponent.parse().expect("{:e} writes an integer exponent");
    if !(-3..5).contains(&magnitude) {
        return format!("{}e{exponent}", trim_zeros(mantissa));
    }
    let decimals = (digits as i32 - 1 - magnitude).max(0) as usize;
    trim_zeros(&format!("{x:.decimals$}")).to_string()
}

/// `1.500` -> `1.5`, `2.000` -> `2`; a number without a decimal point is left alone.
fn trim_zeros(text: &str) -> &str {
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.'),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(significant(0.0006026821186406843, 4), "6.027e-4");
        assert_eq!(significant(0.0012281700079880757, 4), "0.001228");
        assert_eq!(significant(0.1, 4), "0.1");
        assert_eq!(significant(0.30000000000000004, 4), "0.3");
        assert_eq!(significant(3e-4, 4), "3e-4");
        assert_eq!(significant(1e-3, 4), "0.001");
        assert_eq!(significant(2.5, 4), "2.5");
        assert_eq!(significant(41505.684, 4), "41506");
        assert_eq!(significant(123456.0, 4), "1.235e5");
        assert_eq!(significant(-0.000123456, 4), "-1.235e-4");
        assert_eq!(significant(0.0, 4), "0");
        assert_eq!(significant(0.99996, 4), "1");
    }
}
