//! A loopback service with its own OAuth 2 authorization server, for the sign-in tests: the
//! authorization-code flow with PKCE (S256 only), refresh with rotation, RFC 7009 revocation,
//! RFC 8414 metadata and RFC 7591 dynamic registration (public clients, PKCE alone), the
//! RFC 8707 `resource` of each request noted, and a GitHub-shaped API (`/user`, one issue) that
//! accepts only the access tokens it issued,
//! unexpired and unrevoked. Whoever "signs in" at `/authorize` is [`OAuthService::sign_in_as`]
//! (no login page: the browser is a test).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde_json::{json, Value};

/// The OAuth app quiver is configured with.
pub const CLIENT_ID: &str = "quiver-test-app";
/// Its secret (given to quiver through a variable).
pub const CLIENT_SECRET: &str = "app-secret-0c2f8d4e9a1b7c3d";

/// The running service.
pub struct OAuthService {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Issued>,
}

#[derive(Default)]
struct Issued {
    login: Mutex<String>,
    /// Seconds the first access token of a sign-in lives, and those of a refresh.
    first_expires_in: AtomicU64,
    refreshed_expires_in: AtomicU64,
    codes: Mutex<HashMap<String, Code>>,
    access: Mutex<HashMap<String, (String, Instant)>>,
    refresh: Mutex<HashMap<String, String>>,
    refreshes: AtomicU64,
    revoked: AtomicU64,
    counter: AtomicU64,
    /// Clients registered dynamically: id → redirect URI.
    dynamic: Mutex<HashMap<String, String>>,
    /// The `resource` of every authorization and token request that named one.
    resources: Mutex<Vec<String>>,
    /// The account each API request acted as, and the owner it read, in order.
    api_calls: Mutex<Vec<(String, String)>>,
}

struct Code {
    login: String,
    challenge: String,
    redirect_uri: String,
    resource: Option<String>,
}

impl OAuthService {
    /// Starts it; sign-ins are for `login` until told otherwise, tokens live an hour.
    pub async fn start(login: &str) -> Self {
        let state = Arc::new(Issued::default());
        *state.login.lock().unwrap() = login.to_owned();
        state.first_expires_in.store(3600, Ordering::SeqCst);
        state.refreshed_expires_in.store(3600, Ordering::SeqCst);
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/revoke", post(revoke))
            .route("/user", get(user))
            .route("/repos/{owner}/{repo}/issues/{number}", get(issue))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, state }
    }

    /// The next sign-ins are for `login`.
    pub fn sign_in_as(&self, login: &str) {
        *self.state.login.lock().unwrap() = login.to_owned();
    }

    /// Access tokens of the next sign-ins live `first` seconds, refreshed ones `refreshed`.
    pub fn tokens_live(&self, first: u64, refreshed: u64) {
        self.state.first_expires_in.store(first, Ordering::SeqCst);
        self.state.refreshed_expires_in.store(refreshed, Ordering::SeqCst);
    }

    /// Clients registered dynamically so far.
    pub fn registrations(&self) -> usize {
        self.state.dynamic.lock().unwrap().len()
    }

    /// The `resource` of every request that named one, in order.
    pub fn resources(&self) -> Vec<String> {
        self.state.resources.lock().unwrap().clone()
    }

    /// Refreshes granted so far.
    pub fn refreshes(&self) -> u64 {
        self.state.refreshes.load(Ordering::SeqCst)
    }

    /// Tokens revoked through `/revoke` so far.
    pub fn revocations(&self) -> u64 {
        self.state.revoked.load(Ordering::SeqCst)
    }

    /// Forgets every grant (what a user revoking the app at the service does): refresh tokens
    /// answer `invalid_grant`, access tokens 401.
    pub fn revoke_everything(&self) {
        self.state.refresh.lock().unwrap().clear();
        self.state.access.lock().unwrap().clear();
    }

    /// Every token the service issued so far (access and refresh), for leak checks.
    pub fn issued_tokens(&self) -> Vec<String> {
        let n = self.state.counter.load(Ordering::SeqCst);
        (1..=n).flat_map(|i| [access_token(i), refresh_token(i)]).collect()
    }

    /// The account each API request acted as, in order.
    pub fn api_logins(&self) -> Vec<String> {
        self.state.api_calls.lock().unwrap().iter().map(|(login, _)| login.clone()).collect()
    }

    /// (account, owner read) of each API request, in order.
    pub fn api_calls(&self) -> Vec<(String, String)> {
        self.state.api_calls.lock().unwrap().clone()
    }
}

fn access_token(i: u64) -> String {
    format!("gho_fakeAccess{i:04}x7Qm2Zr9Lk4Vb8Ns1Pd6Tf3Wc5Hy0Jg")
}

fn refresh_token(i: u64) -> String {
    format!("ghr_fakeRefresh{i:04}a8Kd3Mn6Qp1Rs4Tv7Wx0Yz2Bc5Df9Gh")
}

fn s256(verifier: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

async fn metadata(State(state): State<Arc<Issued>>, headers: HeaderMap) -> Response {
    let _ = state;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let base = format!("http://{host}");
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "revocation_endpoint": format!("{base}/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
    }))
    .into_response()
}

async fn register(State(state): State<Arc<Issued>>, Json(request): Json<Value>) -> Response {
    let redirect = request["redirect_uris"][0].as_str().unwrap_or_default().to_owned();
    if redirect.is_empty() || request["token_endpoint_auth_method"] != "none" {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_client_metadata"})))
            .into_response();
    }
    let mut dynamic = state.dynamic.lock().unwrap();
    let id = format!("dyn-{}", dynamic.len() + 1);
    dynamic.insert(id.clone(), redirect.clone());
    (
        StatusCode::CREATED,
        Json(json!({"client_id": id, "redirect_uris": [redirect], "token_endpoint_auth_method": "none"})),
    )
        .into_response()
}

/// Whether `client_id` (with `secret`, for the app) may use `redirect_uri` (any, for the app).
fn known_client(
    state: &Issued,
    client_id: &str,
    secret: Option<&str>,
    redirect: Option<&str>,
) -> bool {
    if client_id == CLIENT_ID {
        return secret.is_none_or(|s| s == CLIENT_SECRET);
    }
    let dynamic = state.dynamic.lock().unwrap();
    dynamic.get(client_id).is_some_and(|registered| redirect.is_none_or(|r| r == registered))
}

async fn authorize(
    State(state): State<Arc<Issued>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    if let Some(resource) = q.get("resource") {
        state.resources.lock().unwrap().push(resource.clone());
    }
    if !known_client(&state, &get("client_id"), None, Some(&get("redirect_uri")))
        || get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").is_empty()
        || get("state").is_empty()
        || get("redirect_uri").is_empty()
    {
        return (StatusCode::BAD_REQUEST, format!("bad authorization request: {q:?}"))
            .into_response();
    }
    let n = state.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let code = format!("code{n}");
    let login = state.login.lock().unwrap().clone();
    let redirect_uri = get("redirect_uri");
    state.codes.lock().unwrap().insert(
        code.clone(),
        Code {
            login,
            challenge: get("code_challenge"),
            redirect_uri: redirect_uri.clone(),
            resource: q.get("resource").cloned(),
        },
    );
    let mut location = url::Url::parse(&redirect_uri).unwrap();
    location.query_pairs_mut().append_pair("code", &code).append_pair("state", &get("state"));
    (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
}

fn invalid_grant(why: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant", "error_description": why})))
        .into_response()
}

fn issue_tokens(state: &Issued, login: &str, expires_in: u64) -> Response {
    let n = state.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let (access, refresh) = (access_token(n), refresh_token(n));
    let until = Instant::now() + Duration::from_secs(expires_in);
    state.access.lock().unwrap().insert(access.clone(), (login.to_owned(), until));
    state.refresh.lock().unwrap().insert(refresh.clone(), login.to_owned());
    Json(json!({
        "access_token": access,
        "token_type": "bearer",
        "expires_in": expires_in,
        "refresh_token": refresh,
        "scope": "repo read:org",
    }))
    .into_response()
}

async fn token(
    State(state): State<Arc<Issued>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    if let Some(resource) = form.get("resource") {
        state.resources.lock().unwrap().push(resource.clone());
    }
    let secret = if get("client_id") == CLIENT_ID { Some(get("client_secret")) } else { None };
    if !known_client(
        &state,
        &get("client_id"),
        Some(secret.as_deref().unwrap_or_default()).filter(|_| secret.is_some()),
        None,
    ) {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"})))
            .into_response();
    }
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = state.codes.lock().unwrap().remove(&get("code")) else {
                return invalid_grant("unknown or used code");
            };
            if code.redirect_uri != get("redirect_uri") {
                return invalid_grant("redirect_uri differs");
            }
            if s256(&get("code_verifier")) != code.challenge {
                return invalid_grant("PKCE verifier does not match");
            }
            if code.resource.is_some() && code.resource != form.get("resource").cloned() {
                return invalid_grant("resource differs from the authorization request's");
            }
            let expires_in = state.first_expires_in.load(Ordering::SeqCst);
            issue_tokens(&state, &code.login, expires_in)
        }
        "refresh_token" => {
            // Rotation: a refresh token is used once.
            let Some(login) = state.refresh.lock().unwrap().remove(&get("refresh_token")) else {
                return invalid_grant("unknown, used or revoked refresh token");
            };
            state.refreshes.fetch_add(1, Ordering::SeqCst);
            let expires_in = state.refreshed_expires_in.load(Ordering::SeqCst);
            issue_tokens(&state, &login, expires_in)
        }
        other => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unsupported_grant_type", "error_description": other})),
        )
            .into_response(),
    }
}

async fn revoke(
    State(state): State<Arc<Issued>>,
    Form(form): Form<HashMap<String, String>>,
) -> StatusCode {
    let token = form.get("token").cloned().unwrap_or_default();
    let known = state.refresh.lock().unwrap().remove(&token).is_some()
        | state.access.lock().unwrap().remove(&token).is_some();
    if known {
        state.revoked.fetch_add(1, Ordering::SeqCst);
    }
    StatusCode::OK
}

/// The login of a valid bearer token, else the 401 GitHub answers.
fn bearer(state: &Issued, headers: &HeaderMap) -> Result<String, Box<Response>> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("token ")))
        .unwrap_or_default()
        .to_owned();
    let access = state.access.lock().unwrap();
    match access.get(&token) {
        Some((login, until)) if *until > Instant::now() => Ok(login.clone()),
        _ => Err(Box::new((
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})),
        )
            .into_response())),
    }
}

async fn user(State(state): State<Arc<Issued>>, headers: HeaderMap) -> Response {
    match bearer(&state, &headers) {
        Ok(login) => Json(json!({"login": login, "id": 1, "type": "User"})).into_response(),
        Err(refused) => *refused,
    }
}

async fn issue(
    State(state): State<Arc<Issued>>,
    axum::extract::Path((owner, _repo, _number)): axum::extract::Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    match bearer(&state, &headers) {
        Ok(login) => {
            state.api_calls.lock().unwrap().push((login, owner));
            let body: Value =
                serde_json::from_str(&crate::recorded("github", "issue.json")).unwrap();
            Json(body).into_response()
        }
        Err(refused) => *refused,
    }
}
