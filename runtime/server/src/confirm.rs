//! Confirmation a model cannot forge. A call to a tool that `[selector] confirm` names runs only
//! after a person agreed, asked through the client with MCP elicitation when the client declares
//! it can ask:
//!
//! - **2026-07-28** (no server-to-client requests): the call is answered with an
//!   `InputRequiredResult` holding an `elicitation/create` form; the client asks its user and sends
//!   the call again with the answer. The `requestState` it must echo is a hash of the tool and its
//!   arguments, so an answer given for one call confirms no other.
//! - **earlier revisions**: `elicitation/create` is sent to the client while the call waits.
//! - **clients that cannot ask**: the call must carry `"_confirm": true`, which the model writes
//!   after telling the user — the fallback, since a model can write it without asking.
//!
//! When the client can ask, a `_confirm` in the arguments counts for nothing: only the person's
//! answer does. A decline, a dismissal, or an unchecked box leaves the call unrun, with a message
//! telling the model not to retry unasked.

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::catalog::ExposedTool;
use crate::server::Answers;

/// The argument a model sets when the client cannot ask the user.
pub(crate) const CONFIRM_ARGUMENT: &str = "_confirm";

/// The key of the elicitation request in a multi round-trip call, and of the form's one field.
const ANSWER_KEY: &str = "confirm";

/// The arguments shown to the user are cut to this many bytes.
const MAX_SHOWN_ARGUMENTS: usize = 2000;

/// Whether the client declared that it can ask its user (form elicitation).
pub(crate) fn client_can_ask(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|c| c.elicitation.is_some())
}

/// What became of asking.
pub(crate) enum Answer {
    /// The user agreed: run the call.
    Confirmed,
    /// Ask the client to ask the user, and to send the call again with the answer.
    Pending(InputRequiredResult),
    /// Not run, and why (for the model).
    Refused(String),
}

/// Asks the user whether `tool` may run with `arguments`, the way the client's protocol revision
/// allows (see the module docs); `answers` carries a 2026-07-28 client's reply.
pub(crate) async fn ask(
    tool: &ExposedTool,
    arguments: &Map<String, Value>,
    reason: Option<&str>,
    answers: &Answers,
    context: &RequestContext<RoleServer>,
) -> Answer {
    let form = form(tool, arguments, reason);
    let stateless = context.protocol_version().is_some_and(|v| !v.has_initialize());
    if stateless {
        let binding = binding(tool, arguments);
        let answer = answers.responses.as_ref().and_then(|r| r.get(ANSWER_KEY));
        // An answer echoed with another call's state (or none) confirms nothing: ask afresh.
        if let (Some(answer), true) = (answer, answers.state.as_deref() == Some(&binding)) {
            return judge(tool, serde_json::from_value::<ElicitResult>(answer.clone()).ok());
        }
        let request = json!({"method": "elicitation/create", "params": form});
        return match serde_json::from_value::<InputRequest>(request) {
            Ok(request) => {
                let requests = InputRequests::from([(ANSWER_KEY.to_owned(), request)]);
                Answer::Pending(InputRequiredResult::new(Some(requests), Some(binding)))
            }
            Err(e) => Answer::Refused(format!(
                "`{}` needs the user's confirmation, which could not be asked for ({e}); not run",
                tool.mcp_name
            )),
        };
    }
    let params = match serde_json::from_value::<ElicitRequestParams>(form) {
        Ok(params) => params,
        Err(e) => {
            return Answer::Refused(format!(
                "`{}` needs the user's confirmation, which could not be asked for ({e}); not run",
                tool.mcp_name
            ))
        }
    };
    match context.peer.create_elicitation(params).await {
        Ok(result) => judge(tool, Some(result)),
        Err(e) => Answer::Refused(format!(
            "`{}` needs the user's confirmation and the client could not ask ({e}); it was not run",
            tool.mcp_name
        )),
    }
}

/// The user's answer as a decision.
fn judge(tool: &ExposedTool, result: Option<ElicitResult>) -> Answer {
    let not_run = |why: &str| {
        Answer::Refused(format!(
            "{why}: `{}` was not run. Do not call it again unless the user asks for it",
            tool.mcp_name
        ))
    };
    let Some(result) = result else {
        return not_run("the client's answer to the confirmation could not be read");
    };
    match result.action {
        ElicitationAction::Accept => {
            let agreed = result
                .content
                .as_ref()
                .and_then(|c| c.get(ANSWER_KEY))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if agreed {
                Answer::Confirmed
            } else {
                not_run("the user did not tick the confirmation")
            }
        }
        ElicitationAction::Decline => not_run("the user declined"),
        ElicitationAction::Cancel => not_run("the user dismissed the confirmation"),
        _ => not_run("the client answered the confirmation in a way this server does not know"),
    }
}

/// The form shown to the user: why quiver asks (when it is not only the config's `confirm`),
/// what will run, with which arguments, and one checkbox.
fn form(tool: &ExposedTool, arguments: &Map<String, Value>, reason: Option<&str>) -> Value {
    let effect = if tool.class.is_speculatable() { "reads" } else { "can change things" };
    let mut shown = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if shown.len() > MAX_SHOWN_ARGUMENTS {
        let mut end = MAX_SHOWN_ARGUMENTS;
        while !shown.is_char_boundary(end) {
            end -= 1;
        }
        shown.truncate(end);
        shown.push_str("\n…");
    }
    json!({
        "mode": "form",
        "message": format!(
            "{}The assistant wants to run `{}`, which {effect}: {}\n\nWith:\n{shown}",
            reason.map(|r| format!("quiver asks before this call: {r}\n\n")).unwrap_or_default(),
            tool.mcp_name,
            tool.description
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                ANSWER_KEY: {
                    "type": "boolean",
                    "title": "Run it",
                    "description": format!("Allow `{}` to run with these arguments", tool.mcp_name),
                    "default": false,
                }
            },
            "required": [ANSWER_KEY],
        },
    })
}

/// A hash of the tool and its arguments (keys sorted at every depth), which a 2026-07-28 client
/// echoes with its answer: an answer confirms exactly the call it was asked for.
pub(crate) fn binding(tool: &ExposedTool, arguments: &Map<String, Value>) -> String {
    fn canonical(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&map[k]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let mut hasher = Sha256::new();
    hasher.update(tool.qualified.as_bytes());
    hasher.update([0]);
    hasher.update(canonical(&Value::Object(arguments.clone())).to_string().as_bytes());
    format!("confirm-{}", hex::encode(&hasher.finalize()[..16]))
}
