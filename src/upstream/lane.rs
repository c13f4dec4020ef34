//! One supervised connection to the upstream: connected in the background,
//! pinged while quiet, reconnected with backoff whenever it ends, and held
//! by at most one call at a time where the transport cannot tell calls
//! apart (stdio).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::link::Link;
use super::session::ServerInfo;
use crate::jsonrpc::JsonRpcError;
use crate::store::BoxFuture;

/// The first pause before restarting a connection that ended; doubled on
/// each failure up to [`MAX_BACKOFF`], and back to this once a connection
/// lived [`STABLE`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
const STABLE: Duration = Duration::from_secs(10);

/// How often a quiet upstream is pinged, and how long it has to answer
/// before its connection is given up (and every call on it fails).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keepalive {
    pub(crate) every: Duration,
    pub(crate) wait: Duration,
}

/// What makes a lane's connections: a new connection shaken hands with,
/// and a fresh tool list when the upstream says its tools changed.
pub(crate) trait Connector: Send + Sync + 'static {
    /// Connection number `serial`.
    fn connect(
        &self,
        serial: u64,
        lane: Weak<Lane>,
    ) -> BoxFuture<'_, Result<(Arc<Link>, ServerInfo), String>>;
    /// The upstream on `link` said its tools changed.
    fn refresh<'a>(&'a self, link: &'a Link) -> BoxFuture<'a, ()>;
    /// A lane's connection came up or went down: calls waiting for a lane
    /// look again.
    fn settled(&self);
}

#[derive(Clone)]
enum State {
    Starting,
    Up(Arc<Link>, Arc<ServerInfo>),
    Down(String),
}

/// One supervised connection.
pub(crate) struct Lane {
    state: watch::Sender<State>,
    /// Woken by `notifications/tools/list_changed` on this lane.
    pub(crate) refresh: Notify,
    stop: CancellationToken,
    usage: Mutex<Usage>,
}

/// Who uses a lane. Over stdio a lane carries at most one *active* call (one
/// that may ask a question); calls parked while their questions wait for
/// answers stay on it as residents (their upstream request waits for our
/// response and cannot ask again), and each goes on only once the lane has
/// no active call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usage {
    pub(crate) active: bool,
    pub(crate) residents: usize,
    /// When the lane last had no call at all.
    pub(crate) idle_since: Instant,
    /// The connection on which a call ended unanswered (cancelled, its
    /// caller gone): its handler may still run and ask, and over stdio
    /// nothing would tell its questions from the next call's. That
    /// connection takes no new call, and is ended once no call is on it.
    pub(crate) tainted: Option<u64>,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            active: false,
            residents: 0,
            idle_since: Instant::now(),
            tainted: None,
        }
    }
}

impl Usage {
    /// No call uses the lane.
    pub(crate) fn is_empty(&self) -> bool {
        !self.active && self.residents == 0
    }
}

impl Lane {
    /// A lane whose connections `connector` makes, numbered from `serials`.
    /// At most as many connections as `starts` has permits are made at
    /// once (a permit is held until the handshake ends).
    pub(crate) fn start(
        connector: Weak<dyn Connector>,
        serials: Arc<AtomicU64>,
        starts: Arc<Semaphore>,
        keepalive: Keepalive,
    ) -> Arc<Self> {
        let lane = Arc::new(Lane {
            state: watch::Sender::new(State::Starting),
            refresh: Notify::new(),
            stop: CancellationToken::new(),
            usage: Mutex::default(),
        });
        tokio::spawn(supervise(
            connector,
            Arc::downgrade(&lane),
            serials,
            starts,
            keepalive,
        ));
        lane
    }

    /// Stop the lane: its connection closes, no new one is made.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
        if let State::Up(link, _) = &*self.state.borrow() {
            link.close("the gateway stopped".to_owned());
        }
    }

    /// Whether the lane has a live connection now.
    pub(crate) fn is_up(&self) -> bool {
        matches!(&*self.state.borrow(), State::Up(link, _) if !link.is_closed())
    }

    /// The live connection, if there is one now.
    pub(crate) fn link(&self) -> Option<Arc<Link>> {
        self.live().map(|(link, _)| link)
    }

    /// The live connection and what the upstream said of itself, if there
    /// is one now.
    pub(crate) fn live(&self) -> Option<(Arc<Link>, Arc<ServerInfo>)> {
        match &*self.state.borrow() {
            State::Up(link, info) if !link.is_closed() => {
                Some((Arc::clone(link), Arc::clone(info)))
            }
            _ => None,
        }
    }

    /// Why its last connection ended or failed to start, while it has
    /// none.
    pub(crate) fn failure(&self) -> Option<String> {
        match &*self.state.borrow() {
            State::Down(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// Its users now.
    pub(crate) fn usage(&self) -> MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection and what the upstream said of itself, waiting
    /// until `deadline` for one; else the error saying why there is none.
    pub(crate) async fn session(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<Link>, Arc<ServerInfo>), JsonRpcError> {
        let mut rx = self.state.subscribe();
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
}

/// Keep a connection up while the lane lives and is not stopped.
async fn supervise(
    connector: Weak<dyn Connector>,
    lane: Weak<Lane>,
    serials: Arc<AtomicU64>,
    starts: Arc<Semaphore>,
    keepalive: Keepalive,
) {
    let mut backoff = MIN_BACKOFF;
    loop {
        let Some(stop) = lane.upgrade().map(|me| me.stop.clone()) else {
            return;
        };
        // The turn to start, waited for holding neither the lane nor the
        // upstream: a gateway dropped meanwhile stops its lanes at once.
        let permit = tokio::select! {
            permit = Arc::clone(&starts).acquire_owned() => permit,
            () = stop.cancelled() => return,
        };
        let serial = serials.fetch_add(1, Ordering::Relaxed) + 1;
        let (Some(up), Some(me), Ok(permit)) = (connector.upgrade(), lane.upgrade(), permit) else {
            return;
        };
        if me.stop.is_cancelled() {
            return;
        }
        let started = Instant::now();
        let connected = tokio::select! {
            c = up.connect(serial, Weak::clone(&lane)) => c,
            () = stop.cancelled() => return,
        };
        drop(permit);
        let why = match connected {
            Ok((link, info)) => {
                tracing::info!(serial, version = %info.protocol_version, "upstream connected");
                me.state
                    .send_replace(State::Up(Arc::clone(&link), Arc::new(info)));
                up.settled();
                drop((up, me));
                if !watch_link(&connector, &lane, &link, &stop, keepalive).await {
                    return;
                }
                link.why()
            }
            Err(why) => {
                tracing::warn!(serial, "{why}");
                drop((up, me));
                why
            }
        };
        let Some(me) = lane.upgrade() else { return };
        me.state.send_replace(State::Down(why));
        drop(me);
        if let Some(up) = connector.upgrade() {
            up.settled();
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

/// Serve one live connection until it ends (`true`) or the lane stops
/// (`false`): ping it while quiet, refresh the tools when asked.
async fn watch_link(
    connector: &Weak<dyn Connector>,
    lane: &Weak<Lane>,
    link: &Arc<Link>,
    stop: &CancellationToken,
    keepalive: Keepalive,
) -> bool {
    loop {
        let refreshed = async {
            match lane.upgrade() {
                Some(me) => me.refresh.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = link.closed() => return true,
            () = stop.cancelled() => {
                link.close("the gateway stopped".to_owned());
                return false;
            }
            () = tokio::time::sleep(keepalive.every) => {
                // Any answer will do, an error included: a silent upstream
                // never holds calls forever.
                let ping = link.request("ping", serde_json::json!({}));
                if tokio::time::timeout(keepalive.wait, ping).await.is_err() {
                    link.close(format!(
                        "the upstream did not answer a ping within {} ms",
                        keepalive.wait.as_millis()
                    ));
                }
            }
            () = refreshed => {
                let Some(up) = connector.upgrade() else { return false };
                // No ping goes out meanwhile: an upstream that does not
                // list its tools in a ping's time is given up as one that
                // does not answer a ping.
                if tokio::time::timeout(keepalive.wait, up.refresh(link)).await.is_err() {
                    link.close(format!(
                        "the upstream did not answer tools/list within {} ms",
                        keepalive.wait.as_millis()
                    ));
                }
            }
        }
    }
}
