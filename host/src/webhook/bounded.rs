//! What a plugin says in an answer (a denial's message and field, its warnings, an error) is
//! passed on to the API server and from there to the user: capped here, so that no plugin makes
//! an answer, a log line or a `kubectl` message of unbounded size.

/// The longest message passed on, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// The longest field path passed on, in bytes.
pub const MAX_FIELD: usize = 256;

/// The longest warning passed on, in bytes (the API server truncates longer ones too).
pub const MAX_WARNING: usize = 512;

/// How many warnings are passed on.
pub const MAX_WARNINGS: usize = 16;

/// `text` cut to at most `max` bytes at a character boundary, with `…` when it was cut.
pub fn text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `warnings`, at most [`MAX_WARNINGS`] of at most [`MAX_WARNING`] bytes each.
pub fn warnings(warnings: &[String]) -> Vec<String> {
    warnings.iter().take(MAX_WARNINGS).map(|w| text(w, MAX_WARNING)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(text("short", 10), "short");
        let cut = text(&"é".repeat(100), 11);
        assert!(cut.len() <= 11 && cut.ends_with('…'), "{cut}");
        assert_eq!(warnings(&vec!["w".repeat(1000); 40]).len(), MAX_WARNINGS);
        assert!(warnings(&["w".repeat(1000)])[0].len() <= MAX_WARNING);
    }
}
