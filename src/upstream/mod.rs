//! The gateway's MCP client to the upstream server (feature `gateway`):
//! one connection at a time, restarted with backoff when it ends, the
//! handshake, and the upstream's tools kept fresh.
//!
//! `link.rs` is one connection (ids, waiting requests, the end), `child.rs`
//! a child process over stdio, `session.rs` the handshake and `tools/list`.

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

mod child;
mod http;
pub(crate) mod link;
pub(crate) mod session;

use link::{Inbound, InboundSink, Link};
use session::ServerInfo;

use crate::jsonrpc::JsonRpcError;

/// Where the upstream MCP server is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamTarget {
    /// A program started by the gateway, speaking MCP on its stdin and
    /// stdout (its stderr goes to the gateway's); restarted with backoff
    /// when it exits.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint (`http://`), with headers sent on every
    /// request (`Authorization: Bearer ...`).
    Url {
        /// The endpoint, for example `http://127.0.0.1:3001/mcp`.
        url: String,
        /// Headers as `Name: value`.
        headers: Vec<String>,
    },
}

impl UpstreamTarget {
    /// Check what can be checked before connecting (a URL's scheme, its
    /// headers), with the reason it cannot be used.
    pub fn check(&self) -> Result<(), String> {
        match self {
            UpstreamTarget::Command { program, .. } if program.is_empty() => {
                Err("the upstream command is empty".to_owned())
            }
            UpstreamTarget::Command { .. } => Ok(()),
            UpstreamTarget::Url { url, headers } => {
                let uri: ::http::Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
                if uri.scheme_str() != Some("http") {
                    return Err(format!("{url:?}: only http:// upstream URLs are supported"));
                }
                for h in headers {
                    http::parse_header(h)?;
                }
                Ok(())
            }
        }
    }
}

/// The first pause before restarting an upstream that ended; doubled on
/// each failure up to [`MAX_BACKOFF`], and back to this once a connection
/// lived [`STABLE`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const STABLE: Duration = Duration::from_secs(10);
/// How long the handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(30);

/// How often a quiet upstream is pinged, and how long it has to answer
/// before its connection is given up (and every call on it fails).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keepalive {
    pub(crate) every: Duration,
    pub(crate) wait: Duration,
}

#[derive(Clone)]
enum State {
    Starting,
    Up(Arc<Link>, Arc<ServerInfo>),
    Down(String),
}

/// The upstream, as the gateway uses it.
pub(crate) struct Upstream {
    target: UpstreamTarget,
    state: watch::Sender<State>,
    tools: RwLock<Arc<Vec<Value>>>,
    refresh: Arc<Notify>,
    /// Cancelled when the handle drops: the supervisor stops and closes
    /// the connection.
    stop: CancellationToken,
    sink: Arc<dyn InboundSink>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// The upstream's messages, seen first by the upstream itself (a changed
/// tool list), then by the gateway.
struct Tap {
    upstream: Weak<Upstream>,
    sink: Arc<dyn InboundSink>,
}

impl InboundSink for Tap {
    fn inbound(&self, link: &Arc<Link>, message: Inbound) {
        if let Inbound::Notification { method, .. } = &message {
            if method == "notifications/tools/list_changed" {
                if let Some(up) = self.upstream.upgrade() {
                    up.refresh.notify_one();
                }
                return;
            }
        }
        self.sink.inbound(link, message);
    }

    fn link_closed(&self, serial: u64) {
        self.sink.link_closed(serial);
    }
}

impl Upstream {
    /// Connect to `target` in the background (and again whenever the
    /// connection ends), handing what the upstream sends to `sink`.
    pub(crate) fn start(
        target: UpstreamTarget,
        keepalive: Keepalive,
        sink: Arc<dyn InboundSink>,
    ) -> Arc<Self> {
        let up = Arc::new(Upstream {
            target,
            state: watch::Sender::new(State::Starting),
            tools: RwLock::default(),
            refresh: Arc::new(Notify::new()),
            stop: CancellationToken::new(),
            sink,
        });
        tokio::spawn(supervise(
            Arc::downgrade(&up),
            Arc::clone(&up.refresh),
            up.stop.clone(),
            keepalive,
        ));
        up
    }

    /// The live connection and what the upstream said of itself, waiting
    /// up to `wait` for one; else the error saying why there is none.
    pub(crate) async fn session(
        &self,
        wait: Duration,
    ) -> Result<(Arc<Link>, Arc<ServerInfo>), JsonRpcError> {
        let mut rx = self.state.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let why = match &*rx.borrow_and_update() {
                State::Up(link, info) if !link.is_closed() => {
                    return Ok((Arc::clone(link), Arc::clone(info)))
                }
                State::Up(link, _) => link.why(),
                State::Down(why) => why.clone(),
                State::Starting => "the upstream is starting".to_owned(),
            };
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    return Err(JsonRpcError::internal(format!(
                        "the upstream is unavailable: {why}"
                    )))
                }
            }
        }
    }

    /// The upstream's tools as last listed.
    pub(crate) fn tools(&self) -> Arc<Vec<Value>> {
        Arc::clone(
            &self
                .tools
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn set_tools(&self, tools: Vec<Value>) {
        *self
            .tools
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(tools);
    }

    /// A new connection, shaken hands with, its tools listed.
    async fn connect(self: &Arc<Self>, serial: u64) -> Result<(Arc<Link>, ServerInfo), String> {
        let tap: Arc<dyn InboundSink> = Arc::new(Tap {
            upstream: Arc::downgrade(self),
            sink: Arc::clone(&self.sink),
        });
        let link = match &self.target {
            UpstreamTarget::Command { program, args } => {
                child::spawn(serial, program, args, tap)
                    .map_err(|e| format!("cannot start the upstream {program:?}: {e}"))?
            }
            UpstreamTarget::Url { url, headers } => {
                let headers = headers
                    .iter()
                    .map(|h| http::parse_header(h))
                    .collect::<Result<Vec<_>, _>>()?;
                http::connect(serial, url, &headers, tap)?
            }
        };
        let ready = async {
            let info = session::initialize(&link).await?;
            let tools = session::list_tools(&link)
                .await
                .map_err(|e| format!("the upstream's tools/list failed: {}", e.message))?;
            Ok::<_, String>((info, tools))
        };
        let outcome = tokio::select! {
            out = tokio::time::timeout(HANDSHAKE, ready) => out.unwrap_or_else(|_| Err("the upstream did not finish its handshake in time".to_owned())),
            () = link.closed() => Err(link.why()),
        };
        match outcome {
            Ok((info, tools)) => {
                self.set_tools(tools);
                Ok((link, info))
            }
            Err(why) => {
                link.close(why.clone());
                Err(why)
            }
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.cancel();
        if let State::Up(link, _) = &*self.state.borrow() {
            link.close("the gateway stopped".to_owned());
        }
    }
}

/// Keep a connection up while the upstream handle lives.
async fn supervise(
    up: Weak<Upstream>,
    refresh: Arc<Notify>,
    stop: CancellationToken,
    keepalive: Keepalive,
) {
    let mut backoff = MIN_BACKOFF;
    let mut serial = 0;
    while !stop.is_cancelled() {
        serial += 1;
        let Some(strong) = up.upgrade() else { return };
        let started = Instant::now();
        let connected = tokio::select! {
            c = strong.connect(serial) => c,
            () = stop.cancelled() => return,
        };
        match connected {
            Ok((link, info)) => {
                tracing::info!(serial, version = %info.protocol_version, "upstream connected");
                strong
                    .state
                    .send_replace(State::Up(Arc::clone(&link), Arc::new(info)));
                drop(strong);
                loop {
                    tokio::select! {
                        () = link.closed() => break,
                        () = stop.cancelled() => {
                            link.close("the gateway stopped".to_owned());
                            return;
                        }
                        () = tokio::time::sleep(keepalive.every) => {
                            // Any answer will do, an error included: a
                            // silent upstream never holds calls forever.
                            let ping = link.request("ping", serde_json::json!({}));
                            if tokio::time::timeout(keepalive.wait, ping).await.is_err() {
                                link.close(format!(
                                    "the upstream did not answer a ping within {} ms",
                                    keepalive.wait.as_millis()
                                ));
                            }
                        }
                        () = refresh.notified() => {
                            let tools = session::list_tools(&link).await;
                            let Some(strong) = up.upgrade() else { return };
                            match tools {
                                Ok(tools) => strong.set_tools(tools),
                                Err(e) => tracing::warn!("refreshing the upstream's tools failed: {}", e.message),
                            }
                        }
                    }
                }
                let Some(strong) = up.upgrade() else { return };
                strong.state.send_replace(State::Down(link.why()));
            }
            Err(why) => {
                tracing::warn!(serial, "{why}");
                strong.state.send_replace(State::Down(why));
            }
        }
        if started.elapsed() >= STABLE {
            backoff = MIN_BACKOFF;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = stop.cancelled() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
