//! The third-party path as an author walks it: `cargo xtask new-provider`, `cargo test` and
//! `cargo build` in the generated crate (outside the workspace, against this checkout's SDK), the
//! library dropped into a plugins directory, and the real `quiver` binary loading and calling it.
//!
//! The generated crate builds into `<target>/third-party`, shared by every run: its dependencies
//! compile once (the first run takes a while), later runs rebuild only the generated crate.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use quiver_tests::{quiver, target_dir, texts};

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_owned()
}

/// Fails the test with the command's output unless it succeeded.
fn check(what: &str, output: &Output) {
    let (stdout, stderr) = texts(output);
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{stderr}", output.status);
}

/// Runs `cargo ARGS` in the generated crate, offline when the local registry cache has every
/// crate (it normally has: they are the workspace's), else online. Returns whether offline
/// worked, so the next command need not try again.
fn cargo_in(crate_dir: &Path, target: &Path, args: &[&str], offline: bool) -> (Output, bool) {
    let run = |offline: bool| {
        let mut command = cargo();
        command.args(args).current_dir(crate_dir).env("CARGO_TARGET_DIR", target);
        if offline {
            command.arg("--offline");
        }
        command.output().expect("run cargo")
    };
    if offline {
        let output = run(true);
        if output.status.success() || !texts(&output).1.contains("offline") {
            return (output, true);
        }
        eprintln!("third_party: `cargo {}` offline failed, retrying online", args.join(" "));
    }
    (run(false), false)
}

#[test]
fn a_generated_provider_builds_loads_and_answers() {
    let started = Instant::now();
    let work = tempfile::tempdir().expect("temp dir");
    let crate_dir = work.path().join("acme");

    // `cargo xtask new-provider`, spelt out: the alias lives in the workspace's .cargo/config.toml.
    let generate = || {
        cargo()
            .args(["run", "--quiet", "--package", "xtask", "--", "new-provider", "acme", "--path"])
            .arg(&crate_dir)
            .current_dir(workspace_root())
            .output()
            .expect("run cargo xtask")
    };
    let output = generate();
    check("cargo xtask new-provider", &output);
    let (_, stderr) = texts(&output);
    assert!(stderr.contains("cargo test && cargo build --release"), "{stderr}");
    for file in ["Cargo.toml", "src/lib.rs", "tests/echo.rs", "README.md"] {
        assert!(crate_dir.join(file).is_file(), "{file} was not generated");
    }
    let output = generate();
    assert!(!output.status.success(), "a second run must not overwrite the crate");
    assert!(texts(&output).1.contains("not empty"), "{}", texts(&output).1);
    let generated = started.elapsed();

    // The author's two commands, debug, into the shared target directory.
    let target = target_dir().parent().expect("target/<profile>").join("third-party");
    let (output, offline) = cargo_in(&crate_dir, &target, &["test"], true);
    check("cargo test in the generated crate", &output);
    let (stdout, _) = texts(&output);
    assert!(stdout.contains("echo_returns_its_text_and_the_provider_name ... ok"), "{stdout}");
    let (output, _) = cargo_in(&crate_dir, &target, &["build"], offline);
    check("cargo build in the generated crate", &output);
    let built = started.elapsed();

    let file = format!(
        "{}quiver_provider_acme{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let plugins = tempfile::tempdir().expect("temp dir");
    std::fs::copy(target.join("debug").join(&file), plugins.path().join(&file))
        .expect("copy the built plugin");
    let dir = plugins.path().to_str().expect("utf-8 temp path");

    let out = quiver(&["plugins", "--plugins", dir], &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains(&format!("loaded    {file}: acme 0.1.0, 1 tools")), "{stdout}");

    let out = quiver(&["tools", "list", "--plugins", dir], &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("acme.echo ")).unwrap_or_else(|| {
        panic!("no acme.echo in `quiver tools list`:\n{stdout}\n{stderr}");
    });
    assert!(line.contains("pure"), "the provider's value model reaches the host: {line}");

    let out = quiver(&["call", "acme.echo", "--args", r#"{"text":"hi"}"#, "--plugins", dir], &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let result: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON result");
    assert_eq!(result, serde_json::json!({"text": "hi", "provider": "acme"}));

    eprintln!(
        "third_party: generated in {:.1?}, tested and built in {:.1?} ({}), total {:.1?}",
        generated,
        built - generated,
        if offline { "offline" } else { "online" },
        started.elapsed()
    );
}
