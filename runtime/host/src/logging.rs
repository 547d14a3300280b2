//! Logs: tracing to stderr (stdout belongs to the MCP stream), plugin logs bridged in, secrets
//! masked everywhere.
//!
//! Two defences keep tokens out of logs: arguments are previewed with sensitive parameters masked
//! ([`preview_args`]), and every line a plugin logs and every error a call returns is scrubbed of
//! the credentials the host handed out, in every encoding ([`register_secret`], [`scrub`]).

use std::sync::RwLock;

use abi_stable::std_types::RStr;
use quiver_core::secrets::SecretMask;
use quiver_plugin_abi::{LogLevel, LogSink};
use serde_json::Value;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;

/// Longest argument preview in a log line, in characters.
pub const PREVIEW_CHARS: usize = 160;

const MASK: &str = quiver_core::secrets::MASK;

static SECRETS: RwLock<Option<SecretMask>> = RwLock::new(None);

/// Remembers a secret value (a token) so it is masked, in every form it travels in, in any log
/// line, error or tool result the host passes on.
pub fn register_secret(secret: &str) {
    register_credential(secret, None);
}

/// The secret in environment variable `variable` — unset or blank is none — registered
/// ([`register_secret`]) before anyone sees it.
pub fn secret_from_env(variable: &str) -> Option<String> {
    let secret = std::env::var(variable).ok().filter(|s| !s.trim().is_empty())?;
    register_secret(&secret);
    Some(secret)
}

/// [`register_secret`] for a credential sent with Basic auth: `base64(user:secret)` is masked
/// too.
pub fn register_credential(secret: &str, user: Option<&str>) {
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    secrets.get_or_insert_with(SecretMask::default).add_credential(secret, user);
}

/// `text` with every form of every registered secret, and every echoed credential header value,
/// replaced by `***`.
pub fn scrub(text: &str) -> String {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    match secrets.as_ref() {
        Some(mask) => mask.mask(text),
        None => quiver_core::secrets::mask_credential_headers(text),
    }
}

/// [`scrub`] for a JSON value, in place: every string and key, and the whole value of any entry
/// named like a credential header; the value keeps its shape.
pub fn scrub_json(value: &mut Value) {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    match secrets.as_ref() {
        Some(mask) => mask.mask_json(value),
        None => SecretMask::default().mask_json(value),
    }
}

/// Installs the stderr subscriber. `RUST_LOG` wins; otherwise `default` (`warn` for the CLI).
/// Every line, the libraries' too (rmcp's, reqwest's, hyper's), is scrubbed as a whole before it
/// is written: a library that logs a server's 401 body echoing the request's header, or its own
/// request, cannot show a token.
pub fn init(default: LevelFilter) {
    init_with(default, &[]);
}

/// [`init`], with `directives` (`rmcp=error`) applied unless `RUST_LOG` says otherwise.
pub fn init_with(default: LevelFilter, directives: &[&str]) {
    init_with_traces(default, directives, None);
}

/// [`init_with`], and quiver's spans exported by `traces` ([`crate::traces::start`]) whatever
/// the log level: the level filters what is written to stderr only.
pub fn init_with_traces(
    default: LevelFilter,
    directives: &[&str],
    traces: Option<crate::traces::TracesLayer>,
) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let mut filter = EnvFilter::builder().with_default_directive(default.into()).from_env_lossy();
    if std::env::var_os(EnvFilter::DEFAULT_ENV).is_none_or(|v| v.is_empty()) {
        for directive in directives {
            if let Ok(directive) = directive.parse() {
                filter = filter.add_directive(directive);
            }
        }
    }
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(ScrubbedStderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true)
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(traces).with(stderr).try_init();
}

/// Makes a [`ScrubbedLine`] per event.
struct ScrubbedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbedStderr {
    type Writer = ScrubbedLine;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedLine(Vec::new())
    }
}

/// One formatted event, held until it is complete, then scrubbed and written to stderr at once
/// (a token split across two writes would escape a per-write scrub).
struct ScrubbedLine(Vec<u8>);

impl std::io::Write for ScrubbedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let line = scrub(&String::from_utf8_lossy(&self.0));
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }
}

/// The sink handed to plugins: their lines arrive as `quiver::plugin` events, scrubbed.
pub fn plugin_sink() -> LogSink {
    let max_level = match LevelFilter::current() {
        LevelFilter::OFF => LogLevel(0),
        LevelFilter::ERROR => LogLevel::ERROR,
        LevelFilter::WARN => LogLevel::WARN,
        LevelFilter::INFO => LogLevel::INFO,
        LevelFilter::DEBUG => LogLevel::DEBUG,
        _ => LogLevel::TRACE,
    };
    LogSink { max_level, log: plugin_log }
}

extern "C" fn plugin_log(level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
    // A panic must not unwind into the plugin's frames.
    let _ = std::panic::catch_unwind(|| {
        let message = scrub(message.as_str());
        let target = target.as_str();
        match level {
            LogLevel::ERROR => {
                tracing::error!(target: "quiver::plugin", plugin_target = target, "{message}")
            }
            LogLevel::WARN => {
                tracing::warn!(target: "quiver::plugin", plugin_target = target, "{message}")
            }
            LogLevel::INFO => {
                tracing::info!(target: "quiver::plugin", plugin_target = target, "{message}")
            }
            LogLevel::DEBUG => {
                tracing::debug!(target: "quiver::plugin", plugin_target = target, "{message}")
            }
            _ => tracing::trace!(target: "quiver::plugin", plugin_target = target, "{message}"),
        }
    });
}

/// Whether an argument name looks like it holds a secret, whatever the tool declared.
fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["token", "secret", "password", "passwd", "authorization", "api_key", "apikey", "credential"]
        .iter()
        .any(|s| key.contains(s))
}

/// A one-line preview of call arguments for the log: sensitive parameters (declared by the tool,
/// or named like a secret) masked at any depth, registered secrets scrubbed, and cut to
/// [`PREVIEW_CHARS`] characters saying how much was cut.
pub fn preview_args(args: &Value, sensitive: &[String]) -> String {
    fn mask(value: &Value, sensitive: &[String]) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let masked = if sensitive.iter().any(|s| s == k) || looks_secret(k) {
                            Value::String(MASK.to_owned())
                        } else {
                            mask(v, sensitive)
                        };
                        (k.clone(), masked)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| mask(v, sensitive)).collect()),
            other => other.clone(),
        }
    }
    let text = scrub(&mask(args, sensitive).to_string());
    let total = text.chars().count();
    if total <= PREVIEW_CHARS {
        text
    } else {
        let cut: String = text.chars().take(PREVIEW_CHARS).collect();
        format!("{cut}… ({} more chars)", total - PREVIEW_CHARS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn previews_mask_declared_and_secret_looking_parameters() {
        let args = json!({"owner": "octo", "api_key": "k-123456", "nested": {"auth_token": "t"}, "pin": "1234"});
        let preview = preview_args(&args, &["pin".to_owned()]);
        assert!(preview.contains(r#""owner":"octo""#), "{preview}");
        assert!(!preview.contains("k-123456") && !preview.contains("1234"), "{preview}");
        assert_eq!(preview.matches(MASK).count(), 3, "{preview}");
    }

    #[test]
    fn long_previews_are_cut_and_say_so() {
        let args = json!({"body": "x".repeat(1000)});
        let preview = preview_args(&args, &[]);
        assert!(preview.starts_with(r#"{"body":"xxx"#));
        assert!(preview.ends_with("more chars)"), "{preview}");
        assert!(preview.chars().count() < PREVIEW_CHARS + 30);
    }

    #[test]
    fn registered_secrets_are_scrubbed_from_any_text() {
        register_secret("ghp_supersecretvalue");
        assert_eq!(scrub("token ghp_supersecretvalue"), "token ***");
        assert_eq!(scrub("Authorization: token ghp_supersecretvalue"), "Authorization: ***");
        let preview = preview_args(&json!({"q": "ghp_supersecretvalue"}), &[]);
        assert!(!preview.contains("supersecret"), "{preview}");
    }
}
