//! Credentials of other services — not quiver's own, which [`crate::secrets`] masks — found in
//! text by gitleaks' default rule set (`core/data/gitleaks/gitleaks.toml`, MIT, compiled in):
//! cloud keys, forge and chat tokens, private-key blocks, JWTs and 200 more formats. A result
//! that carries one (an issue body with an AWS key pair pasted in, a file with a `.env` in it)
//! has it redacted before a model reads it; a write whose arguments carry one can be refused,
//! since that is how an injected instruction would send a secret out.
//!
//! The rules run as gitleaks runs them: a rule is tried only where one of its keywords occurs
//! (one Aho-Corasick pass over the text finds them all), its secret must clear the rule's
//! entropy, and gitleaks' allowlists (`…EXAMPLE` keys, template placeholders) pass. Left out:
//! `generic-api-key` (any `key = <long word>`: far too many ordinary texts match it) and rules
//! that apply only to file paths.
//!
//! ```
//! use quiver_core::foreign_secrets::{rules, Redacted};
//!
//! let mut redacted = Redacted::default();
//! let text = "deploy with ghp_0123456789abcdefghijABCDEFGHIJ0123ab please";
//! let clean = rules().redact(text, &mut redacted).unwrap();
//! assert_eq!(clean, "deploy with [REDACTED github-pat] please");
//! assert_eq!(redacted.summary(), "1 github-pat");
//! assert!(rules().redact("AKIAIOSFODNN7EXAMPLE is the documentation's key", &mut redacted).is_none());
//! ```

use std::collections::BTreeMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;

use crate::tool::{Content, ToolResult};

/// gitleaks' default configuration, as published.
const GITLEAKS_TOML: &str = include_str!("../data/gitleaks/gitleaks.toml");

/// The longest reach ([`Rule`]) run around keywords; a rule that reaches further runs over the
/// whole text.
const MAX_REACH: usize = 2048;

/// Rules of the set left out, and why: see the module documentation.
const LEFT_OUT: [&str; 1] = ["generic-api-key"];

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    allowlist: Option<AllowlistFile>,
    #[serde(default)]
    rules: Vec<RuleFile>,
}

#[derive(Deserialize)]
struct RuleFile {
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default, rename = "secretGroup")]
    secret_group: Option<usize>,
    #[serde(default)]
    allowlists: Vec<AllowlistFile>,
}

#[derive(Deserialize, Default)]
struct AllowlistFile {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default, rename = "regexTarget")]
    regex_target: Option<String>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// One allowlist, as far as text without a file path can be judged by it.
struct Allowlist {
    regexes: Vec<Regex>,
    stopwords: Vec<String>,
    target: Target,
}

impl Allowlist {
    /// `None` for one that can never apply here (it needs a path as well).
    fn from_file(file: &AllowlistFile) -> Option<Self> {
        if file.condition.as_deref() == Some("AND") && !file.paths.is_empty() {
            return None;
        }
        let regexes: Vec<Regex> = file.regexes.iter().filter_map(|r| compile(r)).collect();
        if regexes.is_empty() && file.stopwords.is_empty() {
            return None;
        }
        let target = match file.regex_target.as_deref() {
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            _ => Target::Secret,
        };
        Some(Self {
            regexes,
            stopwords: file.stopwords.iter().map(|w| w.to_lowercase()).collect(),
            target,
        })
    }

    fn allows(&self, secret: &[u8], matched: &[u8], line: impl Fn() -> Vec<u8>) -> bool {
        let line_text;
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => {
                line_text = line();
                &line_text
            }
        };
        if self.regexes.iter().any(|r| r.is_match(target)) {
            return true;
        }
        let lower = secret.to_ascii_lowercase();
        self.stopwords.iter().any(|w| lower.windows(w.len()).any(|part| part == w.as_bytes()))
    }
}

struct Rule {
    id: String,
    regex: Regex,
    /// The longest text the regex can match, in bytes, when it is bounded (and short enough to
    /// look only around a keyword): a match holding a keyword lies within this of it.
    reach: Option<usize>,
    entropy: Option<f64>,
    secret_group: Option<usize>,
    allowlists: Vec<Allowlist>,
}

/// gitleaks' rules, compiled, with the keyword index that decides which to try.
pub struct SecretRules {
    rules: Vec<Rule>,
    /// Finds every keyword of every rule, ASCII case-insensitively.
    keywords: AhoCorasick,
    /// The rules each keyword (by pattern index) belongs to.
    keyword_rules: Vec<Vec<usize>>,
    global: Vec<Allowlist>,
    /// Rules of the file that could not be used here (no regex, path-only, or a regex this
    /// engine does not take), by id.
    unused: Vec<String>,
}

/// A credential found: the rule that found it and where its secret is (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The gitleaks rule id (`aws-access-token`, `github-pat`, `private-key`…).
    pub rule: String,
    /// Start of the secret.
    pub start: usize,
    /// End of the secret.
    pub end: usize,
}

/// What was redacted, counted by rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redacted {
    /// Secrets redacted, by rule id.
    pub by_rule: BTreeMap<String, usize>,
}

impl Redacted {
    /// Whether nothing was redacted.
    pub fn is_empty(&self) -> bool {
        self.by_rule.is_empty()
    }

    /// How many secrets in all.
    pub fn total(&self) -> usize {
        self.by_rule.values().sum()
    }

    /// `2 aws-access-token, 1 github-pat`.
    pub fn summary(&self) -> String {
        self.by_rule.iter().map(|(rule, n)| format!("{n} {rule}")).collect::<Vec<_>>().join(", ")
    }

    fn max(&mut self, other: &Redacted) {
        for (rule, n) in &other.by_rule {
            let mine = self.by_rule.entry(rule.clone()).or_default();
            *mine = (*mine).max(*n);
        }
    }

    fn add(&mut self, other: &Redacted) {
        for (rule, n) in &other.by_rule {
            *self.by_rule.entry(rule.clone()).or_default() += n;
        }
    }
}

/// The compiled rule set (built once, on first use).
pub fn rules() -> &'static SecretRules {
    static RULES: OnceLock<SecretRules> = OnceLock::new();
    RULES.get_or_init(|| SecretRules::from_toml(GITLEAKS_TOML).expect("gitleaks.toml parses"))
}

impl SecretRules {
    /// Compiles a gitleaks configuration.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        let mut unused = Vec::new();
        let mut keywords: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        for rule in file.rules {
            let (Some(pattern), None) = (&rule.regex, &rule.path) else {
                unused.push(rule.id);
                continue;
            };
            if LEFT_OUT.contains(&rule.id.as_str()) || rule.keywords.is_empty() {
                unused.push(rule.id);
                continue;
            }
            let Some(regex) = compile(pattern) else {
                unused.push(rule.id);
                continue;
            };
            let index = rules.len();
            for keyword in &rule.keywords {
                let keyword = keyword.to_lowercase();
                match keywords.iter().position(|k| *k == keyword) {
                    Some(at) => keyword_rules[at].push(index),
                    None => {
                        keywords.push(keyword);
                        keyword_rules.push(vec![index]);
                    }
                }
            }
            let reach = regex_syntax::Parser::new()
                .parse(pattern)
                .ok()
                .and_then(|hir| hir.properties().maximum_len())
                .filter(|len| *len <= MAX_REACH);
            rules.push(Rule {
                id: rule.id,
                regex,
                reach,
                entropy: rule.entropy,
                secret_group: rule.secret_group,
                allowlists: rule.allowlists.iter().filter_map(Allowlist::from_file).collect(),
            });
        }
        // A DFA: the keywords are searched in every byte of every result, overlapping.
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&keywords)
            .map_err(|e| e.to_string())?;
        let global = file.allowlist.as_ref().and_then(Allowlist::from_file).into_iter().collect();
        Ok(Self { rules, keywords, keyword_rules, global, unused })
    }

    /// How many rules are in use.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is in use.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules of the file left unused, by id.
    pub fn unused(&self) -> &[String] {
        &self.unused
    }

    /// Every credential in `text`, in order, not overlapping.
    ///
    /// A rule runs where one of its keywords occurs: over the whole text when its regex may
    /// match without bound (a private-key block), else only around each keyword, as far as the
    /// regex can reach — most of a 100 KB answer is never looked at by any regex.
    pub fn find(&self, text: &str) -> Vec<Found> {
        // Per rule, the spans of text to run it on (None: the whole text).
        let mut spans: BTreeMap<usize, Option<Vec<(usize, usize)>>> = BTreeMap::new();
        for hit in self.keywords.find_overlapping_iter(text) {
            for &index in &self.keyword_rules[hit.pattern().as_usize()] {
                let entry = spans.entry(index).or_insert_with(|| Some(Vec::new()));
                match (self.rules[index].reach, entry.as_mut()) {
                    (Some(reach), Some(list)) => list.push((
                        hit.start().saturating_sub(reach),
                        (hit.end() + reach).min(text.len()),
                    )),
                    (None, _) => *entry = None,
                    (Some(_), None) => {}
                }
            }
        }
        let mut found: Vec<Found> = Vec::new();
        for (index, list) in spans {
            let rule = &self.rules[index];
            match list {
                None => self.run(rule, text, 0, text.len(), &mut found),
                Some(mut list) => {
                    list.sort_unstable();
                    let mut merged: Vec<(usize, usize)> = Vec::new();
                    for (start, end) in list {
                        match merged.last_mut() {
                            Some(last) if start <= last.1 => last.1 = last.1.max(end),
                            _ => merged.push((start, end)),
                        }
                    }
                    for (start, end) in merged {
                        let (start, end) = word_bounds(text, start, end);
                        self.run(rule, text, start, end, &mut found);
                    }
                }
            }
        }
        // The first of overlapping findings wins (rules that match the same token twice).
        found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        let mut kept: Vec<Found> = Vec::with_capacity(found.len());
        for f in found {
            if kept.last().is_none_or(|last| f.start >= last.end) {
                kept.push(f);
            }
        }
        kept
    }

    /// Runs `rule` on `text[start..end]`, adding what it finds (offsets into `text`).
    fn run(&self, rule: &Rule, text: &str, start: usize, end: usize, found: &mut Vec<Found>) {
        let window = &text.as_bytes()[start..end];
        for captures in rule.regex.captures_iter(window) {
            let Some(whole) = captures.get(0) else { continue };
            let secret = match rule.secret_group {
                Some(group) => captures.get(group),
                None => captures.iter().skip(1).flatten().next().or(Some(whole)),
            };
            let Some(secret) = secret.filter(|s| !s.is_empty()) else { continue };
            if rule.entropy.is_some_and(|min| shannon_entropy(secret.as_bytes()) <= min) {
                continue;
            }
            // Only the few allowlists that read the line find it: in a JSON text a line may be
            // the whole answer.
            let line = || {
                line_around(text.as_bytes(), start + whole.start(), start + whole.end()).to_vec()
            };
            let allowed = self
                .global
                .iter()
                .chain(&rule.allowlists)
                .any(|list| list.allows(secret.as_bytes(), whole.as_bytes(), line));
            if !allowed {
                // A byte class may end a match inside a character: the whole character goes.
                let (mut from, mut to) = (start + secret.start(), start + secret.end());
                while !text.is_char_boundary(from) {
                    from -= 1;
                }
                while !text.is_char_boundary(to) {
                    to += 1;
                }
                found.push(Found { rule: rule.id.clone(), start: from, end: to });
            }
        }
    }

    /// `text` with each credential replaced by `[REDACTED rule-id]`, counted in `redacted`;
    /// `None` when it holds none.
    pub fn redact(&self, text: &str, redacted: &mut Redacted) -> Option<String> {
        self.redact_found(text, self.find(text), redacted)
    }

    /// [`SecretRules::redact`] for a text that is JSON (or may be): found in a view of it with
    /// each two-character escape (`\n`, `\"`…) blanked, so a token right after an escaped
    /// newline still starts at a word boundary, and replaced at the same offsets in the text.
    pub fn redact_json_text(&self, text: &str, redacted: &mut Redacted) -> Option<String> {
        if !text.contains('\\') {
            return self.redact(text, redacted);
        }
        let mut view = text.as_bytes().to_vec();
        let mut i = 0;
        while i + 1 < view.len() {
            if view[i] == b'\\' {
                if matches!(view[i + 1], b'n' | b'r' | b't' | b'"' | b'\\' | b'/' | b'b' | b'f') {
                    view[i] = b' ';
                    view[i + 1] = b' ';
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        // Only ASCII bytes were replaced by ASCII, so the view is as valid UTF-8 as the text.
        let view = String::from_utf8(view).ok()?;
        self.redact_found(text, self.find(&view), redacted)
    }

    fn redact_found(
        &self,
        text: &str,
        found: Vec<Found>,
        redacted: &mut Redacted,
    ) -> Option<String> {
        if found.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for f in &found {
            out.push_str(&text[at..f.start]);
            out.push_str("[REDACTED ");
            out.push_str(&f.rule);
            out.push(']');
            at = f.end;
            *redacted.by_rule.entry(f.rule.clone()).or_default() += 1;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// Every string of `value` redacted in place.
    pub fn redact_json(&self, value: &mut Value, redacted: &mut Redacted) {
        match value {
            Value::String(text) => {
                if let Some(clean) = self.redact(text, redacted) {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v, redacted)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_json(v, redacted)),
            _ => {}
        }
    }

    /// The first credential in a string of `value`: the JSON path of that string (`body`,
    /// `files.0.content`) and the rule.
    pub fn find_in_json(&self, value: &Value) -> Option<(String, String)> {
        // The path is written only for the string that holds one: most results hold none.
        fn walk(rules: &SecretRules, value: &Value, path: &mut Vec<String>) -> Option<String> {
            match value {
                Value::String(text) => rules.find(text).into_iter().next().map(|f| f.rule),
                Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
                    let rule = walk(rules, v, path)?;
                    path.push(i.to_string());
                    Some(rule)
                }),
                Value::Object(map) => map.iter().find_map(|(k, v)| {
                    let rule = walk(rules, v, path)?;
                    path.push(k.clone());
                    Some(rule)
                }),
                _ => None,
            }
        }
        let mut path = Vec::new();
        let rule = walk(self, value, &mut path)?;
        path.reverse();
        Some((path.join("."), rule))
    }

    /// Redacts a whole result before a model reads it — every string of its structured value,
    /// every text block (the text that mirrors the structured value written again from it) and
    /// every embedded resource — and says so in a last line. What it redacted.
    pub fn redact_result(&self, result: &mut ToolResult) -> Redacted {
        let mut redacted = Redacted::default();
        // The structured value is scanned as its JSON text (one pass of the keyword automaton
        // over it, where a walk calling it once per string costs three times as much); a text
        // block that is that same JSON is not scanned again.
        let mut mirror: Option<(String, Option<String>)> = None;
        if let Some(structured) = result.structured.as_mut() {
            let before = structured.to_string();
            let mut found = Redacted::default();
            let after = self.redact_json_text(&before, &mut found).map(|after| {
                // Read back from the redacted text (one parse, not a scan per string), unless a
                // finding ran across a string's end.
                match serde_json::from_str::<Value>(&after) {
                    Ok(value) => {
                        *structured = value;
                        redacted = found;
                        after
                    }
                    Err(_) => {
                        self.redact_json(structured, &mut redacted);
                        structured.to_string()
                    }
                }
            });
            mirror = Some((before, after));
        }
        let mirrored = result.structured.is_some();
        for content in &mut result.content {
            let mut here = Redacted::default();
            match content {
                Content::Text { text, .. } => {
                    if let Some((before, after)) = &mirror {
                        if text == before {
                            if let Some(after) = after {
                                text.clone_from(after);
                            }
                            continue;
                        }
                    }
                    let json_like = text.trim_start().starts_with(['{', '[', '"']);
                    let clean = if json_like {
                        self.redact_json_text(text, &mut here)
                    } else {
                        self.redact(text, &mut here)
                    };
                    if let Some(clean) = clean {
                        // A finding that ran across a JSON string's end would break the JSON:
                        // redacted string by string instead.
                        let broke = json_like
                            && serde_json::from_str::<Value>(&clean).is_err()
                            && serde_json::from_str::<Value>(text).is_ok();
                        if broke {
                            here = Redacted::default();
                            let mut value: Value = serde_json::from_str(text).unwrap_or_default();
                            self.redact_json(&mut value, &mut here);
                            *text = value.to_string();
                        } else {
                            *text = clean;
                        }
                    }
                }
                Content::Resource(block) => {
                    for value in block.values_mut() {
                        self.redact_json(value, &mut here);
                    }
                }
                _ => {}
            }
            if mirrored {
                redacted.max(&here);
            } else {
                redacted.add(&here);
            }
        }
        if !redacted.is_empty() {
            result.content.push(Content::text(format!(
                "[quiver redacted credentials of other services from this result: {}]",
                redacted.summary()
            )));
        }
        redacted
    }
}

/// A gitleaks pattern as Go's RE2 reads it: `\w`, `\d`, `\s` and `\b` ASCII, `.` any character,
/// over the text's bytes (Unicode classes would make the larger counted repetitions too big to
/// compile, and would match what gitleaks does not).
fn compile(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(pattern).unicode(false).size_limit(1 << 24).build().ok()
}

/// Shannon entropy of `text`'s bytes, in bits per byte (as gitleaks measures a secret).
fn shannon_entropy(text: &[u8]) -> f64 {
    let mut counts = [0usize; 256];
    for b in text {
        counts[*b as usize] += 1;
    }
    let n = text.len() as f64;
    counts.iter().filter(|c| **c > 0).map(|c| *c as f64 / n).map(|p| -p * p.log2()).sum()
}

/// `start..end` moved out to character boundaries and then to the ends of the words it cuts,
/// so a window never makes a word boundary (`\b`) where the text has none.
fn word_bounds(text: &str, mut start: usize, mut end: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    while start > 0 && (!text.is_char_boundary(start) || word(bytes[start - 1])) {
        start -= 1;
    }
    while end < text.len() && (!text.is_char_boundary(end) || word(bytes[end])) {
        end += 1;
    }
    (start, end)
}

/// The line of `text` holding `start..end` (the lines, when it spans several).
fn line_around(text: &[u8], start: usize, end: usize) -> &[u8] {
    let from = text[..start].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let to = text[end..].iter().position(|b| *b == b'\n').map_or(text.len(), |i| end + i);
    &text[from..to]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Test credentials in the published formats, none of them live (assembled at run time so
    /// no scanner takes this file for a leak).
    fn samples() -> Vec<(&'static str, String)> {
        let key_body =
            "MIIEowIBAAKCAQEAx4f0Xb1yT0kqZ9kFQ3b5Gd8r2mVwL1uRk7sJ0pN6hYcE9tA2vBn\n".repeat(3);
        vec![
            ("aws-access-token", ["AKIA", "Z7X3QWERTY4UIOPL"].concat()),
            ("github-pat", ["ghp_", "Xk9mQ2vL7pR4tW8yB3nJ6hF1sD5gA0cZeU7i"].concat()),
            (
                "github-fine-grained-pat",
                ["github_pat_", "11ABCDEFG0", &"aZ3kQ9mX2pL7vR4tW8yB".repeat(4)[..72]].concat(),
            ),
            (
                "slack-bot-token",
                ["xoxb-", "1234567890123-1234567890123-", "Qm9vZ3xLk2Jd8Fh3Ty6Wp1Zr"].concat(),
            ),
            (
                "private-key",
                format!("-----BEGIN RSA PRIVATE KEY-----\n{key_body}-----END RSA PRIVATE KEY-----"),
            ),
            (
                "jwt",
                [
                    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
                    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFsaWNlIn0",
                    ".c2lnbmF0dXJlLWhlcmUtNDJ4eXo",
                ]
                .concat(),
            ),
            ("gitlab-pat", ["glpat-", "Ab3dE6gH9jK2mN5pQ8sT"].concat()),
        ]
    }

    #[test]
    fn the_rule_set_compiles_and_keeps_every_rule_that_reads_text() {
        let rules = rules();
        // Left out: the generic rule, a file-name rule, and four rules for certain file paths.
        assert_eq!(
            rules.unused(),
            [
                "freemius-secret-key",
                "generic-api-key",
                "hashicorp-tf-password",
                "kubernetes-secret-yaml",
                "nuget-config-password",
                "pkcs12-file"
            ]
        );
        assert_eq!(rules.len(), 216);
    }

    #[test]
    fn text_around_a_credential_may_be_any_language() {
        let token = &samples()[1].1;
        let text = format!("Zoë écrit: «{token}» — merci ✓");
        let mut redacted = Redacted::default();
        let clean = rules().redact(&text, &mut redacted).unwrap();
        assert_eq!(clean, "Zoë écrit: «[REDACTED github-pat]» — merci ✓");
    }

    #[test]
    fn every_format_is_found_in_prose_and_redacted_whole() {
        for (rule, secret) in samples() {
            let text = format!("Here is the config:\n{secret}\nthanks");
            let found = rules().find(&text);
            assert_eq!(found.len(), 1, "{rule}: {found:?}");
            assert_eq!(found[0].rule, rule);
            let mut redacted = Redacted::default();
            let clean = rules().redact(&text, &mut redacted).unwrap();
            assert_eq!(clean, format!("Here is the config:\n[REDACTED {rule}]\nthanks"), "{rule}");
        }
    }

    #[test]
    fn looking_only_around_keywords_finds_what_the_whole_text_would() {
        let aws = &samples()[0].1;
        let filler = "words and more words, ".repeat(5000);
        let text = format!("{filler}{aws} {filler}x{aws} {filler}");
        let found = rules().find(&text);
        // The second is inside a longer word: no word boundary, no finding, as in whole text.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(&text[found[0].start..found[0].end], aws.as_str());
        let whole: Vec<usize> =
            rules().rules.iter().filter(|r| r.reach.is_none()).map(|_| 1).collect();
        assert!(!whole.is_empty(), "a private-key block has no bound");
    }

    #[test]
    fn ordinary_text_and_documented_examples_are_left_alone() {
        for text in [
            "The API key goes in the `key` field; see the token docs.",
            "AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "sha 3f786850e387550fdab836ed7e6dc881de23001b, skip tests",
            "Use ${GITHUB_TOKEN} or {{ secrets.SLACK_TOKEN }} here.",
        ] {
            assert!(rules().find(text).is_empty(), "{text}: {:?}", rules().find(text));
        }
    }

    #[test]
    fn a_result_is_redacted_in_its_value_its_mirror_and_its_text_once() {
        let aws = samples()[0].1.clone();
        let body = format!("keys: {aws}");
        let value = json!({"number": 7, "body": body});
        let mut result = ToolResult::from_json(value.clone());
        let redacted = rules().redact_result(&mut result);
        assert_eq!(redacted.summary(), "1 aws-access-token");
        let structured = result.structured.as_ref().unwrap();
        assert_eq!(structured["body"], "keys: [REDACTED aws-access-token]");
        let texts: Vec<&str> = result.content.iter().filter_map(|c| c.as_text()).collect();
        assert!(!texts.join("\n").contains(&aws), "{texts:?}");
        assert_eq!(
            texts.last().unwrap(),
            &"[quiver redacted credentials of other services from this result: 1 aws-access-token]"
        );
        // The text a plugin writes may order its keys otherwise than the value: redacted in
        // place, a token after an escaped newline included.
        let value = json!({"body": format!("notes:\n{aws}\n")});
        let mut result = ToolResult::from_json(value.clone());
        result.content = vec![Content::text(serde_json::to_string_pretty(&value).unwrap())];
        assert_eq!(rules().redact_result(&mut result).summary(), "1 aws-access-token");
        let text = result.content[0].as_text().unwrap();
        assert!(text.contains(r#""notes:\n[REDACTED aws-access-token]\n""#), "{text}");
        assert!(serde_json::from_str::<Value>(text).is_ok());
        assert_eq!(
            rules().find_in_json(&json!({"title": "x", "files": [{"content": body}]})),
            Some(("files.0.content".to_owned(), "aws-access-token".to_owned()))
        );
    }
}
