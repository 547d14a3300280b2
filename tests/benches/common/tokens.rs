//! The two payloads of the token figure, shared by the `tokens` bench and test: a GitHub issue
//! list and a GitLab merge request discussion, each served by a loopback server from the recorded
//! API shapes under `tests/data/`, called through a real session of the real host and plugins.
//!
//! Three sizes per payload, all by `estimate_tokens`: the raw API response (what an agent reading
//! the plain API gets), the provider's result (already compact), and what the session hands the
//! model after response projection by the provider's field groups.

use std::path::Path;
use std::sync::Arc;

use quiver_core::response_projection::estimate_tokens;
use quiver_core::ToolValueModel;
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, Session};
use quiver_tests::recorded;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One payload, measured.
pub(crate) struct Measured {
    /// What it is, for reports.
    pub(crate) name: &'static str,
    /// The raw API response.
    pub(crate) raw: Value,
    /// Estimated tokens of the raw API response.
    pub(crate) raw_tokens: u64,
    /// Estimated tokens of the provider's result.
    pub(crate) provider_tokens: u64,
    /// Estimated tokens of what the model gets.
    pub(crate) projected_tokens: u64,
    /// What the model gets.
    pub(crate) projected: Value,
    /// The provider's result, before projection.
    pub(crate) provider: Value,
    /// The tool's effective value model (its field groups drive the projection).
    pub(crate) model: ToolValueModel,
}

impl Measured {
    /// How many fewer tokens the model reads than with the raw API response, in percent.
    pub(crate) fn saved_vs_raw(&self) -> f64 {
        100.0 * (1.0 - self.projected_tokens as f64 / self.raw_tokens as f64)
    }

    /// How many fewer tokens projection alone saves on the provider's result, in percent.
    pub(crate) fn saved_by_projection(&self) -> f64 {
        100.0 * (1.0 - self.projected_tokens as f64 / self.provider_tokens as f64)
    }
}

async fn serve(route: &str, body: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body.to_owned(), "application/json"))
        .mount(&server)
        .await;
    server
}

/// Measures both payloads; `plugins` holds the GitHub and GitLab plugins.
pub(crate) async fn measure(plugins: &Path) -> Vec<Measured> {
    let issues = recorded("github", "issues_list.json");
    let discussions = recorded("gitlab", "merge_request_discussions.json");
    let github = serve("/repos/octocat/Hello-World/issues", &issues).await;
    let gitlab =
        serve("/api/v4/projects/acme%2Fbackend%2Fapi/merge_requests/19/discussions", &discussions)
            .await;
    let text = format!(
        "[providers.github]\nbase_url = \"{}\"\n[providers.gitlab]\nbase_url = \"{}\"\n",
        github.uri(),
        gitlab.uri()
    );
    let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).expect("config");
    let host = Arc::new(Host::with_config(config, Some(plugins)));
    let session = Session::new(Arc::clone(&host), "tokens");
    let calls = [
        (
            "GitHub issue list",
            "github.list_issues",
            json!({"owner": "octocat", "repo": "Hello-World"}),
            issues,
        ),
        (
            "GitLab merge request discussion",
            "gitlab.list_merge_request_discussions",
            json!({"project": "acme/backend/api", "iid": 19}),
            discussions,
        ),
    ];
    let mut measured = Vec::new();
    for (name, tool, args, raw) in calls {
        let (result, effects) = session.call(tool, args.clone(), &[]).await;
        assert!(!result.is_error, "{tool}: {result:?}");
        let provider = host.call(tool, args, None, "tokens", None).await;
        let registered = host.tool(tool).expect("the plugin's tool");
        let raw: Value = serde_json::from_str(&raw).expect("recorded JSON");
        measured.push(Measured {
            name,
            raw_tokens: estimate_tokens(&raw),
            raw,
            provider_tokens: effects.tokens_before,
            projected_tokens: effects.tokens_after,
            projected: result.structured.expect("structured result"),
            provider: provider.structured.expect("structured result"),
            model: host.value_model(&registered).model,
        });
    }
    session.shutdown().await;
    measured
}
