//! Text from outside made safe to print on an operator's terminal.
//!
//! An upstream server's stderr, its tool descriptions and names, and the reasons built from what
//! it answered reach `quiver plugins`, `doctor`, `tools list` and `tools show`. Printed raw, an
//! escape sequence in them is obeyed by the terminal: OSC 52 writes the clipboard, `ESC[2J`
//! clears the screen, OSC 0 sets the title, a carriage return overwrites a line, a bidi override
//! reorders what is read. [`for_terminal`] shows every such character as a visible `\u{…}`.
//!
//! ```
//! use quiver_core::terminal::for_terminal;
//!
//! assert_eq!(for_terminal("ok\x1b]52;c;ZXZpbA==\x07", false), "ok\\u{1b}]52;c;ZXZpbA==\\u{7}");
//! assert_eq!(for_terminal("two\nlines", true), "two\nlines");
//! assert_eq!(for_terminal("two\nlines", false), "two\\u{a}lines");
//! ```

use std::borrow::Cow;

/// `text` with every control character (C0, DEL, C1) and every bidi or invisible format
/// character written as `\u{hex}`; newlines and tabs are kept where `multi_line` says so.
pub fn for_terminal(text: &str, multi_line: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        let kept = multi_line && (c == '\n' || c == '\t');
        !kept && (c.is_control() || is_format_control(c))
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bidi embeddings, overrides and isolates, and the invisible marks and joiners that hide or
/// reorder text on screen.
fn is_format_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_terminal_control_is_shown_not_obeyed() {
        for (attack, text, shown) in [
            ("OSC 52 clipboard write", "a\x1b]52;c;cm0gLXJm\x07b", "a\\u{1b}]52;c;cm0gLXJm\\u{7}b"),
            ("screen clear", "\x1b[2J\x1b[H", "\\u{1b}[2J\\u{1b}[H"),
            ("title change", "\x1b]0;owned\x1b\\", "\\u{1b}]0;owned\\u{1b}\\"),
            ("carriage return overwrite", "fine\rpwned", "fine\\u{d}pwned"),
            ("C1 CSI", "x\u{9b}31m", "x\\u{9b}31m"),
            ("bidi override", "abc\u{202e}fed", "abc\\u{202e}fed"),
            ("NUL and DEL", "a\0b\x7f", "a\\u{0}b\\u{7f}"),
        ] {
            assert_eq!(for_terminal(text, true), shown, "{attack}");
        }
        assert!(matches!(for_terminal("plain — text ✓", false), Cow::Borrowed(_)));
    }
}
