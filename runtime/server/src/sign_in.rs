//! Signing a user in to a service on first use. A call of a provider with a
//! `[providers.NAME.oauth]` app (or of an upstream with `auth = "oauth"`), by an HTTP user with
//! neither their own `tokens` entry for it nor a connected account, asks them to open a one-time
//! link to `/connect/NAME`:
//!
//! - **2025-11-25**, client declaring URL elicitation: `elicitation/create` in `url` mode while
//!   the call waits (up to `[accounts] sign_in_wait_s`); once the account is connected the
//!   client gets `notifications/elicitation/complete` and the call goes on.
//! - **2026-07-28**, same client: an `InputRequiredResult` holding the URL request; the client
//!   opens it and sends the call again, which goes on once the account is there.
//! - `[accounts] sign_in = "error"`: the spec's URL-elicitation-required error (-32042) instead,
//!   for clients that handle it (they open the link and retry).
//! - **A client that cannot open links**: the call's answer is an error naming the link, for
//!   the model to pass on.
//!
//! A connected account's token (refreshed when near expiry) is what the call, and the
//! pre-fetches it starts, act with ([`quiver_runtime::session::acting_as`]); the operator's own
//! `tokens` entry for a user wins over signing in.

use rmcp::model::{
    CustomNotification, ElicitRequestParams, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, ServerNotification,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use quiver_runtime::accounts::{AccountToken, Accounts, SignInLink};

use crate::server::Answers;

/// The key of the sign-in request in a multi round-trip call.
const ANSWER_KEY: &str = "sign_in";

/// The MCP error code of "URL elicitation required" (2025-11-25).
pub(crate) const URL_ELICITATION_REQUIRED: i32 = -32042;

/// What became of making sure the caller acts as themselves.
pub(crate) enum SignIn {
    /// Go on, acting as their account.
    Ready(AccountToken),
    /// Ask a 2026-07-28 client to open the link and send the call again.
    Pending(InputRequiredResult),
    /// Not run, and why (for the model: names the link where there is one).
    Refused(String),
    /// Not run: the protocol's URL-elicitation-required error.
    Error(McpError),
}

/// The account `user`'s call of `provider` acts as — `wanted`, when one of their `accounts`
/// rules chose it, else their default — asking them to sign in when it is not connected (see
/// the module docs). `binding` ties a 2026-07-28 answer to this call.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn ensure(
    accounts: &Accounts,
    user: &str,
    provider: &str,
    wanted: Option<&str>,
    binding: &str,
    answers: &Answers,
    context: &RequestContext<RoleServer>,
) -> SignIn {
    match accounts.credential(user, provider, wanted).await {
        Ok(Some(token)) => return SignIn::Ready(token),
        Ok(None) => {}
        Err(e) => {
            return SignIn::Refused(format!("your {provider} account cannot be used now: {e}"))
        }
    }
    let stateless = context.protocol_version().is_some_and(|v| !v.has_initialize());
    // A 2026-07-28 client that opened the link sends the call again with the state that names
    // it: the account may take a moment to land.
    let opened = answers
        .state
        .as_deref()
        .and_then(|state| state.strip_prefix(binding)?.strip_prefix(':'))
        .filter(|_| answers.responses.as_ref().is_some_and(|r| r.contains_key(ANSWER_KEY)));
    if let (true, Some(link_id)) = (stateless, opened) {
        return match waited(accounts, user, provider, wanted, link_id).await {
            Ok(token) => SignIn::Ready(token),
            Err(refusal) => SignIn::Refused(refusal),
        };
    }
    let link = match accounts.sign_in_link(user, provider).await {
        Ok(link) => link,
        Err(e) => {
            return SignIn::Refused(format!(
                "{provider} needs you to sign in, and the server cannot offer it: {e}"
            ))
        }
    };
    let who = wanted.map(|w| format!(" as {w}")).unwrap_or_default();
    let message = format!(
        "Sign in to {provider}{who} so quiver acts as you there: open {} (valid {} minutes).",
        link.url,
        quiver_runtime::accounts::SIGN_IN_TTL.as_secs() / 60
    );
    let can_open_links = context
        .client_capabilities()
        .is_some_and(|c| c.elicitation.as_ref().is_some_and(|e| e.url.is_some()));
    if !can_open_links {
        return SignIn::Refused(format!(
            "not run: {provider} needs the user to sign in{who} first, and this client cannot \
             open links for them. Ask them to open {} in their browser (it works once, for {} \
             minutes), then make this call again.",
            link.url,
            quiver_runtime::accounts::SIGN_IN_TTL.as_secs() / 60
        ));
    }
    if accounts.prompt_is_error() {
        return SignIn::Error(url_elicitation_required(&link, &message));
    }
    if stateless {
        let request = json!({
            "method": "elicitation/create",
            "params": {"mode": "url", "message": message, "url": link.url},
        });
        return match serde_json::from_value::<InputRequest>(request) {
            Ok(request) => SignIn::Pending(InputRequiredResult::new(
                Some(InputRequests::from([(ANSWER_KEY.to_owned(), request)])),
                Some(format!("{binding}:{}", link.id)),
            )),
            Err(e) => SignIn::Refused(format!("could not ask you to sign in to {provider}: {e}")),
        };
    }
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: link.url.clone(),
        elicitation_id: link.id.clone(),
    };
    match context.peer.create_elicitation(params).await {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            match waited(accounts, user, provider, wanted, &link.id).await {
                Ok(token) => {
                    let done = CustomNotification::new(
                        "notifications/elicitation/complete",
                        Some(json!({"elicitationId": link.id})),
                    );
                    let _ = context
                        .peer
                        .send_notification(ServerNotification::CustomNotification(done))
                        .await;
                    SignIn::Ready(token)
                }
                Err(refusal) => SignIn::Refused(refusal),
            }
        }
        Ok(_) => SignIn::Refused(format!(
            "not run: the user chose not to sign in to {provider}. Do not retry unless they ask."
        )),
        Err(e) => SignIn::Refused(format!(
            "not run: {provider} needs the user to sign in, and the client could not ask them \
             ({e}). Ask them to open {} in their browser, then make this call again.",
            link.url
        )),
    }
}

/// The account the sign-in of link `link_id` connected, once it is there; else why the call
/// is not run.
async fn waited(
    accounts: &Accounts,
    user: &str,
    provider: &str,
    wanted: Option<&str>,
    link_id: &str,
) -> Result<AccountToken, String> {
    match accounts.wait_for(user, provider, wanted, link_id, accounts.sign_in_wait()).await {
        Ok(Some(token)) => Ok(token),
        Ok(None) => Err(format!(
            "not run: the {provider} sign-in did not finish within {} s; make the call again for \
             a new link",
            accounts.sign_in_wait().as_secs()
        )),
        Err(e) => Err(format!("your {provider} account cannot be used: {e}")),
    }
}

/// The 2025-11-25 URL-elicitation-required error for `link`.
fn url_elicitation_required(link: &SignInLink, message: &str) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode(URL_ELICITATION_REQUIRED),
        message.to_owned(),
        Some(json!({"elicitations": [{
            "mode": "url",
            "elicitationId": link.id,
            "url": link.url,
            "message": message,
        }]})),
    )
}
