//! Pieces of ClickUp's JSON shared by several tools, read leniently, and the conversions every
//! tool needs: Unix-millisecond timestamps to ISO 8601 and back, durations, and ids that arrive
//! as strings or numbers.
//!
//! ClickUp's v2 API is loose about types: ids, timestamps, `task_count`, `time_spent` and
//! `orderindex` arrive as strings on one endpoint and numbers on another (sometimes on the same
//! one), priorities as objects or bare numbers. Every wire struct here names only the fields the
//! provider keeps, accepts each of those spellings, and skips the rest (avatars, colours,
//! permission levels, feature flags) while parsing.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::format_unix_time;
pub(crate) use quiver_plugin_sdk::support::json::is_false;
use quiver_plugin_sdk::support::time::parse_timestamp_ms;

/// A user as ClickUp nests it (`creator`, `assignees[]`, comment `user`, time entry `user`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireUser {
    #[serde(default, deserialize_with = "lenient_string")]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) username: Option<String>,
    #[serde(default)]
    pub(crate) email: Option<String>,
}

impl WireUser {
    /// The name a person reads: the username, else the email, else `user <id>`.
    pub(crate) fn name(&self) -> String {
        self.username
            .clone()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| self.email.clone().filter(|e| !e.is_empty()))
            .unwrap_or_else(|| format!("user {}", self.id.as_deref().unwrap_or("?")))
    }
}

/// The names of a list of users.
pub(crate) fn user_names(users: &[WireUser]) -> Vec<String> {
    users.iter().map(WireUser::name).collect()
}

/// A task status: `{"status": "in progress", "type": "custom", "color": …, "orderindex": 1}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct WireStatus {
    #[serde(default)]
    pub(crate) status: Option<String>,
    /// `open`, `custom`, `closed` or `done`.
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
}

impl WireStatus {
    /// Whether the status closes the task (`closed` or `done` type).
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.kind.as_deref(), Some("closed" | "done"))
    }
}

/// A priority: an object (`{"priority": "high", "id": "2", …}`), a bare number (1 urgent … 4
/// low, as the filtered-tasks endpoint sends it), or null.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum WirePriority {
    /// `{"priority": "high", …}`.
    Object {
        #[serde(default)]
        priority: Option<String>,
        #[serde(default, deserialize_with = "lenient_string")]
        id: Option<String>,
    },
    /// `2`.
    Number(u64),
    /// `"2"` or `"high"`.
    Text(String),
}

impl WirePriority {
    /// `urgent`, `high`, `normal` or `low`.
    pub(crate) fn name(&self) -> Option<String> {
        match self {
            WirePriority::Object { priority: Some(p), .. } if !p.is_empty() => Some(p.clone()),
            WirePriority::Object { id: Some(id), .. } => priority_name(id),
            WirePriority::Object { .. } => None,
            WirePriority::Number(n) => priority_name(&n.to_string()),
            WirePriority::Text(t) => priority_name(t).or_else(|| Some(t.clone())),
        }
    }
}

fn priority_name(id: &str) -> Option<String> {
    let name = match id.trim() {
        "1" => "urgent",
        "2" => "high",
        "3" => "normal",
        "4" => "low",
        _ => return None,
    };
    Some(name.to_owned())
}

/// A tag: `{"name": "bug", "tag_fg": …, "tag_bg": …}`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireTag {
    pub(crate) name: String,
}

/// An item of the hierarchy as a task or list nests it: `{"id": "123", "name": "Backlog", …}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct WireRef {
    #[serde(default, deserialize_with = "lenient_string")]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// `true` for the placeholder folder ClickUp reports for folderless lists.
    #[serde(default)]
    pub(crate) hidden: bool,
}

/// Reads a string, a number or null as an optional string (ClickUp sends ids, timestamps and
/// counts either way).
pub(crate) fn lenient_string<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(match Option::<Value>::deserialize(deserializer)? {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::Bool(b)) => Some(b.to_string()),
        _ => None,
    })
}

/// Reads a number, a numeric string or null as an optional integer (`"12"`, `12`, `1.2`).
pub(crate) fn lenient_u64<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(match Option::<Value>::deserialize(deserializer)? {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok().map(|f| f.max(0.0) as u64),
        _ => None,
    })
}

/// Reads an id argument given as a string or a number (`"901"` or `901`).
pub(crate) fn id_arg<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Value::deserialize(deserializer)? {
        Value::String(s) => Ok(s.trim().to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!("expected an id (string), got {other}"))),
    }
}

/// Like [`id_arg`], for optional ids.
pub(crate) fn opt_id_arg<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => {
            Err(serde::de::Error::custom(format!("expected an id (string), got {other}")))
        }
    }
}

/// A Unix-milliseconds timestamp (as ClickUp sends it: `"1567780450202"`) as ISO 8601 UTC
/// (`2019-09-06T14:34:10Z`); `None` for empty or unreadable values.
pub(crate) fn iso_from_ms(ms: Option<&str>) -> Option<String> {
    let ms: i64 = ms?.trim().parse::<f64>().ok().filter(|f| f.is_finite())? as i64;
    (ms > 0).then(|| format_unix_time((ms / 1000) as u64))
}

/// `2 h 5 min`, `45 min`, `30 s`: a duration in milliseconds as a person reads it.
pub(crate) fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        _ if s % 3600 / 60 == 0 => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A date argument as ClickUp wants it, Unix milliseconds: ISO 8601 (`2024-05-01`,
/// `2024-05-01T09:30:00Z`, `2024-05-01T09:30:00+02:00`; no zone means UTC) or a Unix time
/// (milliseconds, or seconds when it has at most 10 digits).
pub(crate) fn parse_date(field: &str, text: &str) -> Result<i64, ToolError> {
    parse_timestamp_ms(text)
        .map_err(|why| ToolError::invalid_arguments(format!("`{field}`: {why}")))
}

/// Checks an id before it goes into a URL path: ClickUp ids are letters, digits, `-` and `_`
/// (custom task ids look like `DEV-42`).
pub(crate) fn check_id(field: &str, value: &str) -> Result<(), ToolError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value != "."
        && value != "..";
    if ok {
        Ok(())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be a ClickUp id (letters, digits, `-`, `_`), e.g. `86cv5pkvr` or \
             `901234567`; got `{value}`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_become_iso_and_dates_become_milliseconds() {
        assert_eq!(iso_from_ms(Some("1567780450202")).as_deref(), Some("2019-09-06T14:34:10Z"));
        assert_eq!(iso_from_ms(Some("")), None);
        assert_eq!(iso_from_ms(None), None);
        assert_eq!(parse_date("d", "2019-09-06T14:34:10Z").unwrap(), 1_567_780_450_000);
        assert_eq!(parse_date("d", "2019-09-06T14:34:10.202Z").unwrap(), 1_567_780_450_202);
        assert_eq!(parse_date("d", "2019-09-06T16:34:10+02:00").unwrap(), 1_567_780_450_000);
        assert_eq!(parse_date("d", "1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_date("d", "2024-02-29T00:00").unwrap(), 1_709_164_800_000);
        assert_eq!(parse_date("d", "1567780450202").unwrap(), 1_567_780_450_202);
        assert_eq!(parse_date("d", "1567780450").unwrap(), 1_567_780_450_000);
        let e = parse_date("due_date", "next tuesday").unwrap_err();
        assert!(e.message.contains("`due_date`: `next tuesday` is not a date"), "{}", e.message);
        assert!(parse_date("d", "2024-13-01").is_err());
        assert_eq!(parse_date("d", "2024-01-01T10:00:00+0200").unwrap(), 1_704_096_000_000);
    }

    #[test]
    fn durations_and_priorities_read_as_words() {
        assert_eq!(human_ms(4_339_892), "1 h 12 min");
        assert_eq!(human_ms(7_200_000), "2 h");
        assert_eq!(human_ms(90_000), "1 min");
        assert_eq!(human_ms(5_000), "5 s");
        let p: WirePriority =
            serde_json::from_value(json!({"id": "2", "priority": "high"})).unwrap();
        assert_eq!(p.name().as_deref(), Some("high"));
        let p: WirePriority = serde_json::from_value(json!(1)).unwrap();
        assert_eq!(p.name().as_deref(), Some("urgent"));
    }

    #[test]
    fn ids_cannot_escape_their_path_segment() {
        assert!(check_id("task_id", "86cv5pkvr").is_ok());
        assert!(check_id("task_id", "DEV-42").is_ok());
        assert!(check_id("task_id", "../team").is_err());
        assert!(check_id("list_id", "12 34").is_err());
    }
}
