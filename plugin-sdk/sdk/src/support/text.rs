//! Text helpers: long text cut with a marker that says how much, base64, CI logs cut to their
//! tail and their errors.

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

/// Most error lines [`tail_log`] collects from a whole log.
pub const LOG_MAX_ERROR_LINES: usize = 20;
/// Longest error line [`tail_log`] returns, in bytes.
pub const LOG_ERROR_LINE_MAX_BYTES: usize = 500;

/// The end of a CI job's log, cut to what an agent reads, and the errors of the whole log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogTail {
    /// The kept lines, cleaned, joined with `\n`.
    pub text: String,
    /// Lines in the whole log (after cleaning dropped any).
    pub lines_total: usize,
    /// Lines in `text`.
    pub lines_returned: usize,
    /// Earlier lines left out, by `tail_lines` or by the byte cap.
    pub lines_cut: usize,
    /// Whether the byte cap (not `tail_lines`) cut lines.
    pub bytes_cut: bool,
    /// What was cut and how to get more (naming the tool's `tail_lines` argument); `None` when
    /// the whole log is in `text`.
    pub note: Option<String>,
    /// The first [`LOG_MAX_ERROR_LINES`] error lines of the whole log, cleaned, each cut to
    /// [`LOG_ERROR_LINE_MAX_BYTES`].
    pub error_lines: Vec<String>,
}

/// The last `tail_lines` lines of a CI log that fit in `max_bytes` (a single longer line keeps its
/// start), plus the error lines of the whole log: what GitHub Actions and GitLab CI job logs are
/// cut to.
///
/// Each line is cleaned first by `clean_line` (colour codes, timestamps, section markers: the
/// service's own clutter); `None` drops a line that holds nothing to read, and it is not counted.
/// `is_error_line(raw, cleaned)` sees a line as the log has it and as cleaned, since an error
/// marker may live in either (GitHub's `##[error]` prefix, GitLab's colour-coded `ERROR`).
///
/// ```
/// use quiver_plugin_sdk::support::text::{strip_ansi, tail_log};
/// let log = "step 1\n\u{1b}[31mERROR: boom\u{1b}[0m\nstep 2\ndone";
/// let tail = tail_log(log, 2, 1024, |l| Some(strip_ansi(l)), |_, l| l.starts_with("ERROR"));
/// assert_eq!(tail.text, "step 2\ndone");
/// assert_eq!((tail.lines_total, tail.lines_returned, tail.lines_cut), (4, 2, 2));
/// assert_eq!(tail.error_lines, ["ERROR: boom"]);
/// assert!(tail.note.unwrap().contains("ask for more with tail_lines"));
/// ```
pub fn tail_log(
    log: &str,
    tail_lines: usize,
    max_bytes: usize,
    clean_line: impl Fn(&str) -> Option<String>,
    is_error_line: impl Fn(&str, &str) -> bool,
) -> LogTail {
    let lines: Vec<(&str, String)> =
        log.lines().filter_map(|raw| Some((raw, clean_line(raw)?))).collect();
    let lines_total = lines.len();
    let error_lines: Vec<String> = lines
        .iter()
        .filter(|(raw, clean)| is_error_line(raw, clean))
        .take(LOG_MAX_ERROR_LINES)
        .map(|(_, clean)| truncate(clean, LOG_ERROR_LINE_MAX_BYTES).0)
        .collect();
    let start = lines_total.saturating_sub(tail_lines);
    let mut kept: Vec<String> = lines.into_iter().skip(start).map(|(_, clean)| clean).collect();
    // Keep the newest lines that fit in the byte cap.
    let mut bytes = 0;
    let mut first = kept.len();
    while first > 0 && bytes + kept[first - 1].len() < max_bytes {
        first -= 1;
        bytes += kept[first].len() + 1;
    }
    let bytes_cut = first > 0;
    if first == kept.len() && !kept.is_empty() {
        // A single line longer than the cap: keep its start.
        first -= 1;
        kept[first] = truncate(&kept[first], max_bytes.saturating_sub(64)).0;
    }
    kept.drain(..first);
    let lines_returned = kept.len();
    let lines_cut = start + first;
    let note = match (lines_cut, bytes_cut) {
        (0, _) => None,
        (cut, false) => Some(format!(
            "showing the last {lines_returned} of {lines_total} lines ({cut} earlier lines cut); \
             ask for more with tail_lines"
        )),
        (cut, true) => Some(format!(
            "showing the last {lines_returned} of {lines_total} lines: {cut} earlier lines cut \
             to stay within {} KiB",
            max_bytes / 1024
        )),
    };
    LogTail {
        text: kept.join("\n"),
        lines_total,
        lines_returned,
        lines_cut,
        bytes_cut,
        note,
        error_lines,
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

    fn plain(line: &str) -> Option<String> {
        Some(strip_ansi(line))
    }

    #[test]
    fn a_short_log_is_returned_whole_without_a_note() {
        let tail = tail_log("a\nb\n", 10, 1024, plain, |_, _| false);
        assert_eq!(tail.text, "a\nb");
        assert_eq!((tail.lines_total, tail.lines_returned, tail.lines_cut), (2, 2, 0));
        assert_eq!((tail.bytes_cut, tail.note, tail.error_lines.len()), (false, None, 0));
        let empty = tail_log("", 10, 1024, plain, |_, _| true);
        assert_eq!((empty.text.as_str(), empty.lines_total, empty.note), ("", 0, None));
    }

    #[test]
    fn dropped_lines_are_not_counted_and_errors_see_raw_and_clean_lines() {
        let log = "marker\n\u{1b}[31mERROR: a\nok\n##[error]b\nmarker\n";
        let clean = |l: &str| (l != "marker").then(|| strip_ansi(l));
        let tail = tail_log(log, 10, 1024, clean, |raw, clean| {
            raw.contains("##[error]") || clean.starts_with("ERROR")
        });
        assert_eq!(tail.lines_total, 3);
        assert_eq!(tail.text, "ERROR: a\nok\n##[error]b");
        assert_eq!(tail.error_lines, ["ERROR: a", "##[error]b"]);
    }

    #[test]
    fn error_lines_are_capped_in_number_and_length() {
        let long = format!("E {}", "x".repeat(600));
        let log: String = (0..30).map(|i| format!("E {i}\n")).collect::<String>() + &long;
        let tail = tail_log(&log, 1, 64 * 1024, plain, |_, l| l.starts_with("E "));
        assert_eq!(tail.error_lines.len(), LOG_MAX_ERROR_LINES);
        assert_eq!(tail.error_lines[0], "E 0");
        let tail = tail_log(&long, 1, 64 * 1024, plain, |_, l| l.starts_with("E "));
        assert!(tail.error_lines[0].starts_with("E xxx"), "{}", tail.error_lines[0]);
        assert!(tail.error_lines[0].contains("…[cut 102 more bytes]"), "{}", tail.error_lines[0]);
    }

    #[test]
    fn the_byte_cap_keeps_the_newest_lines_and_the_start_of_one_long_line() {
        let log: String = (0..100).map(|i| format!("{i:09}\n")).collect();
        let tail = tail_log(&log, 100, 55, plain, |_, _| false);
        assert_eq!(tail.text, "000000095\n000000096\n000000097\n000000098\n000000099");
        assert_eq!((tail.lines_returned, tail.lines_cut, tail.bytes_cut), (5, 95, true));
        assert_eq!(
            tail.note.as_deref(),
            Some("showing the last 5 of 100 lines: 95 earlier lines cut to stay within 0 KiB")
        );

        let wide = "y".repeat(2000);
        let tail = tail_log(&format!("a\n{wide}"), 10, 1024, plain, |_, _| false);
        assert_eq!(tail.lines_returned, 1);
        assert!(tail.text.starts_with(&"y".repeat(960)), "cut to the cap less 64 bytes");
        assert!(tail.text.contains("…[cut 1040 more bytes]"), "{}", tail.text);
        assert_eq!((tail.lines_cut, tail.bytes_cut), (1, true));
    }
}
