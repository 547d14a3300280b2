//! What quiver costs per call as its users' clients see it, over stdio and over Streamable
//! HTTP: the official MCP Python SDK calling `server-everything`'s `echo` through quiver
//! (`tests/mcp/gateway_client.py`), 500 timed calls each after 20 warm-up calls — and through
//! mcp-proxy, a bridge that relays stdio to Streamable HTTP and does nothing else, with the same
//! client in the same run. Prints p50 and p90 latency and each gateway's CPU per call (user +
//! system of its process, from /proc), the HTTP path's CPU as a ratio of the stdio path's, and
//! quiver's HTTP p50 as a ratio of the bridge's.
//!
//! Run with `cargo xtask bench gateway_cpu` (the release binary is built first, and mcp-proxy
//! installed in a virtual environment of its own; npm must reach the registry or have
//! server-everything cached, as `cargo xtask test` leaves it); `QUIVER_GATEWAY_CALLS` changes the
//! number of timed calls.

#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn main() {
    // `cargo bench` passes a filter and flags; run only when the filter names this bench.
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"gateway_cpu".contains(filter.as_str()) {
            return;
        }
    }
    quiver_tests::require_python_sdk();
    let calls = std::env::var("QUIVER_GATEWAY_CALLS").unwrap_or_else(|_| "500".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/gateway_client.py");
    let bridge = std::env::var("QUIVER_BRIDGE_MCP_PROXY").unwrap_or_else(|_| {
        panic!(
            "QUIVER_BRIDGE_MCP_PROXY names no mcp-proxy: run `cargo xtask bench gateway_cpu`, \
             which installs it"
        )
    });
    let out = Command::new("python3")
        .arg(script)
        .arg(quiver_tests::quiver_bin())
        .arg(&calls)
        .arg(&bridge)
        .output()
        .expect("python3");
    let (stdout, stderr) = quiver_tests::texts(&out);
    assert!(out.status.success(), "the client failed:\n{stdout}\n{stderr}");
    let figures: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    for f in &figures {
        eprintln!(
            "gateway_cpu: {:9}  p50 {:.2} ms  p90 {:.2} ms  CPU {:.3} ms/call ({} calls)",
            f["transport"].as_str().unwrap_or("?"),
            f["p50_ms"].as_f64().unwrap_or(0.0),
            f["p90_ms"].as_f64().unwrap_or(0.0),
            f["cpu_ms_per_call"].as_f64().unwrap_or(0.0),
            f["calls"]
        );
    }
    let figure = |transport: &str, name: &str| {
        figures
            .iter()
            .find(|f| f["transport"] == transport)
            .and_then(|f| f[name].as_f64())
            .unwrap_or_else(|| panic!("no {transport} {name} in:\n{stdout}"))
    };
    let cpu = |transport: &str| figure(transport, "cpu_ms_per_call");
    eprintln!("gateway_cpu: HTTP CPU per call / stdio's = {:.2}×", cpu("http") / cpu("stdio"));
    eprintln!(
        "gateway_cpu: quiver over HTTP / mcp-proxy: p50 {:.2}×, CPU per call {:.2}×",
        figure("http", "p50_ms") / figure("mcp-proxy", "p50_ms"),
        cpu("http") / cpu("mcp-proxy")
    );
}
