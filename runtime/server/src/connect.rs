//! The `/connect/NAME` pages a user's browser opens to sign in to a service
//! ([`quiver_runtime::accounts`]): the link from their agent sends the browser on to the
//! service with PKCE and a fresh `state`, binding it with a cookie; the service sends it back
//! to `/connect/NAME/callback`, where the code is exchanged and the account kept. Neither page
//! needs the user's key (a browser has none): the one-time link is bound to them.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use quiver_runtime::accounts::{Accounts, BROWSER_COOKIE, SIGN_IN_TTL};

/// The sign-in pages for `accounts`, the cookie `Secure` when the server is reached by HTTPS.
pub fn router<S: Clone + Send + Sync + 'static>(
    accounts: Arc<Accounts>,
    secure: bool,
) -> axum::Router<S> {
    let (starting, returning) = (Arc::clone(&accounts), accounts);
    axum::Router::new()
        .route(
            "/connect/{provider}",
            axum::routing::get(move |provider, query| {
                start(Arc::clone(&starting), secure, provider, query)
            }),
        )
        .route(
            "/connect/{provider}/callback",
            axum::routing::get(move |provider, query, headers| {
                callback(Arc::clone(&returning), provider, query, headers)
            }),
        )
}

/// `GET /connect/NAME?ticket=…`: on to the service's authorization page.
pub(crate) async fn start(
    accounts: Arc<Accounts>,
    secure: bool,
    Path(provider): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(ticket) = query.get("ticket") else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in link incomplete",
            "The link has no ticket: open the whole link your agent gave you.",
        );
    };
    match accounts.authorize(&provider, ticket).await {
        Ok(authorization) => {
            let cookie = format!(
                "{BROWSER_COOKIE}={}; Path=/connect/{provider}; Max-Age={}; HttpOnly; \
                 SameSite=Lax{}",
                authorization.cookie,
                SIGN_IN_TTL.as_secs(),
                if secure { "; Secure" } else { "" }
            );
            let mut response = StatusCode::FOUND.into_response();
            let headers = response.headers_mut();
            if let Ok(location) = HeaderValue::from_str(&authorization.location) {
                headers.insert(header::LOCATION, location);
            }
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                headers.insert(header::SET_COOKIE, cookie);
            }
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => page(status(e.status), "Sign-in could not start", &e.message),
    }
}

/// `GET /connect/NAME/callback?code=…&state=…`: the service sent the browser back.
pub(crate) async fn callback(
    accounts: Arc<Accounts>,
    Path(provider): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(error) = query.get("error") {
        // The user said no at the service (or it refused): the pending sign-in is dropped.
        if let Some(state) = query.get("state") {
            let _ = accounts.finish(&provider, "", state, None).await;
        }
        let said = query.get("error_description").map_or(error.as_str(), String::as_str);
        return page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            &format!("{provider} did not connect your account ({said}). You can close this page."),
        );
    }
    let (Some(code), Some(state)) = (query.get("code"), query.get("state")) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            "The service's answer has no code or state.",
        );
    };
    let browser = cookie(&headers, BROWSER_COOKIE);
    match accounts.finish(&provider, code, state, browser.as_deref()).await {
        Ok((_, account)) => page(
            StatusCode::OK,
            "Connected",
            &format!(
                "Your {provider} account {account} is connected: quiver acts as it for your \
                 calls. You can close this page and go back to your agent."
            ),
        ),
        Err(e) => page(status(e.status), "Not connected", &e.message),
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The value of cookie `name`, if the request has it.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|line| {
        line.split(';').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
    })
}

/// A small page saying `text` under `title`, escaped, never cached.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>quiver: {title}</title>\
         </head><body><h1>{title}</h1><p>{}</p></body></html>",
        escape(text),
        title = escape(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others_and_text_is_escaped() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; quiver_sign_in=xyz; b=2"));
        assert_eq!(cookie(&headers, BROWSER_COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&headers, "c"), None);
        assert_eq!(escape("<script>\"x\"</script>"), "&lt;script&gt;&quot;x&quot;&lt;/script&gt;");
    }
}
