//! `quiver upstreams`: the upstream tool definitions held until the operator approves them —
//! what changed (`diff`) and accepting it (`approve`). Works on the pin store alone, so it needs
//! no upstream started, and a running `quiver serve` sees an approval within a second.

use std::process::ExitCode;

use anyhow::bail;
use quiver_core::terminal::for_terminal;
use quiver_runtime::pins::PinStore;

/// `quiver upstreams …`.
#[derive(clap::Subcommand)]
pub(crate) enum UpstreamsCommand {
    /// Each upstream with pinned tools, and which of its tools are held.
    List,
    /// What each held tool of upstream NAME changed since it was approved, and what flags it.
    Diff {
        /// The upstream's name (`[[upstreams]] name`).
        name: String,
        /// Only this tool (the upstream's own name for it).
        tool: Option<String>,
    },
    /// Accept the held definition of TOOL (every held tool of NAME without it): it is served
    /// again, and pinned as it is now.
    Approve {
        /// The upstream's name (`[[upstreams]] name`).
        name: String,
        /// The upstream's own name for the tool.
        tool: Option<String>,
    },
    /// Sign quiver in to upstream NAME (`auth = "oauth"`) as the operator: prints a link to
    /// open, and waits for the sign-in on a loopback address. Its tools are then listed, and
    /// stdio callers served, as the account signed in.
    Connect {
        /// The upstream's name (`[[upstreams]] name`).
        name: String,
    },
}

/// `quiver upstreams connect NAME`: the MCP authorization flow as the operator, its callback on
/// a loopback address of this process (RFC 8252), its client registered for that address.
pub(crate) fn connect(host: &quiver_runtime::host::Host, name: &str) -> anyhow::Result<ExitCode> {
    use quiver_runtime::upstream::UpstreamAuth;
    let Some(upstream) = host.upstreams().get(name) else {
        anyhow::bail!("no [[upstreams]] named `{name}` in the config");
    };
    if upstream.config().auth != UpstreamAuth::Oauth {
        anyhow::bail!(
            "upstream `{name}` does not sign in with OAuth; set auth = \"oauth\" in its \
             [[upstreams]] entry"
        );
    }
    crate::runtime()?.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let accounts = std::sync::Arc::clone(host.accounts());
        accounts.set_public_base(&base);
        let redirect = format!("{base}/connect/{name}/callback");
        host.upstream_app(name, &redirect).await.map_err(anyhow::Error::msg)?;
        let link = accounts
            .sign_in_link(quiver_runtime::accounts::OPERATOR, name)
            .await
            .map_err(anyhow::Error::msg)?;
        println!(
            "open this link to sign quiver in to `{name}` (once, within {} minutes):\n  {}",
            quiver_runtime::accounts::SIGN_IN_TTL.as_secs() / 60,
            link.url
        );
        let pages: axum::Router =
            quiver_server::connect::router(std::sync::Arc::clone(&accounts), false);
        let serving = tokio::spawn(async move { axum::serve(listener, pages).await });
        let connected = accounts
            .wait_for(
                quiver_runtime::accounts::OPERATOR,
                name,
                None,
                &link.id,
                quiver_runtime::accounts::SIGN_IN_TTL,
            )
            .await;
        serving.abort();
        match connected {
            Ok(Some(token)) => {
                println!(
                    "connected {name} as {}; `quiver serve` lists its tools as it",
                    token.account
                );
                Ok(ExitCode::SUCCESS)
            }
            Ok(None) => anyhow::bail!("the sign-in did not finish in time; run it again"),
            Err(e) => anyhow::bail!("{e}"),
        }
    })
}

/// Runs one `quiver upstreams` command on the store at `$QUIVER_DATA_DIR/pins`.
pub(crate) fn upstreams(command: UpstreamsCommand) -> anyhow::Result<ExitCode> {
    let store = PinStore::default_store();
    match command {
        UpstreamsCommand::List => {
            let names = store.upstreams();
            if names.is_empty() {
                println!("no upstream tools pinned yet ({})", store.dir().display());
            }
            for name in names {
                let book = store.load(&name).map_err(anyhow::Error::msg)?;
                let held: Vec<&str> = book.held.keys().map(String::as_str).collect();
                println!(
                    "{name}: {} pinned, {} held{}",
                    book.pinned.len(),
                    held.len(),
                    if held.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", shown(&held.join(", ")))
                    }
                );
            }
        }
        UpstreamsCommand::Diff { name, tool } => {
            let book = known(&store, &name)?;
            if book.held.is_empty() {
                println!("nothing of upstream `{name}` is held");
            }
            for (held_tool, held) in &book.held {
                if tool.as_ref().is_some_and(|t| t != held_tool) {
                    continue;
                }
                let kind = if book.pinned.contains_key(held_tool) { "changed" } else { "new" };
                println!("held {kind} tool `{}` of `{name}`:", shown(held_tool));
                for reason in &held.reasons {
                    // The first reason of a changed tool introduces the diff printed below.
                    if !reason.starts_with("  ") && !reason.ends_with(':') {
                        println!("  flagged: {}", shown(reason));
                    }
                }
                for line in book.held_diff(held_tool).unwrap_or_default() {
                    println!("  {}", shown(&line));
                }
                println!("  approve: quiver upstreams approve {name} {}", shown(held_tool));
            }
            if let Some(tool) = tool.filter(|t| !book.held.contains_key(t)) {
                bail!(
                    "tool `{tool}` of upstream `{name}` is not held (held: {})",
                    held_names(&book)
                );
            }
        }
        UpstreamsCommand::Connect { .. } => {
            unreachable!("signing in needs the host: main runs it before this")
        }
        UpstreamsCommand::Approve { name, tool } => {
            known(&store, &name)?;
            let approved = store
                .update(&name, |book| book.approve(tool.as_deref()))
                .map_err(anyhow::Error::msg)?;
            if approved.is_empty() {
                let book = store.load(&name).map_err(anyhow::Error::msg)?;
                match tool {
                    Some(tool) => bail!(
                        "tool `{tool}` of upstream `{name}` is not held (held: {})",
                        held_names(&book)
                    ),
                    None => println!("nothing of upstream `{name}` is held"),
                }
            }
            for tool in approved {
                println!(
                    "approved `{}` of `{name}`: pinned as it is now; a running quiver serves it \
                     within a second",
                    shown(&tool)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `name`'s book, or an error naming the upstreams that have one.
fn known(store: &PinStore, name: &str) -> anyhow::Result<quiver_core::pins::PinBook> {
    let names = store.upstreams();
    if !names.iter().any(|n| n == name) {
        bail!(
            "no pinned tools of upstream `{name}` in {} (upstreams with pins: {}); is \
             QUIVER_DATA_DIR the one quiver serve uses?",
            store.dir().display(),
            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
        );
    }
    store.load(name).map_err(anyhow::Error::msg)
}

fn held_names(book: &quiver_core::pins::PinBook) -> String {
    if book.held.is_empty() {
        return "none".to_owned();
    }
    shown(&book.held.keys().cloned().collect::<Vec<_>>().join(", "))
}

/// An upstream's text, never obeyed by the terminal.
fn shown(text: &str) -> String {
    for_terminal(text, false).into_owned()
}
