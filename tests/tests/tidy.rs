//! House rules checked as ordinary tests, so `cargo xtask test` is the gate.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != "dist" && !name.to_string_lossy().starts_with('.') {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root(), &mut files);
    assert!(files.len() > 20, "found only {} .rs files", files.len());
    files
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let offenders: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().trim_start().starts_with("//!"))
        .collect();
    assert!(offenders.is_empty(), "files without a leading `//!` doc: {offenders:#?}");
}

#[test]
fn no_test_is_ignored_or_expected_to_panic() {
    // Spelled in two pieces so this file does not match itself.
    let banned = [concat!("#[", "ignore"), concat!("#[", "should_panic")];
    let offenders: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            banned.iter().any(|b| text.contains(b))
        })
        .collect();
    assert!(offenders.is_empty(), "ignored or should_panic tests hide failures: {offenders:#?}");
}

/// The dependency names in a manifest's `[dependencies]` table (comments are not dependencies).
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let Some(table) = text.split("\n[dependencies]\n").nth(1) else { return Vec::new() };
    table
        .lines()
        .take_while(|l| !l.starts_with('['))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['=', '.', ' ']).next().map(str::to_owned))
        .collect()
}

#[test]
fn core_depends_on_no_io_and_no_workspace_crate() {
    let deps = dependencies(&workspace_root().join("core/Cargo.toml"));
    assert!(deps.contains(&"serde".to_owned()), "{deps:?}");
    let forbidden = ["quiver-", "tokio", "reqwest", "octocrab", "abi_stable", "libloading", "sled"];
    for dep in &deps {
        assert!(!forbidden.iter().any(|f| dep.starts_with(f)), "core must stay pure: {dep}");
    }
}

#[test]
fn providers_never_depend_on_the_runtime() {
    for entry in std::fs::read_dir(workspace_root().join("providers")).unwrap().flatten() {
        let deps = dependencies(&entry.path().join("Cargo.toml"));
        let name = entry.path().display().to_string();
        assert!(deps.contains(&"quiver-plugin-sdk".to_owned()), "{name}: {deps:?}");
        assert!(!deps.contains(&"quiver-runtime".to_owned()), "{name} depends on quiver-runtime");
    }
}

#[test]
fn the_host_library_compiles_neither_the_server_nor_the_command_line() {
    let root = workspace_root();
    let host = dependencies(&root.join("runtime/host/Cargo.toml"));
    for dep in ["clap", "quiver-server", "quiver-cli", "toml_edit"] {
        assert!(!host.contains(&dep.to_owned()), "quiver-runtime must not depend on {dep}");
    }
    let server = dependencies(&root.join("runtime/server/Cargo.toml"));
    assert!(server.contains(&"quiver-runtime".to_owned()), "{server:?}");
    for dep in ["clap", "quiver-cli", "abi_stable", "quiver-plugin-abi", "libloading"] {
        assert!(!server.contains(&dep.to_owned()), "quiver-server must not depend on {dep}");
    }
    // Only the binary parses flags.
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let manifest = entry.path().join("Cargo.toml");
        if manifest.is_file() && !entry.path().ends_with("xtask") {
            assert!(
                !dependencies(&manifest).contains(&"clap".to_owned()),
                "{manifest:?} uses clap"
            );
        }
    }
}

#[test]
fn readme_names_the_two_commands_and_ci_runs_the_test_one() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first_screen: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    assert!(
        first_screen.contains("cargo xtask bundle"),
        "README's first screen lacks the main command"
    );
    assert!(
        first_screen.contains("cargo xtask test"),
        "README's first screen lacks the test command"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(ci.contains("cargo xtask test"), ".ci/run must run the README's test command");
}
