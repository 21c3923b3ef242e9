//! The accept loop of every front end: HTTP/1.1 and HTTP/2 on one listener, a bounded table of
//! connections with idle timeouts, accept errors backed off, and a graceful shutdown with
//! a time limit.

use super::config::NetConfig;
use super::connections::{Connection, ConnectionTable};
use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Serves `app` on `listener` (HTTP/1.1 and HTTP/2 without TLS, `TCP_NODELAY`) with the
/// limits of `net` until `shutdown` resolves; then cancels `stopping` (long streams watch
/// it and end), asks every connection to close, waits at most `net.shutdown_grace` for
/// them and returns.
pub async fn serve_router(
    listener: TcpListener,
    app: Router,
    net: &NetConfig,
    stopping: CancellationToken,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let table = Arc::new(ConnectionTable::new(net.max_connections));
    let tracker = TaskTracker::new();
    let hard_stop = CancellationToken::new();
    let builder = connection_builder(net);
    let mut sweep = tokio::time::interval(Duration::from_millis(250));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut accept_errors = AcceptErrors::default();
    let mut refused: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        // No new socket while many evicted ones are still closing: the kernel's backlog
        // holds the new ones meanwhile (see `connections`).
        let accept = async {
            table.wait_for_room(MAX_CLOSING).await;
            listener.accept().await
        };
        tokio::select! {
            accepted = accept => match accepted {
                Ok((stream, _)) => {
                    accept_errors.recovered();
                    let Ok(connection) = table.admit() else {
                        refused += 1;
                        if refused.is_power_of_two() {
                            tracing::warn!(refused, "every connection is busy; refusing new connections");
                        }
                        drop(stream);
                        continue;
                    };
                    // Small frames (a 100-byte answer) go out at once, not after an ACK.
                    let _ = stream.set_nodelay(true);
                    tracker.spawn(run_connection(
                        stream,
                        builder.clone(),
                        app.clone(),
                        connection,
                        table.clone(),
                        hard_stop.clone(),
                    ));
                }
                Err(e) => {
                    let pause = accept_errors.failed(&e);
                    tokio::time::sleep(pause).await;
                }
            },
            _ = sweep.tick() => {
                table.close_idle(net.idle_timeout, net.header_read_timeout);
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    stopping.cancel();
    table.close_all();
    tracker.close();
    if tokio::time::timeout(net.shutdown_grace, tracker.wait()).await.is_err() {
        tracing::warn!(
            open = table.len(),
            grace_ms = u64::try_from(net.shutdown_grace.as_millis()).unwrap_or(u64::MAX),
            "connections still open after the grace period; closing them"
        );
        hard_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), tracker.wait()).await;
    }
    Ok(())
}

/// How many connections told to close may still hold their sockets before the accept loop
/// waits for them.
const MAX_CLOSING: usize = 8;

/// How long an idle connection told to close may take to close by itself: enough to write
/// an HTTP/2 GOAWAY, not enough for a peer that never answers it to hold the socket (an
/// attacker reconnecting at once would keep descriptors above the cap meanwhile).
const IDLE_CLOSE_LINGER: Duration = Duration::from_millis(2);

type ConnectionBuilder = hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>;

fn connection_builder(net: &NetConfig) -> ConnectionBuilder {
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    // HTTP/1.1 and HTTP/2 (Deno's client speaks HTTP/2 without TLS, with prior knowledge).
    let mut builder = ConnectionBuilder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(net.header_read_timeout);
    let streams = u32::try_from(net.max_watches_per_connection.saturating_add(128)).unwrap_or(u32::MAX);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(streams)
        // A peer that stops answering pings is gone: its streams (watches) end.
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// Serves one connection until it ends, is told to close (idle, evicted, shutdown: then it
/// finishes what is in flight), or the server stops hard.
async fn run_connection(
    stream: TcpStream,
    builder: ConnectionBuilder,
    app: Router,
    connection: Arc<Connection>,
    table: Arc<ConnectionTable>,
    hard_stop: CancellationToken,
) {
    let service = {
        let connection = connection.clone();
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            let guard = connection.begin_request();
            request.extensions_mut().insert(connection.clone());
            let answer = app.clone().oneshot(request);
            async move {
                let response = answer.await?;
                // The request stays in flight until its answer's body is sent or dropped.
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_flight = &guard;
                        frame
                    }))
                }))
            }
        })
    };
    let served = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => {}
        () = connection.closing() => {
            served.as_mut().graceful_shutdown();
            // An idle connection gets a moment to say goodbye (an HTTP/2 GOAWAY the peer may
            // never acknowledge); one with requests in flight finishes them, until the
            // server stops hard.
            let idle = connection.in_flight() == 0;
            if !idle {
                table.stop_counting_closing(&connection);
            }
            let linger = async {
                if idle {
                    tokio::time::sleep(IDLE_CLOSE_LINGER).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = served.as_mut() => {}
                () = linger => {}
                () = hard_stop.cancelled() => {}
            }
        }
        () = hard_stop.cancelled() => {}
    }
    table.remove(&connection);
}

/// Accept failures (out of file descriptors, mostly): backed off, and logged once per
/// burst instead of once per attempt.
#[derive(Debug, Default)]
struct AcceptErrors {
    failing_since: Option<Instant>,
    failures: u64,
    last_logged: Option<Instant>,
}

impl AcceptErrors {
    /// Counts a failure; returns how long to pause before the next accept.
    fn failed(&mut self, error: &std::io::Error) -> Duration {
        let now = Instant::now();
        self.failing_since.get_or_insert(now);
        self.failures += 1;
        if self.last_logged.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10)) {
            tracing::warn!(error = %error, failures = self.failures, "accept failed; backing off");
            self.last_logged = Some(now);
        }
        // 10 ms, doubling to 1 s.
        let exponent = u32::try_from(self.failures.min(7)).unwrap_or(7);
        Duration::from_millis(10u64.saturating_mul(1 << exponent)).min(Duration::from_secs(1))
    }

    fn recovered(&mut self) {
        if let Some(since) = self.failing_since.take() {
            tracing::info!(
                failures = self.failures,
                ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
                "accepting connections again"
            );
            self.failures = 0;
            self.last_logged = None;
        }
    }
}
