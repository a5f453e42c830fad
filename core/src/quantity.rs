//! Kubernetes quantities (`500m`, `2Gi`, `1.5`, `1e3`): parsed to a count of thousandths of the
//! base unit, compared by value, and written back in apimachinery's canonical form.
//!
//! The syntax is apimachinery's `resource.Quantity`: an optional sign, a decimal number, and a
//! suffix: binary (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`), decimal (`n` `u` `m` none `k` `M` `G` `T` `P`
//! `E`) or a decimal exponent (`e3`, `E-2`). Values are kept to the thousandth (a milli), as
//! apimachinery's `MilliValue`: a finer value is rounded away from zero (`1n` is `1m`). The test
//! vectors every SDK checks itself against are in `core/vectors/quantity.json`.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// The suffix family a quantity was written in, which its canonical form keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of 1024: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySi,
    /// Powers of 1000: `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSi,
    /// A power of ten written out: `1e3`, `5e-3`.
    DecimalExponent,
}

/// A Kubernetes quantity: a signed count of thousandths of the base unit, and the format it was
/// written in. Equality and order compare the values only (`1Ki == 1024`).
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    millis: i128,
    format: Format,
}

/// Why a text is not a quantity; its message names the text and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: QuantityReason,
}

/// What makes a text not a quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityReason {
    /// The text is empty.
    Empty,
    /// No digits before the suffix.
    NoNumber,
    /// The suffix is none of the known ones.
    UnknownSuffix(String),
    /// The value does not fit (beyond about 1.7e35 base units).
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not a quantity: {}", self.text, self.reason)
    }
}

impl std::error::Error for QuantityError {}

impl fmt::Display for QuantityReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::NoNumber => f.write_str("no number"),
            Self::UnknownSuffix(suffix) => write!(f, "unknown suffix {suffix}"),
            Self::TooLarge => f.write_str("too large"),
        }
    }
}

const DECIMAL_SUFFIXES: [(&str, i32); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl Quantity {
    /// Parses a quantity, e.g. `"500m"`, `"2Gi"`, `"1e3"`.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let fail = |reason| QuantityError { text: text.to_string(), reason };
        if text.is_empty() {
            return Err(fail(QuantityReason::Empty));
        }
        let (negative, rest) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = rest.split_at(int_len);
        let (frac_part, suffix) = match rest.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(fail(QuantityReason::NoNumber));
        }
        let (format, exp10, binary) =
            suffix_scale(suffix).ok_or_else(|| fail(QuantityReason::UnknownSuffix(suffix.into())))?;
        let digits = times(&format!("{int_part}{frac_part}"), 1u64 << (10 * binary));
        let exponent = i64::from(exp10) + 3 - frac_part.len() as i64;
        let millis =
            scale_digits(digits.trim_start_matches('0'), exponent).ok_or_else(|| fail(QuantityReason::TooLarge))?;
        Ok(Self { millis: if negative { -millis } else { millis }, format })
    }

    /// A quantity of `millis` thousandths of the base unit, written in `format`.
    pub fn from_millis(millis: i128, format: Format) -> Self {
        Self { millis, format }
    }

    /// The value in thousandths of the base unit (apimachinery's `MilliValue`).
    pub fn millis(&self) -> i128 {
        self.millis
    }

    /// The value in base units, rounded away from zero (apimachinery's `Value`).
    pub fn value(&self) -> i128 {
        let whole = self.millis / 1000;
        whole + (self.millis % 1000).signum()
    }

    /// The value in base units as a float (close, not exact, for large values).
    pub fn as_f64(&self) -> f64 {
        self.millis as f64 / 1000.0
    }

    /// The suffix family it was written in.
    pub fn format(&self) -> Format {
        self.format
    }
}

/// The format, power of ten and power of 1024 of a suffix; `None` when it is unknown.
fn suffix_scale(suffix: &str) -> Option<(Format, i32, u32)> {
    if let Some(&(_, exp)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::DecimalSi, exp, 0));
    }
    if let Some(power) = BINARY_SUFFIXES.iter().skip(1).position(|s| *s == suffix) {
        return Some((Format::BinarySi, 0, power as u32 + 1));
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // An exponent too large for i32 is certainly too large a value: saturate, the scaling fails.
    let exp = exponent.parse::<i32>().unwrap_or(if exponent.starts_with('-') { i32::MIN / 2 } else { i32::MAX / 2 });
    Some((Format::DecimalExponent, exp, 0))
}

/// The decimal `digits` times `factor`, in decimal (exact, however long the digits).
fn times(digits: &str, factor: u64) -> String {
    let mut carry: u128 = 0;
    let mut out: Vec<u8> = Vec::with_capacity(digits.len() + 20);
    for digit in digits.bytes().rev() {
        carry += u128::from(digit - b'0') * u128::from(factor);
        out.push(b'0' + (carry % 10) as u8);
        carry /= 10;
    }
    while carry > 0 {
        out.push(b'0' + (carry % 10) as u8);
        carry /= 10;
    }
    out.iter().rev().map(|&b| char::from(b)).collect()
}

/// `digits` (no leading zeros) times ten to `exponent`, rounded away from zero; `None` on overflow.
fn scale_digits(digits: &str, exponent: i64) -> Option<i128> {
    if digits.is_empty() {
        return Some(0);
    }
    if exponent >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(exponent).ok()?)?;
        return digits.parse::<i128>().ok()?.checked_mul(factor);
    }
    let kept = (digits.len() as i64 + exponent).max(0) as usize;
    let (whole, dropped) = digits.split_at(kept);
    let whole = if whole.is_empty() { 0 } else { whole.parse::<i128>().ok()? };
    Some(whole + i128::from(dropped.bytes().any(|b| b != b'0')))
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.millis == other.millis
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.millis.cmp(&other.millis)
    }
}

impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.millis.hash(state);
    }
}

/// The canonical form, as apimachinery writes it: the format it was written in, the largest
/// suffix that keeps the number whole; a binary quantity below 1024 or with a fraction is
/// written in decimal.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.millis;
        if self.format == Format::BinarySi && m.abs() >= 1_024_000 && m % 1000 == 0 {
            let (mut number, mut power) = (m / 1000, 0);
            while number % 1024 == 0 && power < BINARY_SUFFIXES.len() - 1 {
                number /= 1024;
                power += 1;
            }
            return write!(f, "{number}{}", BINARY_SUFFIXES[power]);
        }
        if m == 0 {
            return f.write_str("0");
        }
        let (mut mantissa, mut exponent) = (m, -3i32);
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        let aligned = exponent.div_euclid(3) * 3;
        mantissa *= 10i128.pow((exponent - aligned) as u32);
        exponent = aligned;
        match self.format {
            Format::DecimalExponent if exponent == 0 => write!(f, "{mantissa}"),
            Format::DecimalExponent => write!(f, "{mantissa}e{exponent}"),
            _ => {
                if exponent > 18 {
                    mantissa *= 10i128.pow((exponent - 18) as u32);
                    exponent = 18;
                }
                let suffix = DECIMAL_SUFFIXES.iter().find(|(_, e)| *e == exponent).map_or("", |(s, _)| s);
                write!(f, "{mantissa}{suffix}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;

    #[test]
    fn agrees_with_the_shared_vectors() {
        let vectors = vectors::load("quantity.json");
        for case in vectors["valid"].as_array().expect("valid") {
            let text = case["in"].as_str().expect("in");
            let q = Quantity::parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(q.millis().to_string(), case["millis"].as_str().expect("millis"), "{text}");
            assert_eq!(q.to_string(), case["canonical"].as_str().expect("canonical"), "{text}");
            assert_eq!(q.value().to_string(), case["value"].as_str().expect("value"), "{text}");
        }
        for case in vectors["invalid"].as_array().expect("invalid") {
            let text = case["in"].as_str().expect("in");
            let error = Quantity::parse(text).expect_err(text);
            assert_eq!(error.to_string(), case["error"].as_str().expect("error"));
        }
        for case in vectors["compare"].as_array().expect("compare") {
            let [a, b, order] = case.as_array().expect("a triple").as_slice() else { panic!("a triple") };
            let (a, b) = (
                Quantity::parse(a.as_str().expect("a")).expect("a"),
                Quantity::parse(b.as_str().expect("b")).expect("b"),
            );
            assert_eq!(a.cmp(&b) as i64, order.as_i64().expect("order"), "{a} vs {b}");
        }
    }
}
