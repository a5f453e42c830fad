//! Durations in Go's `time.ParseDuration` syntax (`1h30m`, `500ms`, `1.5s`), the way Kubernetes
//! objects and kopf users write them, and back in Go's `Duration.String` form (`1h30m0s`).
//!
//! A duration is a sequence of decimal numbers, each with an optional fraction and a unit: `ns`,
//! `us` (or `µs`), `ms`, `s`, `m`, `h`; an optional leading `+`; `0` alone needs no unit. Durations
//! here are delays and intervals: a negative one is refused, and, as in Go, one beyond about 292
//! years (`i64::MAX` nanoseconds) is too large. The test vectors every SDK checks itself
//! against are in `core/vectors/duration.json`.

use std::fmt;
use std::time::Duration;

/// Why a text is not a duration; its message names the text and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: DurationReason,
}

/// What makes a text not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationReason {
    /// The text is empty.
    Empty,
    /// A number was expected where this text starts.
    ExpectedNumber(String),
    /// A number has no unit.
    MissingUnit,
    /// The unit is none of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    UnknownUnit(String),
    /// The duration is below zero.
    Negative,
    /// The duration is beyond `i64::MAX` nanoseconds.
    TooLarge,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not a duration: {}", self.text, self.reason)
    }
}

impl std::error::Error for DurationError {}

impl fmt::Display for DurationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::ExpectedNumber(at) => write!(f, "expected a number at {at}"),
            Self::MissingUnit => f.write_str("missing unit"),
            Self::UnknownUnit(unit) => write!(f, "unknown unit {unit}"),
            Self::Negative => f.write_str("negative"),
            Self::TooLarge => f.write_str("too large"),
        }
    }
}

/// Nanoseconds per unit.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The largest duration Go represents, in nanoseconds.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration in Go's syntax, e.g. `"1h30m"`, `"500ms"`, `"1.5s"`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let fail = |reason| DurationError { text: text.to_string(), reason };
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(fail(DurationReason::Empty));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(fail(DurationReason::ExpectedNumber(rest.into())));
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(fail(DurationReason::MissingUnit));
        }
        let scale =
            UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(|| fail(DurationReason::UnknownUnit(unit.into())))?.1;
        total = component(int_part, frac_part, scale)
            .and_then(|nanos| total.checked_add(nanos))
            .filter(|&total| total <= MAX_NANOS)
            .ok_or_else(|| fail(DurationReason::TooLarge))?;
        rest = after;
    }
    if negative && total > 0 {
        return Err(fail(DurationReason::Negative));
    }
    let nanos = u64::try_from(total).map_err(|_| fail(DurationReason::TooLarge))?;
    Ok(Duration::from_nanos(nanos))
}

/// `int.frac` units of `scale` nanoseconds, the fraction truncated to the nanosecond; `None` when
/// beyond [`MAX_NANOS`].
fn component(int_part: &str, frac_part: &str, scale: u128) -> Option<u128> {
    let digits = int_part.trim_start_matches('0');
    if digits.len() > 20 {
        return None;
    }
    let whole = if digits.is_empty() { 0 } else { digits.parse::<u128>().ok()? };
    let whole = whole.checked_mul(scale).filter(|&w| w <= MAX_NANOS)?;
    // A unit is at most 3.6e12 ns: 13 digits of fraction reach below the nanosecond.
    let frac = &frac_part[..frac_part.len().min(13)];
    let fraction = if frac.is_empty() { 0 } else { frac.parse::<u128>().ok()? * scale / 10u128.pow(frac.len() as u32) };
    Some(whole + fraction)
}

/// Writes a duration as Go's `Duration.String` does: `1h30m0s`, `1.5s`, `500ms`, `0s`.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (scale, unit) = match nanos {
            n if n < 1_000 => (1, "ns"),
            n if n < 1_000_000 => (1_000, "µs"),
            _ => (1_000_000, "ms"),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let (hours, rest) = (nanos / 3_600_000_000_000, nanos % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let seconds = decimal(rest, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / scale` in decimal, without trailing zeros in the fraction.
fn decimal(value: u128, scale: u128) -> String {
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    format!("{whole}.{:0width$}", fraction).trim_end_matches('0').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;

    #[test]
    fn agrees_with_the_shared_vectors() {
        let vectors = vectors::load("duration.json");
        for case in vectors["valid"].as_array().expect("valid") {
            let text = case["in"].as_str().expect("in");
            let duration = parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(duration.as_nanos().to_string(), case["nanos"].as_str().expect("nanos"), "{text}");
            assert_eq!(format(duration), case["canonical"].as_str().expect("canonical"), "{text}");
        }
        for case in vectors["invalid"].as_array().expect("invalid") {
            let text = case["in"].as_str().expect("in");
            assert_eq!(parse(text).expect_err(text).to_string(), case["error"].as_str().expect("error"));
        }
    }
}
