//! `cargo xtask new-provider NAME [--path DIR]`: the start of a third-party provider.
//!
//! Writes a crate from the templates under `xtask/templates/provider/` (embedded, so the xtask
//! binary carries them): a cdylib provider with one example tool that needs no service, its value
//! model, in-process tests and a README. The crate is its own workspace and depends on this
//! checkout's `quiver-plugin-sdk` by absolute path, so it builds wherever it is written.
//!
//! Templates use plain `{{placeholder}}` substitution (no template engine: xtask keeps its
//! dependencies few): `{{name}}` the provider name, `{{Name}}` its CamelCase type name,
//! `{{crate_name}}` the library's Rust name, `{{lib_file}}` the built library's file name,
//! `{{token_env}}` the host's default token variable, `{{sdk_path}}` and `{{sdk_version}}` the
//! SDK to build against.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The template files: (path in the new crate, text).
const TEMPLATES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../templates/provider/Cargo.toml.tmpl")),
    ("src/lib.rs", include_str!("../templates/provider/src/lib.rs.tmpl")),
    ("tests/echo.rs", include_str!("../templates/provider/tests/echo.rs.tmpl")),
    ("README.md", include_str!("../templates/provider/README.md.tmpl")),
    (".gitignore", include_str!("../templates/provider/gitignore.tmpl")),
];

const SDK_PACKAGE: &str = "quiver-plugin-sdk";

/// Provider names longer than this would make MCP tool names (`NAME_tool`, at most 64
/// characters) too short for the tools.
const MAX_NAME_LEN: usize = 32;

/// Type names the templates use themselves: a provider whose CamelCase name is one of these
/// would not compile (`provider` → `Provider` clashes with the SDK's trait).
const RESERVED_TYPE_NAMES: &[&str] = &[
    "Self",
    "EchoArgs",
    "Provider",
    "ProviderError",
    "ToolEnricher",
    "ToolContext",
    "ToolError",
    "ToolErrorKind",
    "ToolResult",
    "ToolSpec",
    "ValueClass",
    "ValueModelLayer",
    "SideEffectClass",
    "CostModelLayer",
    "FieldGroupLayer",
    "FollowUpLink",
    "JsonSchema",
    "Deserialize",
    "Serialize",
    "Value",
    "Map",
    "Option",
    "Result",
    "Some",
    "None",
    "Ok",
    "Err",
    "String",
    "Vec",
    "Box",
];

#[derive(Debug, PartialEq)]
struct Args {
    name: String,
    path: Option<PathBuf>,
}

pub(crate) fn new_provider(args: &[String]) -> Result<()> {
    let args = parse_args(args)?;
    check_name(&args.name)?;
    let cwd = env::current_dir().context("cannot read the current directory")?;
    let dir = match args.path {
        Some(path) if path.is_absolute() => path,
        Some(path) => cwd.join(path),
        None => cwd.join(format!("quiver-provider-{}", args.name)),
    };
    check_dir(&dir)?;

    let root = crate::workspace_root();
    let meta = crate::cargo_metadata(&root)?;
    let (sdk_dir, sdk_version) = sdk(&meta)?;
    let sdk_path = sdk_dir.to_str().with_context(|| {
        format!("the SDK path `{}` is not UTF-8; move the checkout", sdk_dir.display())
    })?;
    let vars = Vars::new(&args.name, sdk_path, &sdk_version);
    let files: Vec<(&str, String)> = TEMPLATES
        .iter()
        .map(|(path, text)| Ok((*path, render(path, text, &vars)?)))
        .collect::<Result<_>>()?;

    for (path, text) in &files {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        fs::write(&file, text).with_context(|| format!("cannot write `{}`", file.display()))?;
    }
    // The checkout's lockfile pins the versions quiver itself is built and tested with (and lets
    // the first build resolve offline); cargo drops the entries the provider does not use.
    let lock = root.join("Cargo.lock");
    if lock.is_file() {
        fs::copy(&lock, dir.join("Cargo.lock"))
            .with_context(|| format!("cannot copy `{}` into the new crate", lock.display()))?;
    }

    eprintln!("{}", next_steps(&args.name, &dir, &vars.lib_file));
    Ok(())
}

/// `NAME [--path DIR]`, in any order; `--path=DIR` too.
fn parse_args(args: &[String]) -> Result<Args> {
    const USAGE: &str = "usage: cargo xtask new-provider NAME [--path DIR]";
    let mut name = None;
    let mut path = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--path" {
            let dir =
                args.next().with_context(|| format!("`--path` needs a directory; {USAGE}"))?;
            path = Some(PathBuf::from(dir));
        } else if let Some(dir) = arg.strip_prefix("--path=") {
            path = Some(PathBuf::from(dir));
        } else if arg.starts_with('-') {
            bail!("unknown argument `{arg}` for new-provider; {USAGE}");
        } else if let Some(first) = &name {
            bail!("new-provider takes one NAME, got `{first}` and `{arg}`; {USAGE}");
        } else {
            name = Some(arg.clone());
        }
    }
    let name = name.with_context(|| format!("new-provider needs a NAME, e.g. `acme`; {USAGE}"))?;
    Ok(Args { name, path })
}

/// A provider name qualifies its tools (`acme.get_widget`) and names its crate, its type and its
/// token variable, so it must suit all of them.
fn check_name(name: &str) -> Result<()> {
    let fix = "use lowercase letters, digits, `_` and `-`, starting with a letter, e.g. `acme` \
               or `acme-cloud`";
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        bail!("provider name `{name}` must be 1 to {MAX_NAME_LEN} characters long; {fix}");
    }
    if let Some(c) =
        name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(*c)))
    {
        bail!("provider name `{name}` contains `{c}`; {fix}");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        bail!("provider name `{name}` must start with a letter; {fix}");
    }
    if name.ends_with(['_', '-']) || name.contains("--") || name.contains("__") {
        bail!("provider name `{name}` has a separator at its end or two in a row; {fix}");
    }
    let camel = camel_case(name);
    if RESERVED_TYPE_NAMES.contains(&camel.as_str()) {
        bail!(
            "provider name `{name}` would name the provider type `{camel}`, which the generated \
             code already uses; pick another name"
        );
    }
    Ok(())
}

/// `acme-cloud` → `AcmeCloud`, `my_svc2` → `MySvc2`.
fn camel_case(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// Refuses a directory that holds anything: the generator never overwrites an author's files.
fn check_dir(dir: &Path) -> Result<()> {
    if dir.is_file() {
        bail!("`{}` is a file; pass a new or empty directory to --path", dir.display());
    }
    if dir.is_dir() {
        let mut entries =
            fs::read_dir(dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "refusing to write into `{}`: it is not empty; pass a new or empty directory to \
                 --path",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The SDK's directory and version, from `cargo metadata` of this checkout.
fn sdk(meta: &Value) -> Result<(PathBuf, String)> {
    let package = crate::packages(meta)
        .find(|p| p["name"] == SDK_PACKAGE)
        .with_context(|| format!("package `{SDK_PACKAGE}` is not in the workspace"))?;
    let manifest = package["manifest_path"]
        .as_str()
        .with_context(|| format!("`cargo metadata` gives no manifest_path for `{SDK_PACKAGE}`"))?;
    let dir = Path::new(manifest)
        .parent()
        .with_context(|| format!("`{manifest}` has no parent directory"))?
        .to_path_buf();
    let version = crate::package_version(meta, SDK_PACKAGE)?;
    Ok((dir, version))
}

/// The values of the placeholders.
struct Vars {
    name: String,
    camel: String,
    crate_name: String,
    lib_file: String,
    token_env: String,
    /// Escaped for a TOML basic string.
    sdk_path: String,
    sdk_version: String,
}

impl Vars {
    fn new(name: &str, sdk_path: &str, sdk_version: &str) -> Vars {
        let crate_name = format!("quiver_provider_{}", name.replace('-', "_"));
        Vars {
            name: name.to_owned(),
            camel: camel_case(name),
            lib_file: crate::cdylib_file_name(&crate_name),
            crate_name,
            // As the host derives it (quiver-runtime's `default_token_env`).
            token_env: format!("{}_TOKEN", name.to_ascii_uppercase().replace('-', "_")),
            sdk_path: sdk_path.replace('\\', "\\\\").replace('"', "\\\""),
            sdk_version: sdk_version.to_owned(),
        }
    }

    fn pairs(&self) -> [(&'static str, &str); 7] {
        [
            ("{{name}}", &self.name),
            ("{{Name}}", &self.camel),
            ("{{crate_name}}", &self.crate_name),
            ("{{lib_file}}", &self.lib_file),
            ("{{token_env}}", &self.token_env),
            ("{{sdk_path}}", &self.sdk_path),
            ("{{sdk_version}}", &self.sdk_version),
        ]
    }
}

/// `text` with every placeholder replaced; an error names a placeholder left over (a typo in a
/// template), so no file is written with one.
fn render(path: &str, text: &str, vars: &Vars) -> Result<String> {
    let mut out = text.to_owned();
    for (placeholder, value) in vars.pairs() {
        out = out.replace(placeholder, value);
    }
    if let Some(at) = out.find("{{") {
        let rest = &out[at..];
        let end = rest.find("}}").map_or(rest.len().min(40), |e| e + 2);
        bail!("template `{path}` has an unknown placeholder `{}`", &rest[..end]);
    }
    Ok(out)
}

fn next_steps(name: &str, dir: &Path, lib_file: &str) -> String {
    let shown = dir.display().to_string();
    let cd = if shown.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
        format!("'{}'", shown.replace('\'', r"'\''"))
    } else {
        shown.clone()
    };
    format!(
        "xtask: created quiver-provider-{name} in {shown}

next steps:
  cd {cd} && cargo test && cargo build --release
  mkdir -p \"$QUIVER_PLUGINS\" && cp target/release/{lib_file} \"$QUIVER_PLUGINS\"/
      (or any plugins directory: --plugins DIR, plugins_dir in quiver.toml, plugins/ beside
      the quiver binary)
  quiver plugins                  # loaded    {lib_file}: {name} 0.1.0, 1 tools
  quiver call {name}.echo --args '{{\"text\":\"hi\"}}'

then replace the example tool `echo` where src/lib.rs says FIXME."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_are_lowercase_identifiers_with_inner_separators() {
        for good in ["acme", "acme-cloud", "my_svc2", "a", "x1-y2_z3"] {
            assert!(check_name(good).is_ok(), "{good} should be accepted");
        }
        for bad in [
            "",
            "Acme",
            "acme!",
            "acme.cloud",
            "acme cloud",
            "1acme",
            "-acme",
            "_acme",
            "acme-",
            "acme__x",
            "ac--me",
            "ümlaut",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(check_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        assert!(check_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
        let err = check_name("provider").unwrap_err().to_string();
        assert!(err.contains("`Provider`"), "{err}");
        assert!(check_name("value").is_err() && check_name("echo-args").is_err());
    }

    #[test]
    fn camel_case_capitalises_each_part() {
        assert_eq!(camel_case("acme"), "Acme");
        assert_eq!(camel_case("acme-cloud"), "AcmeCloud");
        assert_eq!(camel_case("my_svc2"), "MySvc2");
        assert_eq!(camel_case("x1-y2_z3"), "X1Y2Z3");
    }

    #[test]
    fn args_take_a_name_and_an_optional_path() {
        let parse = |a: &[&str]| parse_args(&strings(a));
        let args = |name: &str, path: Option<&str>| Args {
            name: name.into(),
            path: path.map(PathBuf::from),
        };
        assert_eq!(parse(&["acme"]).unwrap(), args("acme", None));
        assert_eq!(parse(&["acme", "--path", "d"]).unwrap(), args("acme", Some("d")));
        assert_eq!(parse(&["--path=d", "acme"]).unwrap(), args("acme", Some("d")));
        assert!(parse(&[]).is_err());
        assert!(parse(&["acme", "--path"]).is_err());
        assert!(parse(&["acme", "other"]).is_err());
        assert!(parse(&["acme", "--force"]).is_err());
    }

    #[test]
    fn vars_follow_the_name() {
        let vars = Vars::new("acme-cloud", r#"C:\q "x"\sdk"#, "0.1.0");
        assert_eq!(vars.camel, "AcmeCloud");
        assert_eq!(vars.crate_name, "quiver_provider_acme_cloud");
        assert_eq!(vars.token_env, "ACME_CLOUD_TOKEN");
        assert_eq!(vars.sdk_path, r#"C:\\q \"x\"\\sdk"#);
        assert!(vars.lib_file.contains("quiver_provider_acme_cloud"));
    }

    #[test]
    fn every_template_renders_without_leftover_placeholders() {
        let vars = Vars::new("acme-cloud", "/checkout/plugin-sdk/sdk", "0.1.0");
        for (path, text) in TEMPLATES {
            let out = render(path, text, &vars).unwrap();
            assert!(!out.contains("{{") && !out.contains("}}"), "{path}: {out}");
            assert!(!out.contains("acme_cloud.echo"), "{path}: tools are qualified by the name");
        }
        let file = |p: &str| TEMPLATES.iter().find(|(path, _)| *path == p).unwrap().1;
        let manifest = render("Cargo.toml", file("Cargo.toml"), &vars).unwrap();
        assert!(manifest.contains("name = \"quiver-provider-acme-cloud\""), "{manifest}");
        assert!(manifest.contains("path = \"/checkout/plugin-sdk/sdk\""), "{manifest}");
        assert!(manifest.contains("\n[workspace]\n"), "builds outside any workspace");
        assert!(manifest.contains("crate-type = [\"cdylib\", \"rlib\"]"), "{manifest}");
        let lib = render("src/lib.rs", file("src/lib.rs"), &vars).unwrap();
        assert!(lib.contains("pub struct AcmeCloud {"), "{lib}");
        assert!(lib.contains("const NAME: &'static str = \"acme-cloud\";"), "{lib}");
        assert!(lib.contains("export_provider!(AcmeCloud);"), "{lib}");
        assert!(lib.contains("FIXME"));
        let test = render("tests/echo.rs", file("tests/echo.rs"), &vars).unwrap();
        assert!(test.contains("use quiver_provider_acme_cloud::AcmeCloud;"), "{test}");
    }

    #[test]
    fn render_names_an_unknown_placeholder() {
        let vars = Vars::new("acme", "/sdk", "0.1.0");
        let err = render("x", "a {{nmae}} b", &vars).unwrap_err().to_string();
        assert!(err.contains("`{{nmae}}`"), "{err}");
    }

    /// The template's dependency versions are the workspace's, so a provider links the same
    /// serde, schemars and tokio as quiver's own providers.
    #[test]
    fn template_dependencies_use_the_workspace_versions() {
        let workspace = include_str!("../../Cargo.toml");
        let template = include_str!("../templates/provider/Cargo.toml.tmpl");
        let version_in = |text: &str, dep: &str| -> String {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{dep} = ")))
                .unwrap_or_else(|| panic!("no `{dep}` line"));
            let value = line.split_once(" = ").unwrap().1;
            let quoted = value.split_once("version = ").map_or(value, |(_, v)| v);
            quoted.split('"').nth(1).unwrap_or_else(|| panic!("no version in `{line}`")).to_owned()
        };
        for dep in ["serde", "serde_json", "schemars", "tokio"] {
            assert_eq!(version_in(template, dep), version_in(workspace, dep), "{dep}");
        }
    }

    #[test]
    fn a_non_empty_directory_is_refused() {
        let dir = env::temp_dir().join(format!("xtask-new-provider-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert!(check_dir(&dir).is_ok(), "a missing directory is fine");
        fs::create_dir_all(&dir).unwrap();
        assert!(check_dir(&dir).is_ok(), "an empty directory is fine");
        fs::write(dir.join("keep.txt"), "mine").unwrap();
        let err = check_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
        assert!(check_dir(&dir.join("keep.txt")).is_err(), "a file is refused");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn next_steps_name_the_library_and_the_tool() {
        let text = next_steps("acme", Path::new("/tmp/my dir/acme"), "libquiver_provider_acme.so");
        assert!(text.contains("cd '/tmp/my dir/acme' && cargo test && cargo build --release"));
        assert!(text.contains("cp target/release/libquiver_provider_acme.so"));
        assert!(text.contains(r#"quiver call acme.echo --args '{"text":"hi"}'"#), "{text}");
    }
}
