//! Security alerts, read only: Dependabot (vulnerable dependencies) and code scanning.

use quiver_plugin_sdk::prelude::*;

use crate::client::{next_cursor, paging, repo_path, uri, Subject};
use crate::model::{login, WireUser};
use crate::text::truncate_opt;
use crate::GitHub;

/// Longest alert message or summary kept, in bytes.
const MESSAGE_MAX_BYTES: usize = 1024;

/// Arguments of `list_dependabot_alerts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDependabotAlertsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// `open` (the default here), `fixed`, `dismissed` or `auto_dismissed`; comma-separated
    /// for several.
    pub(crate) state: Option<String>,
    /// `critical`, `high`, `medium` or `low`; comma-separated for several.
    pub(crate) severity: Option<String>,
    /// `npm`, `pip`, `cargo`, `maven`, `nuget`, `rubygems`, `composer`, `go`…
    pub(crate) ecosystem: Option<String>,
    /// Only alerts for this package name.
    pub(crate) package: Option<String>,
    /// `runtime` or `development` dependencies only.
    pub(crate) scope: Option<String>,
    /// The cursor of the next page (`next_cursor` of the previous call).
    pub(crate) after: Option<String>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `list_code_scanning_alerts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCodeScanningAlertsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// `open` (the default here), `closed`, `dismissed` or `fixed`.
    pub(crate) state: Option<String>,
    /// `critical`, `high`, `medium`, `low`, `warning`, `note` or `error`.
    pub(crate) severity: Option<String>,
    /// Only alerts of this tool, e.g. `CodeQL`.
    pub(crate) tool_name: Option<String>,
    /// Only alerts on this ref, e.g. `refs/heads/main` or `refs/pull/42/merge`; the default
    /// branch when unset.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// A Dependabot alert.
#[derive(Debug, Deserialize)]
pub(crate) struct WireDependabotAlert {
    number: u64,
    #[serde(default)]
    state: String,
    #[serde(default)]
    dependency: Option<WireDependency>,
    #[serde(default)]
    security_advisory: Option<WireAdvisory>,
    #[serde(default)]
    security_vulnerability: Option<WireVulnerability>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    fixed_at: Option<String>,
    #[serde(default)]
    dismissed_at: Option<String>,
    #[serde(default)]
    dismissed_reason: Option<String>,
}

/// The dependency an alert is about.
#[derive(Debug, Deserialize)]
pub(crate) struct WireDependency {
    #[serde(default)]
    package: Option<WirePackage>,
    #[serde(default)]
    manifest_path: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

/// A package.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePackage {
    #[serde(default)]
    ecosystem: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// The advisory behind an alert.
#[derive(Debug, Deserialize)]
pub(crate) struct WireAdvisory {
    #[serde(default)]
    ghsa_id: Option<String>,
    #[serde(default)]
    cve_id: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    severity: Option<String>,
}

/// The vulnerable versions and the fix.
#[derive(Debug, Deserialize)]
pub(crate) struct WireVulnerability {
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    vulnerable_version_range: Option<String>,
    #[serde(default)]
    first_patched_version: Option<WireVersion>,
}

/// A version.
#[derive(Debug, Deserialize)]
pub(crate) struct WireVersion {
    #[serde(default)]
    identifier: Option<String>,
}

/// A code scanning alert.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCodeScanningAlert {
    number: u64,
    #[serde(default)]
    state: String,
    #[serde(default)]
    rule: Option<WireRule>,
    #[serde(default)]
    tool: Option<WireTool>,
    #[serde(default)]
    most_recent_instance: Option<WireInstance>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    dismissed_by: Option<WireUser>,
    #[serde(default)]
    dismissed_reason: Option<String>,
    #[serde(default)]
    fixed_at: Option<String>,
}

/// The rule an alert broke.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRule {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    security_severity_level: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// The tool that found it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTool {
    #[serde(default)]
    name: Option<String>,
}

/// Where the alert was last seen.
#[derive(Debug, Deserialize)]
pub(crate) struct WireInstance {
    #[serde(rename = "ref", default)]
    git_ref: Option<String>,
    #[serde(default)]
    message: Option<WireText>,
    #[serde(default)]
    location: Option<WireLocation>,
}

/// `{"text": …}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireText {
    #[serde(default)]
    text: Option<String>,
}

/// A place in a file.
#[derive(Debug, Deserialize)]
pub(crate) struct WireLocation {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    start_line: Option<u64>,
    #[serde(default)]
    end_line: Option<u64>,
}

/// One Dependabot alert.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DependabotAlert {
    /// The alert number.
    pub(crate) number: u64,
    /// `open`, `fixed`, `dismissed` or `auto_dismissed`.
    pub(crate) state: String,
    /// `critical`, `high`, `medium` or `low`.
    pub(crate) severity: Option<String>,
    /// The vulnerable package.
    pub(crate) package: Option<String>,
    /// Its ecosystem, e.g. `npm`.
    pub(crate) ecosystem: Option<String>,
    /// The manifest that pulls it in, e.g. `package-lock.json`.
    pub(crate) manifest_path: Option<String>,
    /// `runtime` or `development`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<String>,
    /// The advisory's summary.
    pub(crate) summary: Option<String>,
    /// The GitHub advisory id.
    pub(crate) ghsa_id: Option<String>,
    /// The CVE id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cve_id: Option<String>,
    /// The vulnerable versions, e.g. `< 4.17.21`.
    pub(crate) vulnerable_versions: Option<String>,
    /// The first version that fixes it (null when none does yet).
    pub(crate) patched_version: Option<String>,
    /// When it was raised.
    pub(crate) created_at: Option<String>,
    /// When it was fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fixed_at: Option<String>,
    /// When it was dismissed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dismissed_at: Option<String>,
    /// Why it was dismissed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dismissed_reason: Option<String>,
    /// The alert on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_dependabot_alerts`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DependabotAlertList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The alerts of this page, newest first.
    pub(crate) alerts: Vec<DependabotAlert>,
    /// Pass as `after` for the next page; null on the last page.
    pub(crate) next_cursor: Option<String>,
}

/// One code scanning alert.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CodeScanningAlert {
    /// The alert number.
    pub(crate) number: u64,
    /// `open`, `dismissed` or `fixed`.
    pub(crate) state: String,
    /// The security severity (`critical`, `high`, `medium`, `low`), else the rule's severity
    /// (`error`, `warning`, `note`).
    pub(crate) severity: Option<String>,
    /// The rule broken, e.g. `js/zipslip`.
    pub(crate) rule: Option<String>,
    /// What the rule looks for.
    pub(crate) description: Option<String>,
    /// The tool that found it, e.g. `CodeQL`.
    pub(crate) tool: Option<String>,
    /// The file.
    pub(crate) path: Option<String>,
    /// The first line.
    pub(crate) start_line: Option<u64>,
    /// The last line, when not the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_line: Option<u64>,
    /// What the tool says about this place (cut at 1 KiB).
    pub(crate) message: Option<String>,
    /// The ref it was last seen on.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// When it was raised.
    pub(crate) created_at: Option<String>,
    /// Who dismissed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dismissed_by: Option<String>,
    /// Why it was dismissed: `false positive`, `won't fix`, `used in tests`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dismissed_reason: Option<String>,
    /// When it was fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fixed_at: Option<String>,
    /// The alert on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_code_scanning_alerts`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CodeScanningAlertList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The alerts of this page, newest first.
    pub(crate) alerts: Vec<CodeScanningAlert>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// The `list_dependabot_alerts` result.
pub(crate) fn dependabot_alert_list(
    repository: String,
    page: Vec<WireDependabotAlert>,
    next_cursor: Option<String>,
) -> DependabotAlertList {
    let alerts = page
        .into_iter()
        .map(|a| {
            let dependency = a.dependency;
            let package = dependency.as_ref().and_then(|d| d.package.as_ref());
            let advisory = a.security_advisory;
            let vulnerability = a.security_vulnerability;
            DependabotAlert {
                number: a.number,
                state: a.state,
                severity: vulnerability
                    .as_ref()
                    .and_then(|v| v.severity.clone())
                    .or_else(|| advisory.as_ref().and_then(|s| s.severity.clone())),
                package: package.and_then(|p| p.name.clone()),
                ecosystem: package.and_then(|p| p.ecosystem.clone()),
                manifest_path: dependency.as_ref().and_then(|d| d.manifest_path.clone()),
                scope: dependency.and_then(|d| d.scope),
                summary: advisory.as_ref().and_then(|s| s.summary.clone()),
                ghsa_id: advisory.as_ref().and_then(|s| s.ghsa_id.clone()),
                cve_id: advisory.and_then(|s| s.cve_id),
                vulnerable_versions: vulnerability
                    .as_ref()
                    .and_then(|v| v.vulnerable_version_range.clone()),
                patched_version: vulnerability
                    .and_then(|v| v.first_patched_version)
                    .and_then(|v| v.identifier),
                created_at: a.created_at,
                fixed_at: a.fixed_at,
                dismissed_at: a.dismissed_at,
                dismissed_reason: a.dismissed_reason,
                html_url: a.html_url,
            }
        })
        .collect();
    DependabotAlertList { repository, alerts, next_cursor }
}

/// The `list_code_scanning_alerts` result.
pub(crate) fn code_scanning_alert_list(
    repository: String,
    page: Vec<WireCodeScanningAlert>,
    next_page: Option<u32>,
) -> CodeScanningAlertList {
    let alerts = page
        .into_iter()
        .map(|a| {
            let rule = a.rule;
            let instance = a.most_recent_instance;
            let location = instance.as_ref().and_then(|i| i.location.as_ref());
            let start_line = location.and_then(|l| l.start_line);
            CodeScanningAlert {
                number: a.number,
                state: a.state,
                severity: rule
                    .as_ref()
                    .and_then(|r| r.security_severity_level.clone().or_else(|| r.severity.clone())),
                rule: rule.as_ref().and_then(|r| r.id.clone()),
                description: rule.and_then(|r| r.description),
                tool: a.tool.and_then(|t| t.name),
                path: location.and_then(|l| l.path.clone()),
                start_line,
                end_line: location.and_then(|l| l.end_line).filter(|e| Some(*e) != start_line),
                message: truncate_opt(
                    instance.as_ref().and_then(|i| i.message.as_ref()).and_then(|m| m.text.clone()),
                    MESSAGE_MAX_BYTES,
                ),
                git_ref: instance.and_then(|i| i.git_ref),
                created_at: a.created_at,
                dismissed_by: login(a.dismissed_by),
                dismissed_reason: a.dismissed_reason,
                fixed_at: a.fixed_at,
                html_url: a.html_url,
            }
        })
        .collect();
    CodeScanningAlertList { repository, alerts, next_page }
}

/// The 404 message: GitHub answers 404 alike for a missing repository and for one where the
/// feature is off or hidden from the token.
fn not_found(feature: &str, repository: &str) -> String {
    format!(
        "no {feature} for {repository}: the repository does not exist, {feature} are not \
         enabled on it, or the token cannot see them (they need the `security_events` scope or \
         the matching read permission)"
    )
}

impl GitHub {
    async fn list_dependabot_alerts(
        &self,
        a: ListDependabotAlertsArgs,
        ctx: &ToolContext,
    ) -> Result<DependabotAlertList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let query = [
            ("state", Some(a.state.unwrap_or_else(|| "open".to_owned()))),
            ("severity", a.severity),
            ("ecosystem", a.ecosystem),
            ("package", a.package),
            ("scope", a.scope),
            ("after", a.after.filter(|c| !c.is_empty())),
            ("per_page", Some(a.per_page.unwrap_or(30).clamp(1, 100).to_string())),
        ];
        let path = format!("/repos/{repository}/dependabot/alerts");
        let subject = Subject::listing("the Dependabot alerts", &repository)
            .not_found_says(not_found("Dependabot alerts", &repository));
        let reply = self
            .client
            .request(http::Method::GET, &uri(&path, &query), None, &subject, ctx)
            .await?;
        let page: Vec<WireDependabotAlert> = self.client.parse(&reply, &subject)?;
        Ok(dependabot_alert_list(repository, page, next_cursor(&reply.headers, "after")))
    }

    async fn list_code_scanning_alerts(
        &self,
        a: ListCodeScanningAlertsArgs,
        ctx: &ToolContext,
    ) -> Result<CodeScanningAlertList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![
            ("state", Some(a.state.unwrap_or_else(|| "open".to_owned()))),
            ("severity", a.severity),
            ("tool_name", a.tool_name),
            ("ref", a.git_ref),
        ];
        query.extend(paging(a.page, a.per_page));
        let path = format!("/repos/{repository}/code-scanning/alerts");
        let subject = Subject::listing("the code scanning alerts", &repository)
            .not_found_says(not_found("code scanning alerts", &repository));
        let (page, next) = self
            .client
            .get_json::<Vec<WireCodeScanningAlert>>(&uri(&path, &query), &subject, ctx)
            .await?;
        Ok(code_scanning_alert_list(repository, page, next))
    }
}

register_tool! {
    provider: GitHub,
    name: "list_dependabot_alerts",
    group: "security",
    description: "List a repository's Dependabot alerts (open by default): vulnerable package, \
                  severity, advisory, vulnerable and patched versions. Read only.",
    input: ListDependabotAlertsArgs,
    output: DependabotAlertList,
    handler: GitHub::list_dependabot_alerts,
}

register_tool! {
    provider: GitHub,
    name: "list_code_scanning_alerts",
    group: "security",
    description: "List a repository's code scanning alerts (open by default): rule, severity, \
                  tool, file and line, and the tool's message. Read only.",
    input: ListCodeScanningAlertsArgs,
    output: CodeScanningAlertList,
    handler: GitHub::list_code_scanning_alerts,
}
