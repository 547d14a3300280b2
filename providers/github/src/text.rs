//! Text helpers: the SDK's shared ones, and the clean-up of GitHub Actions log lines.

pub(crate) use quiver_plugin_sdk::support::text::{
    decode_base64, last_lines, strip_ansi, tail_log, truncate, truncate_opt,
};

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
    fn log_lines_lose_timestamps_and_colours() {
        let line = "2021-09-17T12:01:45.1234567Z \u{1b}[36;1mcargo fuzz\u{1b}[0m";
        assert_eq!(strip_ansi(strip_timestamp(line)), "cargo fuzz");
        assert_eq!(strip_timestamp("plain line"), "plain line");
    }
}
