//! The gateway's MCP client to the upstream server (feature `gateway`):
//! supervised connections (lanes), the handshake, and the upstream's tools
//! kept fresh.
//!
//! Over stdio nothing in the upstream's question says which call asked it,
//! so each tool call holds a lane (a child process) of its own while it
//! lives, and lanes are started as calls need them, up to a bound. Over
//! Streamable HTTP every question comes on its call's stream: one lane
//! carries every call.
//!
//! `link.rs` is one connection (ids, waiting requests, the end), `lane.rs`
//! its supervision, `lease.rs` a call's place on a lane, `child.rs` a
//! child process over stdio, `http.rs` a Streamable HTTP endpoint,
//! `session.rs` the handshake and `tools/list`, `outbox.rs` the order and
//! bounds of what a link sends.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

mod child;
mod http;
mod lane;
mod lease;
pub(crate) mod link;
mod outbox;
pub(crate) mod session;

pub(crate) use lane::Keepalive;
use lane::{Connector, Lane};
use lease::Held;
pub(crate) use lease::Lease;

use link::{Inbound, InboundSink, Link};
use session::ServerInfo;

use crate::jsonrpc::JsonRpcError;
use crate::store::BoxFuture;

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

/// How long the handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(30);

/// A lane beyond the first that no call has used for this long is closed
/// (its process ends).
const LANE_IDLE: Duration = Duration::from_secs(60);

/// The upstream, as the gateway uses it.
pub(crate) struct Upstream {
    target: UpstreamTarget,
    keepalive: Keepalive,
    sink: Arc<dyn InboundSink>,
    tools: RwLock<Arc<Vec<Value>>>,
    /// The first is the primary (handshake facts, tool list, everything
    /// but tool calls); the rest are started for tool calls over stdio.
    lanes: Mutex<Vec<Arc<Lane>>>,
    max_lanes: usize,
    /// How many lanes may be without a live connection at once before
    /// another is started for a call, and how many processes start at
    /// once: starting one costs the host more than most calls do, and a
    /// burst of them all at once brings none up in time.
    max_starting: usize,
    starts: Arc<Semaphore>,
    /// A lane was let go by its call.
    released: Arc<Notify>,
    serials: Arc<AtomicU64>,
    me: Weak<Upstream>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("target", &self.target)
            .field("lanes", &self.lanes().len())
            .finish_non_exhaustive()
    }
}

/// The upstream's messages, seen first by the upstream itself (a changed
/// tool list), then by the gateway.
struct Tap {
    lane: Weak<Lane>,
    sink: Arc<dyn InboundSink>,
}

impl InboundSink for Tap {
    fn inbound(&self, link: &Arc<Link>, message: Inbound) {
        if let Inbound::Notification { method, .. } = &message {
            if method == "notifications/tools/list_changed" {
                if let Some(lane) = self.lane.upgrade() {
                    lane.refresh.notify_one();
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

/// How many upstream processes the gateway runs over stdio.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Processes {
    /// The most at once.
    pub(crate) most: usize,
    /// The most starting at once.
    pub(crate) starting: usize,
}

impl Upstream {
    /// Connect to `target` in the background (and again whenever a
    /// connection ends), handing what the upstream sends to `sink`; over
    /// stdio within `processes`.
    pub(crate) fn start(
        target: UpstreamTarget,
        keepalive: Keepalive,
        processes: Processes,
        sink: Arc<dyn InboundSink>,
    ) -> Arc<Self> {
        let starting = processes.starting.max(1);
        let up = Arc::new_cyclic(|me| Upstream {
            target,
            keepalive,
            sink,
            tools: RwLock::default(),
            lanes: Mutex::default(),
            max_lanes: processes.most.max(1),
            max_starting: starting,
            starts: Arc::new(Semaphore::new(starting)),
            released: Arc::new(Notify::new()),
            serials: Arc::default(),
            me: Weak::clone(me),
        });
        let primary = up.new_lane();
        up.lock_lanes().push(primary);
        tokio::spawn(close_idle_lanes(Weak::clone(&up.me)));
        up
    }

    fn lock_lanes(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Lane>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lanes(&self) -> Vec<Arc<Lane>> {
        self.lock_lanes().clone()
    }

    fn new_lane(&self) -> Arc<Lane> {
        let connector: Weak<dyn Connector> = self.me.clone();
        Lane::start(
            connector,
            Arc::clone(&self.serials),
            Arc::clone(&self.starts),
            self.keepalive,
        )
    }

    /// The primary connection and what the upstream said of itself,
    /// waiting up to `wait` for one; else the error saying why there is
    /// none. Everything but tool calls goes there: other lanes belong to
    /// the calls that lease them.
    pub(crate) async fn session(
        &self,
        wait: Duration,
    ) -> Result<(Arc<Link>, Arc<ServerInfo>), JsonRpcError> {
        let primary = Arc::clone(&self.lock_lanes()[0]);
        primary.session(tokio::time::Instant::now() + wait).await
    }

    /// The primary connection for a request that is no tool call, as a
    /// [`Lease`] beside the primary lane's calls: over stdio, if the
    /// request ends unanswered, its handler may still ask, and nothing
    /// would tell its questions from another call's on that process, so
    /// the process takes no new call and is started anew once none is on
    /// it.
    pub(crate) async fn forwarded(&self, wait: Duration) -> Result<Lease, JsonRpcError> {
        let (link, _) = self.session(wait).await?;
        let lane = matches!(self.target, UpstreamTarget::Command { .. })
            .then(|| Arc::clone(&self.lock_lanes()[0]));
        Ok(Lease::new(lane, Arc::downgrade(&self.released), link, true))
    }

    /// What the upstream said of itself in its handshake: the primary's
    /// answer, or while the primary starts again (a call on it ended
    /// unanswered, its process died) any live lane's, waiting up to `wait`
    /// for one lane to come up; else why none did.
    pub(crate) async fn info(&self, wait: Duration) -> Result<Arc<ServerInfo>, JsonRpcError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let settled = self.released.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let primary = {
                let lanes = self.lock_lanes();
                if let Some((_, info)) = lanes.iter().find_map(|l| l.live()) {
                    return Ok(info);
                }
                Arc::clone(&lanes[0])
            };
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                // The primary's reason.
                return primary.session(deadline).await.map(|(_, info)| info);
            }
        }
    }

    /// Send a notification of the gateway's that carries no data on every
    /// live connection (dropped where its queue is full).
    pub(crate) fn notify_all(&self, method: &str, params: &Value) {
        for lane in self.lanes() {
            if let Some(link) = lane.link() {
                link.hint(method, params.clone());
            }
        }
    }

    /// A connection for one tool call: over stdio a lane no other call
    /// holds (started if needed, up to the bound), waiting up to `wait`.
    pub(crate) async fn lease(&self, wait: Duration) -> Result<Lease, JsonRpcError> {
        let deadline = tokio::time::Instant::now() + wait;
        if matches!(self.target, UpstreamTarget::Url { .. }) {
            let (link, _) = self.session(wait).await?;
            return Ok(Lease::new(
                None,
                Arc::downgrade(&self.released),
                link,
                false,
            ));
        }
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(lane) = self.free_lane() {
                // Held before the wait: a failed wait, or a caller that
                // drops this future while the lane starts, gives it back.
                let held = Held {
                    lane: Some(Arc::clone(&lane)),
                    released: Arc::downgrade(&self.released),
                };
                let (link, _) = lane.session(deadline).await?;
                return Ok(held.lease(link));
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return Err(self.none_free());
            }
        }
    }

    /// A lane taken as a new call's: one without an active call, the
    /// fewest residents first (a live one before one still starting); a new
    /// one only when every lane runs a call, up to the bound, and while
    /// fewer than `max_starting` lanes are without a live connection (a
    /// call waits for the first lane free instead). Idle tasks cost no
    /// process of their own: a resident resumes once its lane runs nothing
    /// else.
    fn free_lane(&self) -> Option<Arc<Lane>> {
        let mut lanes = self.lock_lanes();
        let idle = lanes
            .iter()
            .filter_map(|l| {
                let u = *l.usage();
                // Not a connection on which a call ended unanswered.
                let clean = u.tainted.is_none() || u.tainted != l.link().map(|k| k.serial);
                (!u.active && clean).then_some(((u.residents, !l.is_up()), l))
            })
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, l)| Arc::clone(l));
        if let Some(lane) = idle {
            lane.usage().active = true;
            return Some(lane);
        }
        if lanes.len() < self.max_lanes && starting(&lanes) < self.max_starting {
            let lane = self.new_lane();
            lane.usage().active = true;
            lanes.push(Arc::clone(&lane));
            return Some(lane);
        }
        None
    }

    /// Why no lane was free for a call in its wait.
    fn none_free(&self) -> JsonRpcError {
        let lanes = self.lock_lanes();
        let starting = starting(&lanes);
        let failed = lanes
            .iter()
            .find_map(|l| l.failure())
            .map(|why| format!("; the last start failed: {why}"))
            .unwrap_or_default();
        JsonRpcError::internal(if lanes.len() < self.max_lanes {
            format!(
                "no upstream process was free in time: {} run calls and {starting} are \
                 starting, at most {} at once{failed}",
                lanes.len() - starting,
                self.max_starting
            )
        } else {
            format!(
                "all {} upstream processes are busy with running calls; the gateway's \
                 --upstream-processes bounds them",
                self.max_lanes
            )
        })
    }

    /// The upstream's tools as last listed.
    pub(crate) fn tools(&self) -> Arc<Vec<Value>> {
        Arc::clone(&self.tools.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set_tools(&self, tools: Vec<Value>) {
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
    }

    /// A new connection, shaken hands with, its tools listed.
    async fn open(&self, serial: u64, lane: Weak<Lane>) -> Result<(Arc<Link>, ServerInfo), String> {
        let tap: Arc<dyn InboundSink> = Arc::new(Tap {
            lane,
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
        // Closed if this future is dropped (its lane stopped): its process
        // ends with it.
        let mut opening = session::Opening(Some(Arc::clone(&link)));
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
                opening.0 = None;
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

/// How many of `lanes` are without a live connection (starting, or
/// waiting to start again).
fn starting(lanes: &[Arc<Lane>]) -> usize {
    lanes.iter().filter(|l| !l.is_up()).count()
}

impl Connector for Upstream {
    fn connect(
        &self,
        serial: u64,
        lane: Weak<Lane>,
    ) -> BoxFuture<'_, Result<(Arc<Link>, ServerInfo), String>> {
        Box::pin(self.open(serial, lane))
    }

    fn refresh<'a>(&'a self, link: &'a Link) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            match session::list_tools(link).await {
                Ok(tools) => {
                    self.set_tools(tools);
                    self.sink.tools_changed();
                }
                Err(e) => tracing::warn!("refreshing the upstream's tools failed: {}", e.message),
            }
        })
    }

    fn settled(&self) {
        self.released.notify_waiters();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        for lane in self.lock_lanes().iter() {
            lane.stop();
        }
    }
}

/// Close the lanes beyond the first that no call used for [`LANE_IDLE`],
/// while the upstream lives.
async fn close_idle_lanes(up: Weak<Upstream>) {
    loop {
        tokio::time::sleep(LANE_IDLE / 2).await;
        let Some(up) = up.upgrade() else { return };
        let mut lanes = up.lock_lanes();
        let mut index = 0;
        lanes.retain(|lane| {
            index += 1;
            let usage = *lane.usage();
            let idle = index > 1 && usage.is_empty() && usage.idle_since.elapsed() >= LANE_IDLE;
            if idle {
                lane.stop();
            }
            !idle
        });
    }
}
