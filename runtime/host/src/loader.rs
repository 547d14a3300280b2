//! Finding and loading plugin files.
//!
//! Each file is loaded on its own and every failure is kept as (file, reason): one broken plugin
//! never keeps the others from loading. Loading has two stages:
//!
//! 1. **Pre-flight** with libloading: open the file and read the `QUIVER_PLUGIN_DECLARATION`
//!    static. A file that is no library, no quiver plugin, or one built against another ABI is
//!    refused here with one line that names both versions.
//! 2. **abi_stable**: `lib_header_from_path(..).init_root_module()` checks the root module's layout
//!    recursively and stays the authority; its long layout report goes to the debug log.
//!
//! abi_stable never unloads a library, so a loaded plugin lives as long as the process.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use abi_stable::library::{lib_header_from_path, LibraryError};
use abi_stable::std_types::RStr;
use quiver_core::PluginManifest;
use quiver_plugin_abi::{
    PluginDeclaration, PluginModuleRef, ABI_VERSION, DECLARATION_MAGIC, DECLARATION_SYMBOL,
};

/// Where the plugins directory came from, for `quiver doctor` and error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginsDirSource {
    /// `--plugins`.
    Flag,
    /// `$QUIVER_PLUGINS`.
    Env,
    /// `plugins_dir` in the config.
    Config,
    /// `plugins/` beside the quiver binary.
    BesideBinary,
}

impl std::fmt::Display for PluginsDirSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginsDirSource::Flag => "--plugins",
            PluginsDirSource::Env => "$QUIVER_PLUGINS",
            PluginsDirSource::Config => "plugins_dir in the config",
            PluginsDirSource::BesideBinary => "beside the quiver binary",
        })
    }
}

/// The plugins directory: `--plugins`, `$QUIVER_PLUGINS`, config `plugins_dir`, else `plugins/`
/// beside the binary. The first one set wins.
pub fn plugins_dir(flag: Option<&Path>, config: Option<&Path>) -> (PathBuf, PluginsDirSource) {
    if let Some(dir) = flag {
        return (dir.to_owned(), PluginsDirSource::Flag);
    }
    if let Some(dir) = std::env::var_os("QUIVER_PLUGINS").filter(|v| !v.is_empty()) {
        return (PathBuf::from(dir), PluginsDirSource::Env);
    }
    if let Some(dir) = config {
        return (dir.to_owned(), PluginsDirSource::Config);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("plugins")))
        .unwrap_or_else(|| PathBuf::from("plugins"));
    (beside, PluginsDirSource::BesideBinary)
}

/// The entries of `dir` named like shared libraries (this platform's extension), sorted, so load
/// order and output are stable. Other files (READMEs, manifests) are not plugins and are
/// skipped; an entry with the extension that is not a file (a directory, a broken link) is
/// kept, so it is reported rather than silently ignored.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let suffix = std::env::consts::DLL_EXTENSION;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension() == Some(OsStr::new(suffix)))
        .collect();
    files.sort();
    Ok(files)
}

/// Why an entry named like a library is not a file that could be one: a directory, a link to
/// nothing, a loop of links. `None` for a regular file (or a link to one).
fn not_a_file(path: &Path) -> Option<String> {
    let fix = "remove it or move it out of the plugins directory";
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(meta) if meta.is_dir() => Some(format!("is a directory, not a plugin library; {fix}")),
        Ok(_) => Some(format!("is not a regular file; {fix}")),
        Err(e) => {
            let link = std::fs::read_link(path).ok();
            Some(match (link, e.kind()) {
                (Some(target), std::io::ErrorKind::NotFound) => {
                    format!("is a link to {}, which does not exist; {fix}", target.display())
                }
                (Some(_), _) => format!("is a link that cannot be followed ({e}, a loop?); {fix}"),
                (None, _) => format!("cannot be read ({e}); {fix}"),
            })
        }
    }
}

/// A plugin file whose root module loaded.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The file.
    pub path: PathBuf,
    /// What the plugin says about itself.
    pub manifest: PluginManifest,
    /// Its root module, to create provider instances from.
    pub module: PluginModuleRef,
}

/// A plugin file that did not load, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadFailure {
    /// The file.
    pub path: PathBuf,
    /// Why, in one line, with a fix where there is one.
    pub reason: String,
}

/// What the pre-flight read from a plugin's declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The ABI version it was built against.
    pub abi_version: String,
    /// The SDK version it was built with.
    pub sdk_version: String,
    /// The provider's name.
    pub provider_name: String,
    /// The provider's version.
    pub provider_version: String,
}

/// Loads one file: pre-flight, then abi_stable, then the manifest.
pub fn load(path: &Path) -> Result<LoadedPlugin, LoadFailure> {
    let fail = |reason: String| LoadFailure { path: path.to_owned(), reason };
    let declaration = preflight(path).map_err(fail)?;
    let module = lib_header_from_path(path)
        .and_then(|header| header.init_root_module::<PluginModuleRef>())
        .map_err(|e| fail(explain_library_error(&declaration, &e)))?;
    let manifest_json = match std::panic::catch_unwind(|| (module.manifest())()) {
        Ok(result) => result.into_result().map_err(|e| fail(format!("manifest failed: {e}")))?,
        Err(_) => return Err(fail("the plugin's root module has no manifest function".into())),
    };
    let manifest: PluginManifest = serde_json::from_str(manifest_json.as_str()).map_err(|e| {
        fail(format!(
            "the manifest of provider `{}` is unreadable ({e}); rebuild it with quiver-plugin-sdk {}",
            declaration.provider_name,
            env!("CARGO_PKG_VERSION")
        ))
    })?;
    if manifest.name != declaration.provider_name {
        return Err(fail(format!(
            "the plugin declares provider `{}` but its manifest says `{}`",
            declaration.provider_name, manifest.name
        )));
    }
    Ok(LoadedPlugin { path: path.to_owned(), manifest, module })
}

/// Opens `path` and reads its declaration; refuses anything that is not a compatible plugin.
pub fn preflight(path: &Path) -> Result<Declaration, String> {
    check_complete(path)?;
    // SAFETY: opening a library runs its initialisers. Loading plugins is what quiver is asked to
    // do with the files in its plugins directory; nothing else is opened.
    #[allow(unsafe_code)]
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("not a loadable shared library ({e}); is the file complete and built for this platform?"))?;
    // SAFETY: the symbol, when present, is the SDK's `PluginDeclaration` static: a frozen
    // `#[repr(C)]` layout of a u64 and `RStr<'static>`s pointing into the library, which stays
    // open while we read it. The magic is checked before any string is read.
    #[allow(unsafe_code)]
    let declaration = unsafe {
        let symbol = library.get::<*const PluginDeclaration>(DECLARATION_SYMBOL).map_err(|_| {
            "not a quiver plugin: it exports no QUIVER_PLUGIN_DECLARATION; build it with \
                 quiver_plugin_sdk::export_provider!"
                .to_owned()
        })?;
        let raw: *const PluginDeclaration = *symbol;
        if raw.is_null() || std::ptr::read_unaligned(raw as *const u64) != DECLARATION_MAGIC {
            return Err("not a quiver plugin: its QUIVER_PLUGIN_DECLARATION has the wrong magic \
                        number"
                .to_owned());
        }
        let d = &*raw;
        let text = |s: RStr<'static>| s.as_str().to_owned();
        Declaration {
            abi_version: text(d.abi_version),
            sdk_version: text(d.sdk_version),
            provider_name: text(d.provider_name),
            provider_version: text(d.provider_version),
        }
    };
    if !abi_compatible(&declaration.abi_version, ABI_VERSION) {
        return Err(format!(
            "provider `{}` was built against quiver-plugin-abi {}; this host needs {} — rebuild \
             it with quiver-plugin-sdk {}",
            declaration.provider_name,
            short_version(&declaration.abi_version),
            short_version(ABI_VERSION),
            short_version(env!("CARGO_PKG_VERSION")),
        ));
    }
    // Keep our handle until abi_stable has opened its own, so the library is not unloaded and
    // reloaded in between; abi_stable then keeps it loaded for good.
    std::mem::forget(library);
    Ok(declaration)
}

/// Refuses a library whose loadable segments reach past the end of the file. `dlopen` maps such
/// a file anyway, and the first touch of a missing page kills the process with SIGBUS, which no
/// error handling can catch; a half-copied or half-downloaded plugin must be a reason, not a crash.
fn check_complete(path: &Path) -> Result<(), String> {
    use object::{Object, ObjectSegment};
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open the file ({e})"))?;
    let len = file.metadata().map_err(|e| format!("cannot read the file ({e})"))?.len();
    let cache = object::ReadCache::new(file);
    let parsed = object::File::parse(&cache).map_err(|e| {
        format!("not a loadable shared library ({e}); is the file complete and built for this platform?")
    })?;
    for segment in parsed.segments() {
        let (offset, size) = segment.file_range();
        if offset.saturating_add(size) > len {
            return Err(format!(
                "the library is truncated: a segment ends at byte {} but the file has {len} \
                 bytes; copy or download the plugin again",
                offset + size
            ));
        }
    }
    Ok(())
}

/// Cargo's rule: same major from 1.0 on, same minor before it.
fn abi_compatible(plugin: &str, host: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split(['.', '-', '+']);
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    match (parse(plugin), parse(host)) {
        (Some((0, a)), Some((0, b))) => a == b,
        (Some((a, _)), Some((b, _))) => a == b,
        _ => false,
    }
}

/// `0.4.2` → `0.4` (the part that decides compatibility).
fn short_version(v: &str) -> String {
    v.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// One line for the user; abi_stable's multi-kilobyte layout report goes to the debug log.
fn explain_library_error(declaration: &Declaration, error: &LibraryError) -> String {
    let full = error.to_string();
    tracing::debug!(provider = %declaration.provider_name, "abi_stable refused the plugin:\n{full}");
    let rebuild = format!("rebuild it with quiver-plugin-sdk {}", env!("CARGO_PKG_VERSION"));
    match error {
        LibraryError::AbiInstability(_) => format!(
            "provider `{}`'s root module does not have this host's layout (abi_stable layout \
             check failed; run with RUST_LOG=debug for the report) — {rebuild}",
            declaration.provider_name
        ),
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => {
            format!(
                "provider `{}` was built against quiver-plugin-abi {actual_version}; this host \
                 needs {expected_version} — {rebuild}",
                declaration.provider_name
            )
        }
        LibraryError::RootModule { err, .. } => {
            format!(
                "provider `{}` failed to build its root module: {err}",
                declaration.provider_name
            )
        }
        _ => full.lines().next().unwrap_or("unknown abi_stable error").to_owned(),
    }
}

/// Loads every plugin file in `dir`; a missing directory is one failure, not a crash.
pub fn load_dir(dir: &Path) -> (Vec<LoadedPlugin>, Vec<LoadFailure>) {
    let files = match plugin_files(dir) {
        Ok(files) => files,
        Err(e) => {
            return (
                Vec::new(),
                vec![LoadFailure {
                    path: dir.to_owned(),
                    reason: format!(
                        "cannot read the plugins directory ({e}); set --plugins, $QUIVER_PLUGINS \
                         or plugins_dir in quiver.toml"
                    ),
                }],
            )
        }
    };
    let mut loaded = Vec::new();
    let mut failed = Vec::new();
    for path in files {
        if let Some(reason) = not_a_file(&path) {
            tracing::warn!(path = %path.display(), "plugin not loaded: {reason}");
            failed.push(LoadFailure { path, reason });
            continue;
        }
        match load(&path) {
            Ok(plugin) => {
                tracing::debug!(path = %path.display(), provider = %plugin.manifest.name, "plugin loaded");
                loaded.push(plugin)
            }
            Err(failure) => {
                tracing::warn!(path = %path.display(), "plugin not loaded: {}", failure.reason);
                failed.push(failure)
            }
        }
    }
    (loaded, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_compatibility_follows_cargo() {
        assert!(abi_compatible("0.1.0", "0.1.3"));
        assert!(!abi_compatible("0.0.9", "0.1.0"));
        assert!(!abi_compatible("0.2.0", "0.1.0"));
        assert!(abi_compatible("1.2.0", "1.0.0"));
        assert!(!abi_compatible("2.0.0", "1.0.0"));
        assert!(!abi_compatible("garbage", "0.1.0"));
    }

    #[test]
    fn a_text_file_with_a_library_name_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("fake.{}", std::env::consts::DLL_EXTENSION));
        std::fs::write(&path, "not an ELF").unwrap();
        std::fs::write(dir.path().join("README.md"), "skipped").unwrap();
        let (loaded, failed) = load_dir(dir.path());
        assert!(loaded.is_empty());
        assert_eq!(failed.len(), 1, "README.md is not a plugin file: {failed:?}");
        assert!(failed[0].reason.starts_with("not a loadable shared library"), "{failed:?}");
    }

    #[test]
    fn a_missing_directory_is_one_failure_naming_the_fix() {
        let (loaded, failed) = load_dir(Path::new("/nonexistent/quiver/plugins"));
        assert!(loaded.is_empty());
        assert!(failed[0].reason.contains("--plugins"), "{failed:?}");
    }
}
