//! Accepting connections for `serve --http`, plain or TLS: `TCP_NODELAY` on every socket, a cap on
//! open connections, a deadline for each request head, and a graceful stop.
//!
//! A client that opens a connection and sends nothing holds a file descriptor for as long as the
//! server lets it; a few hundred of them exhaust the process's descriptors and lock everyone out,
//! `/healthz` included, before any key is checked. So every connection must deliver its request
//! head — and, with TLS, finish its handshake — within `header_timeout_s`, the first one and each
//! one after an answer on a kept-alive connection (hyper's header-read timer, which runs while a
//! connection waits for a head, so an idle kept-alive connection is closed by the same rule); and
//! at most `max_connections` are open at once, a new one past it closed at once and counted. A
//! stream being answered (an SSE response) is not waiting for a head and is not cut.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// The limits on connections, from `[serve.http]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// The most connections open at once.
    pub(crate) max_connections: usize,
    /// How long a connection may take to send a request head (or finish a TLS handshake).
    pub(crate) header_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves; then accepts nothing more, lets each
/// connection finish the request it is answering for at most `drain`, and calls `close_streams`.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnectionLimits,
    drain: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    close_streams: impl FnOnce() + Send + 'static,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before accept: the cap
                // should prevent the first; either way, keep accepting after a breath.
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            crate::metrics::connection_refused();
            drop(tcp);
            continue;
        };
        // Without TCP_NODELAY, a client that keeps its connection open (the normal case) waits
        // for the kernel's delayed acknowledgement on every answer: ~40 ms a call.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on an accepted connection: {e}");
        }
        crate::metrics::connections(1.0);
        let (app, tls, stop) = (app.clone(), tls.clone(), stop_rx.clone());
        tokio::spawn(connection(tcp, app, tls, limits.header_timeout, stop, permit));
    }
    tracing::info!("stopping: in-flight requests have {} s", drain.as_secs());
    let _ = stop_tx.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(drain, permits.acquire_many(all)).await.is_err() {
        tracing::warn!("in-flight requests still running after {} s; closing", drain.as_secs());
    }
    close_streams();
}

/// One connection, served until it closes, times out, or the server stops.
async fn connection(
    tcp: TcpStream,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
    // The connection future, raced against the stop signal: on stop it finishes the request in
    // flight and closes.
    macro_rules! drive {
        ($io:expr) => {{
            let conn = builder.serve_connection($io, service).with_upgrades();
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                result = conn.as_mut() => result,
                () = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                if e.is_timeout() {
                    crate::metrics::connection_timed_out();
                } else {
                    tracing::debug!("a connection ended: {e}");
                }
            }
        }};
    }
    match tls {
        None => drive!(TokioIo::new(tcp)),
        Some(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => drive!(TokioIo::new(stream)),
                Ok(Err(e)) => tracing::debug!("a TLS handshake failed: {e}"),
                Err(_) => crate::metrics::connection_timed_out(),
            }
        }
    }
    crate::metrics::connections(-1.0);
}

/// Resolves once the server stops (never, if the sender is gone without stopping).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The default connection cap: three quarters of the descriptors the process may open, less a
/// reserve for its own files, upstreams and Redis, at most 1 024 — so a flood of connections is
/// refused before the process runs out of descriptors.
pub(crate) fn default_max_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    let usable = usize::try_from(soft.saturating_sub(64)).unwrap_or(usize::MAX);
    (usable / 4 * 3).clamp(16, 1024)
}
