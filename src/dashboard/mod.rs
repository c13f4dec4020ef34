//! An operator's web dashboard (feature `dashboard`): see [`Dashboard`].
//!
//! One file per part: `access` (the tokens and roles), `sessions` (the
//! browsers signed in, by signed cookies), `counts` (the counts and the
//! chart every page shares), `auth` (the `Origin` check, the caller, sign-in,
//! CSRF), `pages` (the `GET` routes), `overview`, `list`, `task` (each
//! page's HTML), `chart` (the last hour), `live` (SSE), `html`
//! (escaping and the page shell), `reply` (refusals and headers), and
//! `assets/` (the vendored script and stylesheet).

mod access;
mod auth;
mod chart;
mod counts;
mod html;
mod list;
mod live;
mod overview;
mod pages;
mod reply;
mod sessions;
mod task;

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use tokio::sync::broadcast;

pub use self::access::{
    Access, AccessError, Role, MIN_TOKEN_LEN, READ_ONLY_TOKEN_ENV, READ_ONLY_TOKEN_FILE_ENV,
    TOKEN_ENV, TOKEN_FILE_ENV,
};
use crate::http::AllowedOrigins;
use crate::runtime::Operator;
use crate::store::TaskChange;

/// A web dashboard over an [`Operator`]: an [`axum::Router`] that an
/// application nests where it likes, or that `mcp-tasks dashboard` serves
/// alone.
///
/// # Pages
///
/// | path | what |
/// |---|---|
/// | `/` | counts by status, throughput and failures over the last hour (an SVG chart), the tasks waiting longest, the tasks waiting for input, running tasks by worker |
/// | `/tasks` | the task list with the operator API's filters (`status`, `tool`, `owner`, `search`, `created_after`, `created_before`, `limit`) and a cursor (`after`) for the next page |
/// | `/tasks/{id}` | one task: status and times, status message, outstanding input requests, arguments, result or error, owner, worker; a Cancel button |
/// | `POST /tasks/{id}/cancel` | cancel it as [`Operator::cancel`] does (its handler stops wherever it runs) |
/// | `/events` | the open page's live part over SSE (see below) |
/// | `/api/stats` | [`TaskStats`](crate::store::TaskStats) as JSON |
/// | `/sign-in`, `POST /sign-out` | the browser session |
/// | `/assets/dashboard.js`, `/assets/dashboard.css` | the vendored script and stylesheet (no build step) |
///
/// Pages are rendered on the server; every text of a task (arguments,
/// results, messages, ids) is escaped, so a task whose arguments hold
/// `<script>` shows it as text. The pages' `Content-Security-Policy` runs
/// the dashboard's own script only. Live updates: the script listens to
/// `/events`, which sends the page's live part again after every change
/// the layer writes ([`Operator::subscribe`]), every change the store
/// reports from other processes ([`Operator::store_changes`]), and on a
/// resync timer (2 s on a store without a change feed, 15 s with one;
/// [`with_resync_period`](Self::with_resync_period)).
///
/// # Security
///
/// Nobody may use it until [`Access`] has a token: every request gets 401
/// (the sign-in page, for a browser). A caller shows a token as
/// `Authorization: Bearer <token>` (scripts), or types it into the sign-in
/// page, which sets a session cookie (`HttpOnly`, `SameSite=Strict`). The
/// read-only role sees every page and may not act. Actions are `POST`s
/// that need the session's CSRF token (a bearer caller needs none), and
/// every `POST` whose `Origin` is not allowed gets 403, the check of
/// [`McpEndpoint`](crate::McpEndpoint): by default loopback pages only
/// ([`with_allowed_origins`](Self::with_allowed_origins) for the name the
/// dashboard is served under).
///
/// ```no_run
/// use mcp_task_layer::dashboard::{Access, Dashboard};
/// use mcp_task_layer::{MemoryStore, TaskLayer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = TaskLayer::new(MemoryStore::new());
/// // MCP_TASKS_DASHBOARD_TOKEN (or MCP_TASKS_DASHBOARD_TOKEN_FILE).
/// let access = Access::from_env()?;
/// let app = axum::Router::new().nest(
///     "/ops/tasks",
///     Dashboard::new(layer.operator(), access).router(),
/// );
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// // The crate's server: deadlines for slow clients (`axum::serve` has none).
/// mcp_task_layer::serve(listener, app).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Dashboard {
    operator: Operator,
    access: Access,
    origins: AllowedOrigins,
    secure_cookie: bool,
    resync: Option<Duration>,
    max_streams: usize,
}

/// How many live pages (`/events` streams) one dashboard serves at once by
/// default ([`Dashboard::with_max_live_streams`]).
pub const DEFAULT_MAX_LIVE_STREAMS: usize = 256;

impl Dashboard {
    /// A dashboard over `operator`, open to the callers `access` allows.
    pub fn new(operator: Operator, access: Access) -> Self {
        Dashboard {
            operator,
            access,
            origins: AllowedOrigins::Loopback,
            secure_cookie: false,
            resync: None,
            max_streams: DEFAULT_MAX_LIVE_STREAMS,
        }
    }

    /// How many live pages (`/events` streams) may be open at once
    /// (default [`DEFAULT_MAX_LIVE_STREAMS`]); past it a page's stream is
    /// refused with 503 and the page stays as loaded. A stream's slot is
    /// given back when its browser goes or its session ends.
    pub fn with_max_live_streams(mut self, max: usize) -> Self {
        self.max_streams = max;
        self
    }

    /// How often an open page re-reads the store when no change woke it
    /// (what shows other processes' writes on a store without a change
    /// feed, and moves the chart's minutes on); by default 2 s on a store
    /// without a feed, 15 s on one with a feed.
    pub fn with_resync_period(mut self, period: Duration) -> Self {
        self.resync = Some(period.max(Duration::from_millis(100)));
        self
    }

    /// The browser origins (`https://ops.example.com`) whose pages may
    /// `POST` (sign in, cancel), instead of the default: loopback pages
    /// only. Requests without an `Origin` header are never refused for it.
    pub fn with_allowed_origins<I, O>(mut self, origins: I) -> Self
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        self.origins = AllowedOrigins::list(origins);
        self
    }

    /// Mark the session cookie `Secure` (sent over HTTPS only): set it when
    /// the dashboard is served over HTTPS, directly or behind a proxy.
    pub fn with_secure_cookie(mut self, secure: bool) -> Self {
        self.secure_cookie = secure;
        self
    }

    /// The router: nest it where the dashboard should live (its links
    /// follow the path it is nested at), or serve it at the root.
    pub fn router(self) -> Router {
        let sessions = sessions::Sessions::new(&self.access);
        let shared = Arc::new(Shared {
            operator: self.operator,
            access: self.access,
            sessions,
            counts: counts::SharedRead::default(),
            chart: counts::SharedRead::default(),
            origins: self.origins,
            secure_cookie: self.secure_cookie,
            resync: self.resync,
            streams: Arc::new(tokio::sync::Semaphore::new(
                self.max_streams.min(tokio::sync::Semaphore::MAX_PERMITS),
            )),
            feed: OnceLock::new(),
        });
        Router::new()
            .route("/", get(pages::overview))
            .route("/tasks", get(pages::tasks))
            .route("/tasks/{id}", get(pages::task))
            .route("/tasks/{id}/cancel", post(task::cancel))
            .route("/events", get(live::events))
            .route("/api/stats", get(pages::stats))
            .route("/sign-in", get(auth::sign_in_form).post(auth::sign_in))
            .route("/sign-out", post(auth::sign_out))
            .route("/assets/dashboard.js", get(pages::script))
            .route("/assets/dashboard.css", get(pages::style))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&shared),
                auth::guard,
            ))
            .with_state(shared)
    }
}

/// What every route shares.
pub(crate) struct Shared {
    pub(crate) operator: Operator,
    pub(crate) access: Access,
    pub(crate) sessions: sessions::Sessions,
    /// The counts every page and stream share.
    pub(crate) counts: counts::SharedRead<crate::store::TaskStats>,
    /// The last hour's chart every page and stream share.
    pub(crate) chart: counts::SharedRead<chart::Throughput>,
    pub(crate) origins: AllowedOrigins,
    pub(crate) secure_cookie: bool,
    /// The resync period asked for, if any.
    pub(crate) resync: Option<Duration>,
    /// A permit a live stream.
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// The store's change feed, taken once; each stream resubscribes.
    feed: OnceLock<Option<Mutex<broadcast::Receiver<TaskChange>>>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("operator", &self.operator)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Counts read no earlier than `since`, shared with every page and
    /// stream (`counts.rs`).
    pub(crate) async fn stats(
        &self,
        since: tokio::time::Instant,
    ) -> crate::store::Result<crate::store::TaskStats> {
        self.counts.read(since, || self.operator.stats()).await
    }

    /// The last hour's chart, read no earlier than `since`, shared as the
    /// counts are: every open overview re-renders after each change, and
    /// on Redis the chart is one script over the hour's ended tasks.
    pub(crate) async fn chart(
        &self,
        since: tokio::time::Instant,
    ) -> crate::store::Result<chart::Throughput> {
        self.chart
            .read(since, || {
                chart::Throughput::read(&self.operator, crate::clock::unix_now_ms())
            })
            .await
    }

    /// A receiver of the store's change feed, if it has one.
    pub(crate) fn changes(&self) -> Option<broadcast::Receiver<TaskChange>> {
        self.feed
            .get_or_init(|| self.operator.store_changes().map(Mutex::new))
            .as_ref()
            .map(|rx| {
                rx.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .resubscribe()
            })
    }
}
