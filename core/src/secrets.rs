//! Masking credentials in any text quiver shows: errors, logs, tool results, telemetry.
//!
//! A credential rarely travels as the raw token. Basic auth sends `base64(user:token)`, some
//! clients base64 the token alone, URLs carry it percent-encoded, and a server that echoes the
//! request's headers in an error body shows `Authorization: Basic …` or `PRIVATE-TOKEN: …`
//! whatever the value is. [`SecretMask`] knows every form a registered credential takes and, in
//! addition, hides the value of any echoed credential header as a whole, so a credential quiver
//! never learnt (a cookie, another user's header) is hidden too.
//!
//! Short tokens are masked only where they stand alone (not inside a longer word): a 3-character
//! token must not turn every matching run of letters in every message into `***`. Long values are
//! masked wherever they occur, since a real token never occurs by chance.
//!
//! ```
//! use quiver_core::secrets::SecretMask;
//!
//! let mut mask = SecretMask::default();
//! mask.add_credential("s3cr3t-api-token", Some("dev@example.com"));
//! // base64("dev@example.com:s3cr3t-api-token"), as Basic auth sends it
//! let echoed = "401: bad credentials ZGV2QGV4YW1wbGUuY29tOnMzY3IzdC1hcGktdG9rZW4=";
//! assert_eq!(mask.mask(echoed), "401: bad credentials ***");
//! assert_eq!(mask.mask("{\"authorization\": \"Bearer anything\"}"), "{\"authorization\": \"***\"}");
//! ```

use aho_corasick::AhoCorasick;
use base64::Engine as _;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::Value;

/// What a masked value is replaced with.
pub const MASK: &str = "***";

/// Tokens shorter than this many characters are masked only as whole words, and `doctor` says
/// they look too short to be real.
pub const SHORT_SECRET_CHARS: usize = 8;

/// Header names whose echoed value is masked whole, whatever it is (compared case-insensitively).
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "private-token",
    "job-token",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
];

/// One form of a secret to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Needle {
    text: String,
    /// Masked only where the characters either side are not part of a token.
    whole_word: bool,
}

/// Every registered credential in every form it travels in, plus echoed credential headers.
#[derive(Debug, Clone, Default)]
pub struct SecretMask {
    needles: Vec<Needle>,
    /// Finds any needle in one pass, so text holding none — nearly all of it — is let through
    /// without a search per needle (every call's result is masked).
    finder: Option<AhoCorasick>,
}

/// Finds a credential header's name in any case, in one pass.
fn header_finder() -> &'static AhoCorasick {
    static FINDER: std::sync::OnceLock<AhoCorasick> = std::sync::OnceLock::new();
    FINDER.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(CREDENTIAL_HEADERS)
            .expect("the header names build an automaton")
    })
}

impl SecretMask {
    /// A mask for one credential: `secret` (a token, a password) and, for Basic auth, the `user`
    /// (an email, a username) that goes with it.
    pub fn for_credential(secret: Option<&str>, user: Option<&str>) -> Self {
        let mut mask = Self::default();
        if let Some(secret) = secret {
            mask.add_credential(secret, user);
        }
        mask
    }

    /// Registers a secret and every encoded form of it: the raw value; base64 (standard and
    /// URL-safe, padded or not) of the value, of `user:value` when a user is given, and of
    /// `:value`; and the value percent-encoded (upper- and lower-case hex, `+` for spaces).
    pub fn add_credential(&mut self, secret: &str, user: Option<&str>) {
        let secret = secret.trim();
        if secret.is_empty() {
            return;
        }
        let mut forms = vec![secret.to_owned()];
        let mut plain = vec![secret.to_owned(), format!(":{secret}")];
        if let Some(user) = user.map(str::trim).filter(|u| !u.is_empty()) {
            plain.push(format!("{user}:{secret}"));
        }
        for text in &plain {
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::STANDARD_NO_PAD,
                &base64::engine::general_purpose::URL_SAFE,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                forms.push(engine.encode(text.as_bytes()));
            }
        }
        let encoded = utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string();
        forms.push(lower_hex_escapes(&encoded));
        forms.push(encoded.replace("%20", "+"));
        forms.push(encoded);
        for text in forms {
            // The raw value decides whether it is short; its encodings are at least as long but
            // just as guessable, so they follow the same rule.
            let whole_word = secret.chars().count() < SHORT_SECRET_CHARS;
            let needle = Needle { text, whole_word };
            if !self.needles.contains(&needle) {
                self.needles.push(needle);
            }
        }
        // Longest first, so a form that contains another is masked whole.
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.text.len()));
        self.rebuild_finder();
    }

    fn rebuild_finder(&mut self) {
        self.finder = AhoCorasick::new(self.needles.iter().map(|n| n.text.as_str())).ok();
    }

    /// Whether `text` may hold something to mask: a needle, or a credential header's name.
    fn may_match(&self, text: &str) -> bool {
        // Without an automaton (one failed to build), assume a needle may be there.
        let needle = !self.needles.is_empty()
            && self.finder.as_ref().is_none_or(|finder| finder.is_match(text));
        needle || header_finder().is_match(text)
    }

    /// Adds every credential of `other`.
    pub fn extend(&mut self, other: &SecretMask) {
        for needle in &other.needles {
            if !self.needles.contains(needle) {
                self.needles.push(needle.clone());
            }
        }
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.text.len()));
        self.rebuild_finder();
    }

    /// Whether no credential is registered (echoed headers are still masked).
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every form of every registered credential, and the value of every echoed
    /// credential header, replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        if !self.may_match(text) {
            return text.to_owned();
        }
        let mut out = mask_credential_headers(text);
        for needle in &self.needles {
            out = replace_needle(&out, needle);
        }
        out
    }

    /// Masks `value` in place: every string and object key as [`SecretMask::mask`] masks text,
    /// and the whole string value of any entry named like a credential header
    /// (`{"authorization": "Bearer …"}`, `{"cookie": ["a", "b"]}`). The tree is walked rather
    /// than its serialised text masked, so the value keeps its shape whatever a mask replaces.
    ///
    /// ```
    /// use quiver_core::secrets::SecretMask;
    /// use serde_json::json;
    ///
    /// let mask = SecretMask::for_credential(Some("s3cr3t-api-token"), None);
    /// let mut answer = json!({
    ///     "body": "you sent s3cr3t-api-token",
    ///     "headers": {"Authorization": "token s3cr3t-api-token", "Accept": "*/*"},
    /// });
    /// mask.mask_json(&mut answer);
    /// assert_eq!(answer, json!({
    ///     "body": "you sent ***",
    ///     "headers": {"Authorization": "***", "Accept": "*/*"},
    /// }));
    /// ```
    pub fn mask_json(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.mask_in_place(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_json(item)),
            Value::Object(map) => {
                if map.keys().any(|key| self.mask(key) != *key) {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(key, value)| (self.mask(&key), value))
                        .collect();
                }
                for (key, value) in map.iter_mut() {
                    if is_credential_header(key) {
                        mask_whole_strings(value);
                    }
                    self.mask_json(value);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// [`SecretMask::mask`] on `text`, which is replaced only when something was masked.
    fn mask_in_place(&self, text: &mut String) {
        if !self.may_match(text) {
            return;
        }
        let masked = self.mask(text);
        if masked != *text {
            *text = masked;
        }
    }
}

/// Whether `name` is a header whose value is a credential, in any case.
fn is_credential_header(name: &str) -> bool {
    CREDENTIAL_HEADERS.iter().any(|header| header.eq_ignore_ascii_case(name))
}

/// A credential header's value masked whole: a non-empty string, or each string of a list.
fn mask_whole_strings(value: &mut Value) {
    match value {
        Value::String(text) if !text.is_empty() => *text = MASK.to_owned(),
        Value::Array(items) => items.iter_mut().for_each(mask_whole_strings),
        _ => {}
    }
}

/// `%2b` rather than `%2B`: some encoders write lower-case hex.
fn lower_hex_escapes(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut chars = encoded.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            out.extend(chars.by_ref().take(2).map(|h| h.to_ascii_lowercase()));
        }
    }
    out
}

/// Characters a token may be made of: a match next to one of these is part of a longer word.
fn is_token_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=' | '.' | '%' | '~')
}

fn replace_needle(text: &str, needle: &Needle) -> String {
    if !text.contains(needle.text.as_str()) {
        return text.to_owned();
    }
    if !needle.whole_word {
        return text.replace(needle.text.as_str(), MASK);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(needle.text.as_str()) {
        let prev = rest[..at].chars().next_back().or(before);
        let end = at + needle.text.len();
        let next = rest[end..].chars().next();
        let alone = !prev.is_some_and(is_token_char) && !next.is_some_and(is_token_char);
        out.push_str(&rest[..at]);
        out.push_str(if alone { MASK } else { &needle.text });
        before = needle.text.chars().next_back();
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with the value of every echoed credential header (`Authorization: Basic …`,
/// `"private-token": "…"`, `Cookie=…`) replaced by [`MASK`], in plain, JSON and escaped-JSON
/// spellings. The header name must stand alone and be followed by `:` or `=`.
pub fn mask_credential_headers(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    // (start, end) byte ranges of values to mask, in order.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for name in CREDENTIAL_HEADERS {
        let mut from = 0;
        while let Some(found) = lower[from..].find(name) {
            let at = from + found;
            from = at + name.len();
            let before = &lower[..at];
            // `\n` of an escaped JSON string ends the previous line: a boundary, not a letter.
            let escaped = ["\\n", "\\r", "\\t"].iter().any(|e| before.ends_with(e));
            let prev = before.chars().next_back().filter(|_| !escaped);
            let next = lower[from..].chars().next();
            if prev.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                || next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                continue;
            }
            if let Some(range) = header_value_range(text, from) {
                ranges.push(range);
            }
        }
    }
    if ranges.is_empty() {
        return text.to_owned();
    }
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in ranges {
        if start < last {
            continue;
        }
        out.push_str(&text[last..start]);
        out.push_str(MASK);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// Where the value of a header whose name ends at `from` lies: past closing quotes, a `:` or `=`,
/// blanks and opening quotes, up to the closing quote, a line end or the end of a JSON value.
fn header_value_range(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    let skip_quotes = |i: &mut usize| {
        while *i < bytes.len() && matches!(bytes[*i], b'"' | b'\'' | b'\\' | b' ' | b'\t') {
            *i += 1;
        }
    };
    skip_quotes(&mut i);
    if i >= bytes.len() || !matches!(bytes[i], b':' | b'=') {
        return None;
    }
    i += 1;
    skip_quotes(&mut i);
    // A JSON list of values (`"authorization": ["Basic …"]`, as some echo servers write it).
    while i < bytes.len() && matches!(bytes[i], b'[' | b'"' | b'\'' | b'\\' | b' ') {
        i += 1;
    }
    let start = i;
    while i < bytes.len()
        && !matches!(
            bytes[i],
            b'"' | b'\'' | b'\\' | b'\n' | b'\r' | b',' | b'}' | b']' | b'<' | b'&'
        )
    {
        i += 1;
    }
    // A value cut short by a line end or quote still hides what was there; trailing blanks stay.
    let mut end = i;
    while end > start && bytes[end - 1] == b' ' {
        end -= 1;
    }
    (end > start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(secret: &str, user: Option<&str>, text: &str) -> String {
        SecretMask::for_credential(Some(secret), user).mask(text)
    }

    #[test]
    fn every_encoding_of_a_credential_is_masked() {
        let token = "tok+en/with=odd chars";
        let b64 = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forms = [
            token.to_owned(),
            b64.encode(format!("me@x.io:{token}")),
            url.encode(format!("me@x.io:{token}")),
            b64.encode(token),
            url.encode(token),
            utf8_percent_encode(token, NON_ALPHANUMERIC).to_string(),
            lower_hex_escapes(&utf8_percent_encode(token, NON_ALPHANUMERIC).to_string()),
        ];
        for form in forms {
            let out = masked(token, Some("me@x.io"), &format!("echo [{form}] end"));
            assert_eq!(out, "echo [***] end", "form {form}");
        }
    }

    #[test]
    fn echoed_credential_headers_are_masked_whole_in_any_spelling() {
        let mask = SecretMask::default();
        for (text, want) in [
            ("Authorization: Basic dXNlcjpwYXNz\nAccept: */*", "Authorization: ***\nAccept: */*"),
            ("{\"authorization\":\"Bearer abc.def\"}", "{\"authorization\":\"***\"}"),
            ("{\\\"PRIVATE-TOKEN\\\": \\\"glpat-x\\\"}", "{\\\"PRIVATE-TOKEN\\\": \\\"***\\\"}"),
            ("cookie=session=1; other=2", "cookie=***"),
            (
                "{\"headers\":{\"authorization\":[\"token x\"]}}",
                "{\"headers\":{\"authorization\":[\"***\"]}}",
            ),
            (
                "{\"result\":\"accept: */*\\nauthorization: Bearer abc\\nhost: x\"}",
                "{\"result\":\"accept: */*\\nauthorization: ***\\nhost: x\"}",
            ),
        ] {
            assert_eq!(mask.mask(text), want);
        }
        // Words that merely contain a header name, or the name without a value, stay.
        for text in ["unauthorized: check the token", "Authorization failed", "authorizations: 3"] {
            assert_eq!(mask.mask(text), text);
        }
    }

    #[test]
    fn short_tokens_are_masked_only_where_they_stand_alone() {
        let text = "abc: label abc, abcdef and xabc";
        assert_eq!(masked("abc", None, text), "***: label ***, abcdef and xabc");
        // A real token is masked even inside a longer run.
        assert_eq!(masked("ghp_0123456789", None, "xghp_0123456789y"), "x***y");
    }

    #[test]
    fn json_answers_are_masked_in_every_string_key_and_credential_header() {
        let token = "ghp_0123456789abcdef";
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("me:{token}"));
        let mask = SecretMask::for_credential(Some(token), Some("me"));
        let mut answer = serde_json::json!({
            "title": format!("echo {token}"),
            "body": format!("request was:\nAuthorization: Basic {b64}\nAccept: */*"),
            "nested": [{"note": format!("Basic {b64}")}, 7, null, true],
            token: "a key that is the token",
            "headers": {"Cookie": ["session=1", "other=2"], "PRIVATE-TOKEN": "anything"},
            "authorization": {"scheme": "bearer", "value": format!("{token}")},
        });
        mask.mask_json(&mut answer);
        assert_eq!(
            answer,
            serde_json::json!({
                "title": "echo ***",
                "body": "request was:\nAuthorization: ***\nAccept: */*",
                "nested": [{"note": "Basic ***"}, 7, null, true],
                "***": "a key that is the token",
                "headers": {"Cookie": ["***", "***"], "PRIVATE-TOKEN": "***"},
                "authorization": {"scheme": "bearer", "value": "***"},
            })
        );
        // Nothing to mask: the same value, down to the order of its keys.
        let mut plain = serde_json::json!({"b": "text", "a": [1, "authorization failed"]});
        let before = plain.clone();
        mask.mask_json(&mut plain);
        assert_eq!(plain, before);
    }

    #[test]
    fn nothing_registered_masks_nothing_but_headers() {
        assert_eq!(SecretMask::for_credential(None, None).mask("plain text"), "plain text");
        assert_eq!(SecretMask::for_credential(Some("  "), None).mask("  x"), "  x");
    }
}
