//! Resources a provider serves through one of its tools: a URI template (RFC 6570, the subset
//! MCP servers use) names a family of resources, and reading one calls the tool with the
//! template's variables as arguments — so a resource read is priced, cached, refused by policy
//! and masked exactly as the tool's call would be, by the tool's value model.
//!
//! Templates take `{name}` (one path segment), `{+name}` (the rest, slashes included) and a
//! final `{?a,b}` (optional query parameters). Values are percent-decoded.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A family of resources a provider reads with one of its tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceTemplate {
    /// The URI template: `github://repos/{owner}/{repo}/contents/{+path}{?ref}`.
    pub uri_template: String,
    /// A short name (`file`), listed under the provider's prefix.
    pub name: String,
    /// What a resource of the family is.
    pub description: String,
    /// The MIME type of what a read returns (`text/plain` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The provider's tool that reads one: the template's variables are its arguments.
    pub tool: String,
    /// The field of the tool's structured result that holds the resource's text (`content`);
    /// unset: the result's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_field: Option<String>,
}

/// One part of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// `{name}`: up to the next `/`, `?` or the literal after it.
    Segment(String),
    /// `{+name}`: everything up to the literal after it (or the query).
    Rest(String),
    /// `{?a,b}`: the query, each parameter optional.
    Query(Vec<String>),
}

/// A parsed URI template, for matching URIs against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`; an error names what is wrong with it.
    pub fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            if matches!(parts.last(), Some(Part::Query(_))) {
                return Err(format!("`{template}`: the query `{{?…}}` must come last"));
            }
            match rest.find('{') {
                Some(0) => {
                    let end = rest
                        .find('}')
                        .ok_or_else(|| format!("`{template}`: a `{{` is never closed"))?;
                    let expression = &rest[1..end];
                    let part = if let Some(names) = expression.strip_prefix('?') {
                        Part::Query(names.split(',').map(str::to_owned).collect())
                    } else if let Some(name) = expression.strip_prefix('+') {
                        Part::Rest(name.to_owned())
                    } else {
                        Part::Segment(expression.to_owned())
                    };
                    let name_ok = |n: &str| {
                        !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    };
                    let valid = match &part {
                        Part::Query(names) => names.iter().all(|n| name_ok(n)),
                        Part::Rest(n) | Part::Segment(n) => name_ok(n),
                        Part::Literal(_) => true,
                    };
                    if !valid {
                        return Err(format!(
                            "`{template}`: `{{{expression}}}` is not a variable quiver can match \
                             (`{{name}}`, `{{+name}}` or `{{?a,b}}`)"
                        ));
                    }
                    parts.push(part);
                    rest = &rest[end + 1..];
                }
                Some(at) => {
                    parts.push(Part::Literal(rest[..at].to_owned()));
                    rest = &rest[at..];
                }
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        Ok(Self { parts })
    }

    /// The variables of `uri` when it is of this template (percent-decoded strings), else `None`.
    pub fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        let (path, query) = match self.parts.last() {
            Some(Part::Query(_)) => match uri.split_once('?') {
                Some((path, query)) => (path, Some(query)),
                None => (uri, None),
            },
            _ => (uri, None),
        };
        let mut found = Map::new();
        let mut rest = path;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
                Part::Segment(name) | Part::Rest(name) => {
                    // The value ends where the next literal starts (for a segment, at a `/` too).
                    let next = match self.parts.get(i + 1) {
                        Some(Part::Literal(literal)) => Some(literal.as_str()),
                        _ => None,
                    };
                    let end = match (part, next) {
                        (Part::Segment(_), Some(next)) => {
                            let at = rest.find(next)?;
                            if at > rest.find('/').unwrap_or(rest.len()) {
                                return None;
                            }
                            at
                        }
                        (Part::Segment(_), None) => {
                            if rest.contains('/') {
                                return None;
                            }
                            rest.len()
                        }
                        (_, Some(next)) => rest.find(next)?,
                        (_, None) => rest.len(),
                    };
                    if end == 0 {
                        return None;
                    }
                    found.insert(name.clone(), Value::String(decode(&rest[..end])?));
                    rest = &rest[end..];
                }
                Part::Query(names) => {
                    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
                        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                        if !names.iter().any(|n| n == key) {
                            return None;
                        }
                        found.insert(key.to_owned(), Value::String(decode(value)?));
                    }
                }
            }
        }
        rest.is_empty().then_some(found)
    }
}

fn decode(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text).decode_utf8().ok().map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(template: &str, uri: &str) -> Option<Value> {
        UriTemplate::parse(template).unwrap().matches(uri).map(Value::Object)
    }

    #[test]
    fn a_file_uri_gives_owner_repo_path_and_an_optional_ref() {
        let t = "github://repos/{owner}/{repo}/contents/{+path}{?ref}";
        assert_eq!(
            vars(t, "github://repos/octocat/Hello-World/contents/src/main.rs"),
            Some(json!({"owner": "octocat", "repo": "Hello-World", "path": "src/main.rs"}))
        );
        assert_eq!(
            vars(t, "github://repos/octocat/Hello-World/contents/a%20b.md?ref=v1.0"),
            Some(
                json!({"owner": "octocat", "repo": "Hello-World", "path": "a b.md", "ref": "v1.0"})
            )
        );
        assert_eq!(vars(t, "github://repos/octocat/Hello-World/contents/x?branch=main"), None);
        assert_eq!(vars(t, "github://repos/octocat/contents/x"), None);
        assert_eq!(vars(t, "gitlab://repos/octocat/Hello-World/contents/x"), None);
    }

    #[test]
    fn a_segment_stops_at_a_slash_and_encoded_slashes_are_kept_inside_it() {
        let t = "gitlab://projects/{project}/jobs/{job_id}/log";
        assert_eq!(
            vars(t, "gitlab://projects/group%2Fapp/jobs/42/log"),
            Some(json!({"project": "group/app", "job_id": "42"}))
        );
        assert_eq!(vars(t, "gitlab://projects/group/app/jobs/42/log"), None);
        assert_eq!(vars(t, "gitlab://projects//jobs/42/log"), None);
        assert_eq!(vars(t, "gitlab://projects/7/jobs/42/log/extra"), None);
    }

    #[test]
    fn bad_templates_are_refused_saying_why() {
        assert!(UriTemplate::parse("x://{a").unwrap_err().contains("never closed"));
        assert!(UriTemplate::parse("x://{a b}").unwrap_err().contains("not a variable"));
        assert!(UriTemplate::parse("x://{?a}/{b}").unwrap_err().contains("must come last"));
    }
}
