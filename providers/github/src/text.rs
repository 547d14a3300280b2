//! Text helpers: cutting long text where a reader expects it, base64, and job-log clean-up.

/// `text` cut to at most `max_bytes` (at a character boundary), with a marker saying how much was
/// cut; `None` when nothing was.
pub(crate) fn truncate(text: &str, max_bytes: usize) -> (String, Option<usize>) {
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

/// An optional text cut to `max_bytes`.
pub(crate) fn truncate_opt(text: Option<String>, max_bytes: usize) -> Option<String> {
    text.filter(|t| !t.is_empty()).map(|t| truncate(&t, max_bytes).0)
}

/// The last `lines` lines of `text`.
pub(crate) fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Decodes standard base64 (GitHub wraps it at 60 columns); whitespace is skipped.
pub(crate) fn decode_base64(input: &str) -> Result<Vec<u8>, String> {
    fn value(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' | b'-' => Some(62),
            b'/' | b'_' => Some(63),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in input.bytes().enumerate() {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'=' {
            break;
        }
        let v = value(c).ok_or_else(|| format!("invalid base64 byte {c:#04x} at offset {i}"))?;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// Removes ANSI escape sequences (colours, cursor moves) from a log line.
pub(crate) fn strip_ansi(line: &str) -> String {
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

/// Removes the `2021-09-17T12:01:45.1234567Z ` timestamp GitHub Actions puts on every log line.
pub(crate) fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let looks_like_time = b.len() > 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[..4].iter().all(u8::is_ascii_digit);
    if !looks_like_time {
        return line;
    }
    match line[..line.len().min(40)].find("Z ") {
        Some(z) => &line[z + 2..],
        None => line,
    }
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
    }

    #[test]
    fn base64_with_github_line_breaks_decodes() {
        assert_eq!(decode_base64("aGVsbG8g\nd29ybGQ=\n").unwrap(), b"hello world");
        assert_eq!(decode_base64("YQ==").unwrap(), b"a");
        assert!(decode_base64("a$b").is_err());
    }

    #[test]
    fn log_lines_lose_timestamps_and_colours() {
        let line = "2021-09-17T12:01:45.1234567Z \u{1b}[36;1mcargo fuzz\u{1b}[0m";
        assert_eq!(strip_ansi(strip_timestamp(line)), "cargo fuzz");
        assert_eq!(strip_timestamp("plain line"), "plain line");
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
    }
}
