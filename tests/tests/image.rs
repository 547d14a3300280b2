//! The OCI image `cargo xtask image` builds (`cargo xtask test` builds one from the debug build
//! and names it in `QUIVER_TEST_IMAGE`): unpacked as a container runtime would (umoci), with the
//! image's user, command and environment, its own root file system runs `quiver doctor`, and
//! `quiver serve --http` answers a health check made from inside it and an MCP client outside.
//! Container runtimes cannot run inside these test machines, so the root file system is entered
//! with chroot.

use std::path::Path;
use std::process::{Command, Stdio};

use quiver_tests::{free_port, texts, wait_until_listening};
use serde_json::Value;

/// The test image, `LAYOUT:TAG`.
fn test_image() -> String {
    std::env::var("QUIVER_TEST_IMAGE").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
        panic!(
            "QUIVER_TEST_IMAGE is not set: run `cargo xtask test` (it builds the test image), or \
             `cargo xtask image --debug --out DIR` and set QUIVER_TEST_IMAGE=DIR/oci:VERSION"
        )
    })
}

/// The image unpacked into `dir` (`rootfs/` and the runtime's `config.json`).
fn unpack(image: &str, dir: &Path) -> Value {
    let out = Command::new("umoci")
        .args(["unpack", "--image", image])
        .arg(dir)
        .output()
        .expect("umoci (`cargo xtask test` installs it)");
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "umoci unpack (it needs root):\n{stdout}\n{stderr}");
    serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap()
}

/// A command run inside `rootfs` as the image's user, with only the image's environment.
fn inside(rootfs: &Path, config: &Value, args: &[&str]) -> Command {
    let user = &config["process"]["user"];
    let mut command = Command::new("chroot");
    command
        .arg(format!("--userspec={}:{}", user["uid"], user["gid"]))
        .arg(rootfs)
        .args(args)
        .env_clear();
    for pair in config["process"]["env"].as_array().unwrap() {
        let (key, value) = pair.as_str().unwrap().split_once('=').unwrap();
        command.env(key, value);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_doctor_and_serves_http_from_its_own_root_file_system() {
    let image = test_image();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let config = unpack(&image, &bundle);
    let rootfs = bundle.join("rootfs");

    // What the image says it is: quiver serving HTTP, as a user that is not root.
    let args: Vec<&str> =
        config["process"]["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(args, ["/usr/local/bin/quiver", "serve", "--http", "0.0.0.0:8080"]);
    assert_eq!(config["process"]["user"]["uid"], 10001, "{}", config["process"]);
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains("quiver:x:10001:10001:"), "{passwd}");

    // doctor, from the image's own files: every plugin it ships loads.
    let out = inside(&rootfs, &config, &["/usr/local/bin/quiver", "doctor"]).output().unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(
        stdout.contains("plugins directory: /usr/local/lib/quiver/plugins"),
        "{stdout}\n{stderr}"
    );
    for provider in ["github", "gitlab", "clickup", "fireflies"] {
        let ready = format!("provider {provider}: ready");
        assert!(stdout.contains(&ready), "{provider}:\n{stdout}\n{stderr}");
    }
    // Jira has no public instance to default to: its plugin loaded, and says what to set.
    assert!(stdout.contains("provider jira: not configured"), "{stdout}\n{stderr}");
    assert!(stdout.contains("enrichment store: /var/lib/quiver/enrichments (ok)"), "{stdout}");

    // serve --http, as the image runs it but on a loopback port; a health check from inside.
    let port = free_port();
    let mut server = inside(
        &rootfs,
        &config,
        &["/usr/local/bin/quiver", "serve", "--http", &format!("127.0.0.1:{port}")],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_until_listening(port, "quiver serve --http in the image's root file system");
    let health = format!("http://127.0.0.1:{port}/healthz");
    let out = inside(&rootfs, &config, &["/usr/local/bin/quiver", "healthcheck", &health])
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let client =
        quiver_tests::rmcp_http_client(&format!("http://127.0.0.1:{port}/mcp"), None, true, ())
            .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "github_get_issue"), "{} tools", tools.len());
    drop(client);
    let _ = server.kill();
    let _ = server.wait();
    // A health check that finds nobody fails.
    let out = inside(&rootfs, &config, &["/usr/local/bin/quiver", "healthcheck", &health])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
