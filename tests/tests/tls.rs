//! Self-hosted services behind a private CA: the loopback fakes are put behind an HTTPS front whose
//! certificate a test CA signed (`tests/data/tls/`), and each provider is called through the real
//! `quiver` binary and plugins. Without the CA the call fails naming the fix; with `ca_file` per
//! provider, with the top-level `ca_file`, or with `SSL_CERT_FILE`, it succeeds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_tests::{plugins_dir, quiver, recorded_reply, texts};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

fn tls_data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/tls").join(file)
}

/// An HTTPS front on a loopback port that forwards every connection to `upstream` (plain HTTP),
/// presenting the test server certificate for `localhost` and `127.0.0.1`.
async fn https_front(upstream: SocketAddr) -> SocketAddr {
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls_data("server.pem"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_file(tls_data("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certificates, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to forward.
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                if let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    address
}

/// A fake answering every GET with `provider`'s recorded `file`, behind the HTTPS front.
async fn https_fake(provider: &str, file: &str) -> (MockServer, String) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(recorded_reply(200, provider, file))
        .mount(&server)
        .await;
    let front = https_front(*server.address()).await;
    (server, format!("https://localhost:{}", front.port()))
}

/// One provider's call against its fake.
struct Case {
    package: &'static str,
    tool: &'static str,
    args: Value,
    /// The provider's section, without `base_url`.
    section: &'static str,
    /// The recorded answer the fake gives.
    fixture: &'static str,
    /// Text the successful result carries.
    expect: &'static str,
}

/// Runs `quiver call` for `case` against `base`, with `top` before the sections, `extra` in the
/// provider's section and `env`; returns whether it succeeded, and stdout + stderr.
fn call(case: &Case, base: &str, top: &str, extra: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    // A relative ca_file is read from the config file's folder.
    std::fs::copy(tls_data("ca.pem"), dir.path().join("ca.pem")).unwrap();
    let config = dir.path().join("quiver.toml");
    let text = format!("{top}\n{}base_url = \"{base}\"\n{extra}", case.section);
    std::fs::write(&config, text).unwrap();
    let plugins = plugins_dir(&[case.package]);
    let args = case.args.to_string();
    let output = quiver(
        &[
            "call",
            case.tool,
            "--args",
            &args,
            "--config",
            config.to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        env,
    );
    let (stdout, stderr) = texts(&output);
    (output.status.success(), format!("{stdout}\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_through_ca_file_or_ssl_cert_file_and_named_when_missing() {
    let cases = [
        Case {
            package: "quiver-provider-gitlab",
            tool: "gitlab.get_issue",
            args: json!({"project": "group/project", "iid": 7}),
            section: "[providers.gitlab]\n",
            fixture: "issue.json",
            expect: "\"iid\"",
        },
        Case {
            package: "quiver-provider-github",
            tool: "github.get_issue",
            args: json!({"owner": "octocat", "repo": "Hello-World", "number": 1347}),
            section: "[providers.github]\n",
            fixture: "issue.json",
            expect: "Found a bug",
        },
        Case {
            package: "quiver-provider-jira",
            tool: "jira.get_issue",
            args: json!({"key": "OPS-118"}),
            section: "[providers.jira]\ndeployment = \"server\"\n",
            fixture: "issue_server.json",
            expect: "OPS-118",
        },
    ];
    let ca = tls_data("ca.pem").display().to_string();
    for case in &cases {
        let provider = case.tool.split('.').next().unwrap();
        let (_server, base) = https_fake(provider, case.fixture).await;
        let run = |top: &str, extra: &str, env: &[(&str, &str)]| {
            tokio::task::block_in_place(|| call(case, &base, top, extra, env))
        };

        // Not trusted: refused, and the message says what to set.
        let (ok, out) = run("", "", &[]);
        assert!(!ok, "{}: an unknown CA must be refused:\n{out}", case.tool);
        assert!(out.contains("ca_file") && out.contains("SSL_CERT_FILE"), "{}:\n{out}", case.tool);

        // The provider's own ca_file, relative to the config file.
        let (ok, out) = run("", "ca_file = \"ca.pem\"\n", &[]);
        assert!(
            ok && out.contains(case.expect),
            "{}: ca_file under the provider:\n{out}",
            case.tool
        );

        // The top-level ca_file, for every provider that sets none.
        let (ok, out) = run("ca_file = \"ca.pem\"", "", &[]);
        assert!(ok && out.contains(case.expect), "{}: top-level ca_file:\n{out}", case.tool);

        // The system store, as SSL_CERT_FILE replaces it.
        let (ok, out) = run("", "", &[("SSL_CERT_FILE", ca.as_str())]);
        assert!(ok && out.contains(case.expect), "{}: SSL_CERT_FILE:\n{out}", case.tool);
    }
}

#[test]
fn a_ca_file_that_cannot_be_read_is_a_start_up_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(&config, "[providers.gitlab]\nca_file = \"missing-ca.pem\"\n").unwrap();
    let plugins = plugins_dir(&["quiver-provider-gitlab"]);
    let output = quiver(
        &[
            "plugins",
            "--config",
            config.to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[],
    );
    let (stdout, stderr) = texts(&output);
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("ca_file") && all.contains("missing-ca.pem"), "{all}");
}
