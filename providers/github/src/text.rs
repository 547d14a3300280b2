//! Text helpers: the SDK's shared ones, and the clean-up of GitHub Actions log lines.

pub(crate) use quiver_plugin_sdk::support::text::{
    decode_base64, last_lines, strip_ansi, tail_log, truncate, truncate_opt,
};

/// Standard padded base64 of `bytes`, as GitHub's contents API takes a file's content.
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
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
    fn base64_round_trips() {
        for text in ["", "a", "ab", "abc", "Hello, wörld!\n"] {
            let encoded = encode_base64(text.as_bytes());
            assert_eq!(decode_base64(&encoded).unwrap(), text.as_bytes(), "{encoded}");
        }
        assert_eq!(encode_base64(b"ab"), "YWI=");
    }

    #[test]
    fn log_lines_lose_timestamps_and_colours() {
        let line = "2021-09-17T12:01:45.1234567Z \u{1b}[36;1mcargo fuzz\u{1b}[0m";
        assert_eq!(strip_ansi(strip_timestamp(line)), "cargo fuzz");
        assert_eq!(strip_timestamp("plain line"), "plain line");
    }
}
