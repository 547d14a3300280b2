//! Pieces of GitHub's JSON shared by several tools, read leniently: each wire struct names only
//! the fields the provider keeps, every optional field has a default, and anything else GitHub
//! sends (node ids, API URLs, avatars, reactions, nested repositories) is skipped while parsing.

use quiver_plugin_sdk::prelude::*;
pub(crate) use quiver_plugin_sdk::support::json::{is_false, is_zero, nullable};

/// A user as GitHub nests it (`user`, `assignees[]`, `merged_by`…); only the login is kept.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireUser {
    pub(crate) login: String,
}

/// A label as GitHub nests it; only the name is kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum WireLabel {
    /// `{"name": "bug", "color": …}` (issues, pull requests).
    Object {
        /// The label's name.
        name: String,
    },
    /// A bare name, as some endpoints send.
    Name(String),
}

impl WireLabel {
    /// The label's name.
    pub(crate) fn name(&self) -> &str {
        match self {
            WireLabel::Object { name } | WireLabel::Name(name) => name,
        }
    }
}

/// The login of an optional user.
pub(crate) fn login(user: Option<WireUser>) -> Option<String> {
    user.map(|u| u.login)
}

/// The logins of a list of users.
pub(crate) fn logins(users: Vec<WireUser>) -> Vec<String> {
    users.into_iter().map(|u| u.login).collect()
}

/// The names of a list of labels.
pub(crate) fn label_names(labels: &[WireLabel]) -> Vec<String> {
    labels.iter().map(|l| l.name().to_owned()).collect()
}

/// `octo/hello` from an API URL such as `https://api.github.com/repos/octo/hello` (also below a
/// GitHub Enterprise prefix `…/api/v3/repos/octo/hello`).
pub(crate) fn repository_from_api_url(url: &str) -> Option<String> {
    let rest = url.split("/repos/").nth(1)?;
    let mut parts = rest.split('/');
    let owner = parts.next().filter(|s| !s.is_empty())?;
    let repo = parts.next().filter(|s| !s.is_empty())?;
    Some(format!("{owner}/{repo}"))
}

/// Splits `octo/hello` into `("octo", "hello")`.
pub(crate) fn split_repository(full: &str) -> Option<(&str, &str)> {
    let (owner, repo) = full.split_once('/')?;
    (!owner.is_empty() && !repo.is_empty() && !repo.contains('/')).then_some((owner, repo))
}

/// `state` of issues and pull requests listings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StateFilter {
    /// Only open ones (GitHub's default).
    Open,
    /// Only closed (or merged) ones.
    Closed,
    /// Both.
    All,
}

impl StateFilter {
    /// The query value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StateFilter::Open => "open",
            StateFilter::Closed => "closed",
            StateFilter::All => "all",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_come_from_api_urls() {
        assert_eq!(
            repository_from_api_url("https://api.github.com/repos/octo/hello").as_deref(),
            Some("octo/hello")
        );
        assert_eq!(
            repository_from_api_url("https://ghe.example.com/api/v3/repos/octo/hello/issues/3")
                .as_deref(),
            Some("octo/hello")
        );
        assert_eq!(repository_from_api_url("https://api.github.com/users/octo"), None);
        assert_eq!(split_repository("octo/hello"), Some(("octo", "hello")));
        assert_eq!(split_repository("octo"), None);
    }

    #[test]
    fn labels_may_be_objects_or_names() {
        let labels: Vec<WireLabel> =
            serde_json::from_value(json!([{"name": "bug", "color": "f29513"}, "ui"])).unwrap();
        assert_eq!(label_names(&labels), ["bug", "ui"]);
    }
}
