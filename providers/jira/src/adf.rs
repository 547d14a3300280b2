//! Atlassian Document Format (Jira Cloud's rich text, REST v3) to plain text an agent reads, and
//! plain text to ADF for what the agent writes.
//!
//! gouqi's `AdfDocument::to_plain_text` keeps only text nodes (mentions, list bullets, line
//! breaks, code fences and links vanish), so reading is done here over the raw JSON; writing uses
//! gouqi's `AdfDocument::from_text` (one paragraph per line), which is what Jira expects.

use quiver_plugin_sdk::prelude::*;

/// A description, comment or text field as plain text: ADF documents are rendered, strings (REST
/// v2, Server/Data Center wiki markup) are kept; anything else is `None`.
pub(crate) fn text_of(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.trim().to_owned(),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("doc") => to_text(value),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// Renders an ADF document as plain text, Markdown-like where structure matters (lists, headings,
/// code blocks, quotes, tables).
pub(crate) fn to_text(doc: &Value) -> String {
    let mut out = String::new();
    blocks(children(doc), "", &mut out);
    tidy(&out)
}

/// The plain text as an ADF document (one paragraph per line), for Cloud's REST v3.
pub(crate) fn from_text(text: &str) -> Value {
    serde_json::to_value(gouqi::AdfDocument::from_text(text))
        .unwrap_or_else(|_| json!({"type": "doc", "version": 1, "content": []}))
}

fn children(node: &Value) -> &[Value] {
    node.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn kind(node: &Value) -> &str {
    node.get("type").and_then(Value::as_str).unwrap_or("")
}

fn attr<'v>(node: &'v Value, name: &str) -> Option<&'v Value> {
    node.get("attrs").and_then(|a| a.get(name))
}

fn attr_str<'v>(node: &'v Value, name: &str) -> Option<&'v str> {
    attr(node, name).and_then(Value::as_str)
}

/// Block nodes, each line prefixed with `prefix` (list indentation, quote markers).
fn blocks(nodes: &[Value], prefix: &str, out: &mut String) {
    for node in nodes {
        block(node, prefix, out);
    }
}

fn block(node: &Value, prefix: &str, out: &mut String) {
    match kind(node) {
        "paragraph" => line(prefix, &inline(children(node)), out),
        "heading" => {
            let level = attr(node, "level").and_then(Value::as_u64).unwrap_or(1).clamp(1, 6);
            let hashes = "#".repeat(level as usize);
            line(prefix, &format!("{hashes} {}", inline(children(node))), out);
        }
        "bulletList" => list(node, prefix, None, out),
        "orderedList" => {
            let start = attr(node, "order").and_then(Value::as_u64).unwrap_or(1);
            list(node, prefix, Some(start), out);
        }
        "codeBlock" => {
            let language = attr_str(node, "language").unwrap_or("");
            let code: String = children(node)
                .iter()
                .filter_map(|t| t.get("text").and_then(Value::as_str))
                .collect();
            let fenced = format!("```{language}\n{code}\n```");
            line(prefix, &fenced, out);
        }
        "blockquote" => {
            let mut inner = String::new();
            blocks(children(node), "", &mut inner);
            let quoted: Vec<String> =
                tidy(&inner).lines().map(|l| format!("> {l}").trim_end().to_owned()).collect();
            line(prefix, &quoted.join("\n"), out);
        }
        "rule" => line(prefix, "---", out),
        "table" => {
            let rows: Vec<String> = children(node)
                .iter()
                .map(|row| {
                    let cells: Vec<String> = children(row)
                        .iter()
                        .map(|cell| {
                            let mut text = String::new();
                            blocks(children(cell), "", &mut text);
                            tidy(&text).replace('\n', " ")
                        })
                        .collect();
                    format!("| {} |", cells.join(" | "))
                })
                .collect();
            line(prefix, &rows.join("\n"), out);
        }
        "mediaSingle" | "mediaGroup" | "media" => {
            let media = if kind(node) == "media" { Some(node) } else { children(node).first() };
            let name = media.and_then(|m| attr_str(m, "alt").or_else(|| attr_str(m, "url")));
            line(
                prefix,
                &format!("[attachment{}]", name.map(|n| format!(": {n}")).unwrap_or_default()),
                out,
            );
        }
        "blockCard" | "embedCard" => {
            if let Some(url) = attr_str(node, "url") {
                line(prefix, url, out);
            }
        }
        // Inline content at block level (seen in hand-made documents).
        "text" | "hardBreak" | "mention" | "emoji" | "inlineCard" | "date" | "status" => {
            line(prefix, &inline(std::slice::from_ref(node)), out)
        }
        // panel, expand, nestedExpand, layoutSection, layoutColumn, listItem, unknown: their
        // content.
        _ => {
            if let Some(title) = attr_str(node, "title").filter(|t| !t.is_empty()) {
                line(prefix, title, out);
            }
            blocks(children(node), prefix, out);
        }
    }
}

fn list(node: &Value, prefix: &str, start: Option<u64>, out: &mut String) {
    for (i, item) in children(node).iter().enumerate() {
        let marker = match start {
            Some(n) => format!("{}. ", n + i as u64),
            None => "- ".to_owned(),
        };
        // The item's blocks, one line each; nested lists come out indented below the item.
        let mut lines: Vec<String> = Vec::new();
        for child in children(item) {
            let mut text = String::new();
            block(child, "", &mut text);
            lines.extend(tidy(&text).lines().filter(|l| !l.is_empty()).map(str::to_owned));
        }
        for (j, l) in lines.iter().enumerate() {
            out.push_str(prefix);
            out.push_str(if j == 0 { &marker } else { "  " });
            out.push_str(l);
            out.push('\n');
        }
    }
    out.push('\n');
}

/// Inline nodes as one string.
fn inline(nodes: &[Value]) -> String {
    let mut out = String::new();
    for node in nodes {
        match kind(node) {
            "text" => {
                let text = node.get("text").and_then(Value::as_str).unwrap_or("");
                let marks = node.get("marks").and_then(Value::as_array);
                let href = marks.and_then(|ms| {
                    ms.iter().find(|m| kind(m) == "link").and_then(|m| attr_str(m, "href"))
                });
                let code = marks.is_some_and(|ms| ms.iter().any(|m| kind(m) == "code"));
                match (href, code) {
                    (Some(href), _) if href != text => out.push_str(&format!("{text} ({href})")),
                    (_, true) => out.push_str(&format!("`{text}`")),
                    _ => out.push_str(text),
                }
            }
            "hardBreak" => out.push('\n'),
            "mention" => {
                let text = attr_str(node, "text").unwrap_or("@someone");
                if text.starts_with('@') {
                    out.push_str(text);
                } else {
                    out.push('@');
                    out.push_str(text);
                }
            }
            "emoji" => out.push_str(
                attr_str(node, "text").or_else(|| attr_str(node, "shortName")).unwrap_or(""),
            ),
            "inlineCard" => out.push_str(attr_str(node, "url").unwrap_or("")),
            "status" => out.push_str(&format!("[{}]", attr_str(node, "text").unwrap_or(""))),
            "date" => {
                let ms = attr(node, "timestamp").and_then(|t| {
                    t.as_str().and_then(|s| s.parse::<u64>().ok()).or_else(|| t.as_u64())
                });
                if let Some(ms) = ms {
                    let time = quiver_plugin_sdk::support::http::format_unix_time(ms / 1000);
                    out.push_str(time.split('T').next().unwrap_or(&time));
                }
            }
            _ => out.push_str(&inline(children(node))),
        }
    }
    out
}

/// Appends a block: its lines prefixed, followed by a blank line.
fn line(prefix: &str, text: &str, out: &mut String) {
    if text.trim().is_empty() {
        return;
    }
    for l in text.lines() {
        out.push_str(prefix);
        out.push_str(l);
        out.push('\n');
    }
    out.push('\n');
}

/// Trims trailing spaces and collapses runs of blank lines.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for l in text.lines() {
        let l = l.trim_end();
        if l.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_become_readable_text() {
        let doc = json!({
            "type": "doc", "version": 1,
            "content": [
                {"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Steps"}]},
                {"type": "paragraph", "content": [
                    {"type": "text", "text": "Ask "},
                    {"type": "mention", "attrs": {"id": "5b10", "text": "@Mia Krystof"}},
                    {"type": "text", "text": " about "},
                    {"type": "text", "text": "login()", "marks": [{"type": "code"}]},
                    {"type": "hardBreak"},
                    {"type": "text", "text": "see docs", "marks": [{"type": "link", "attrs": {"href": "https://example.com/docs"}}]}
                ]},
                {"type": "orderedList", "attrs": {"order": 1}, "content": [
                    {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Open the app"}]}]},
                    {"type": "listItem", "content": [
                        {"type": "paragraph", "content": [{"type": "text", "text": "Log in"}]},
                        {"type": "bulletList", "content": [
                            {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "with SSO"}]}]}
                        ]}
                    ]}
                ]},
                {"type": "codeBlock", "attrs": {"language": "text"}, "content": [{"type": "text", "text": "HTTP 500"}]},
                {"type": "mediaSingle", "content": [{"type": "media", "attrs": {"type": "file", "id": "abc", "alt": "screenshot.png"}}]}
            ]
        });
        assert_eq!(
            to_text(&doc),
            "## Steps\n\nAsk @Mia Krystof about `login()`\nsee docs (https://example.com/docs)\n\n\
             1. Open the app\n2. Log in\n  - with SSO\n\n```text\nHTTP 500\n```\n\n\
             [attachment: screenshot.png]"
        );
    }

    #[test]
    fn strings_stay_and_empty_documents_vanish() {
        assert_eq!(text_of(&json!("h1. Title")).as_deref(), Some("h1. Title"));
        assert_eq!(text_of(&json!({"type": "doc", "version": 1, "content": []})), None);
        assert_eq!(text_of(&json!(null)), None);
        let written = from_text("one\n\ntwo");
        assert_eq!(written["type"], "doc");
        assert_eq!(text_of(&written).as_deref(), Some("one\n\ntwo"));
    }
}
