//! Text helpers: long text cut with a marker that says how much, base64, log clean-up.

use base64::Engine as _;

/// `text` cut to at most `max_bytes` (at a character boundary), with a marker saying how much was
/// cut, and the number of bytes cut (`None` when nothing was).
pub fn truncate(text: &str, max_bytes: usize) -> (String, Option<usize>) {
    if text.len() <= max_bytes {
        return (text.to_owned(), None);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    (format!("{}\n…[cut {cut} more bytes]", &text[..end]), Some(cut))
}

/// An optional text cut to `max_bytes`; empty text becomes `None`.
pub fn truncate_opt(text: Option<String>, max_bytes: usize) -> Option<String> {
    text.filter(|t| !t.is_empty()).map(|t| truncate(&t, max_bytes).0)
}

/// The last `lines` lines of `text`.
pub fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Decodes standard or URL-safe base64, padded or not; whitespace (line wrapping) is skipped.
pub fn decode_base64(input: &str) -> Result<Vec<u8>, String> {
    let compact: String = input.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let normalized = compact.replace('-', "+").replace('_', "/");
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(normalized.trim_end_matches('='))
        .map_err(|e| format!("invalid base64: {e}"))
}

/// Removes ANSI escape sequences (colours, cursor moves) from a line of a CI log.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates up to the final byte `@`..=`~`.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_says_how_much_was_cut() {
        assert_eq!(truncate("short", 10), ("short".to_owned(), None));
        let (cut, n) = truncate("héllo world", 2);
        assert_eq!(n, Some(11), "cut at a character boundary");
        assert!(cut.starts_with("h\n…[cut 11 more bytes]"), "{cut}");
        assert_eq!(truncate_opt(Some(String::new()), 5), None);
    }

    #[test]
    fn base64_with_line_breaks_and_either_alphabet_decodes() {
        assert_eq!(decode_base64("aGVsbG8g\nd29ybGQ=\n").unwrap(), b"hello world");
        assert_eq!(decode_base64("YQ==").unwrap(), b"a");
        assert_eq!(decode_base64("-_8").unwrap(), decode_base64("+/8=").unwrap());
        assert!(decode_base64("a$b").is_err());
    }

    #[test]
    fn log_lines_lose_colours_and_keep_their_tail() {
        assert_eq!(strip_ansi("\u{1b}[36;1mcargo fuzz\u{1b}[0m"), "cargo fuzz");
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
    }
}
