//! The one generic core: the task state machine, the request handlers for
//! `tools/call` and `tasks/*`, the runner that drives (and re-drives) the
//! inner service, cancellation and the reaper.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, info, warn, Instrument, Span};

use crate::context::{TaskId, TaskOwner, TaskResumeContext};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, JsonText, RequestId};
use crate::layer::{default_owner, Recovery, TaskPolicy};
use crate::limits::{json_size, write_json_str, Limits};
use crate::peer::Peer;
use crate::protocol::{
    InputRequest, InputResponses, TaskMetadata, TaskStatus, META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION, META_RELATED_TASK, TASKS_EXTENSION,
};

/// `_meta` key tying a notification to its `subscriptions/listen` request.
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
use crate::store::{
    self, BoxFuture, Era, Lease, PendingInput, TaskChange, TaskOutcome, TaskRecord, TaskStore,
};
use crate::TaskEvent;

/// What the layer needs of the inner service to run tasks with it.
pub(crate) trait InnerService:
    Service<
        JsonRpcRequest,
        Response = JsonRpcResponse,
        Future: Send + 'static,
        Error: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> InnerService for S where
    S: Service<
            JsonRpcRequest,
            Response = JsonRpcResponse,
            Future: Send + 'static,
            Error: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

pub(crate) type OwnerFn = Arc<dyn Fn(&JsonRpcRequest) -> Option<String> + Send + Sync>;

/// How many times in a row a handler may answer with `requestState` alone
/// before the task fails (it would otherwise loop forever).
const MAX_STATE_ONLY_ROUNDS: u32 = 16;
/// Bound on compare-and-set retries; each retry means another writer won.
const MAX_CAS_RETRIES: usize = 64;
const REAP_BATCH: usize = 1024;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) policies: Arc<HashMap<String, TaskPolicy>>,
    pub(crate) default_policy: TaskPolicy,
    pub(crate) default_ttl: Option<Duration>,
    pub(crate) max_ttl: Option<Duration>,
    pub(crate) poll_interval: Duration,
    pub(crate) cancel_grace: Duration,
    pub(crate) task_window: Duration,
    pub(crate) reap_interval: Duration,
    pub(crate) list_page_size: usize,
    pub(crate) limits: Limits,
    pub(crate) owner: OwnerFn,
    pub(crate) lease_ttl: Duration,
    pub(crate) recovery: Recovery,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policies: Arc::default(),
            default_policy: TaskPolicy::Sync,
            default_ttl: Some(Duration::from_secs(3600)),
            max_ttl: Some(Duration::from_secs(86_400)),
            poll_interval: Duration::from_secs(1),
            cancel_grace: Duration::from_secs(5),
            task_window: Duration::ZERO,
            reap_interval: Duration::from_secs(1),
            list_page_size: 50,
            limits: Limits::default(),
            owner: Arc::new(default_owner),
            lease_ttl: Duration::from_secs(30),
            recovery: Recovery::Fail,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("policies", &self.policies)
            .field("default_policy", &self.default_policy)
            .field("default_ttl", &self.default_ttl)
            .field("max_ttl", &self.max_ttl)
            .field("poll_interval", &self.poll_interval)
            .field("cancel_grace", &self.cancel_grace)
            .field("task_window", &self.task_window)
            .field("reap_interval", &self.reap_interval)
            .finish_non_exhaustive()
    }
}

impl Config {
    pub(crate) fn policy(&self, tool: &str) -> TaskPolicy {
        self.policies
            .get(tool)
            .copied()
            .unwrap_or(self.default_policy)
    }

    fn ttl_ms(&self, requested: Option<u64>) -> Option<u64> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let wanted = requested.or(self.default_ttl.map(ms));
        match (wanted, self.max_ttl.map(ms)) {
            (Some(w), Some(max)) => Some(w.min(max)),
            (None, Some(max)) => Some(max),
            (w, None) => w,
        }
    }
}

/// Wall-clock milliseconds that advance with tokio's clock, so that
/// `tokio::time::pause` and `advance` move task timestamps and TTLs too.
#[derive(Debug)]
struct Clock {
    base_wall_ms: i64,
    base: tokio::time::Instant,
}

impl Clock {
    fn new() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Clock {
            base_wall_ms: wall,
            base: tokio::time::Instant::now(),
        }
    }

    fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.base_wall_ms.saturating_add(elapsed)
    }
}

/// What this process knows about a task beyond the store: its cancellation
/// token and its tracing span, kept across resumes.
#[derive(Clone, Debug)]
struct Local {
    token: CancellationToken,
    span: Span,
    /// Where to send 2025-11-25 status notifications, if the transport of
    /// the creating request offered a way back.
    peer: Option<Peer>,
    /// The last status this process wrote or saw (for the active gauge).
    status: TaskStatus,
    /// The task's owner (for the per-owner bound).
    owner: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) cfg: Config,
    pub(crate) events: broadcast::Sender<TaskEvent>,
    /// Every written record, for `subscriptions/listen` streams; only fed
    /// while one is open.
    snapshots: broadcast::Sender<Arc<TaskRecord>>,
    /// Changes the store reported (other replicas' writes included), for
    /// subscriptions and blocked `tasks/result` calls; only fed while one
    /// listens.
    changes: broadcast::Sender<TaskChange>,
    /// Whether the store reports changes ([`TaskStore::changes`]).
    has_feed: std::sync::atomic::AtomicBool,
    clock: Clock,
    local: Mutex<HashMap<String, Local>>,
    /// Unfinished tasks per owner among `local`.
    active_per_owner: Mutex<HashMap<Option<String>, usize>>,
    reaper: OnceLock<()>,
    /// This process's replica id, the holder name in leases.
    replica: String,
    /// A type-erased inner service, for re-running orphaned tasks.
    invoker: Mutex<Option<Invoker>>,
    invoker_set: std::sync::atomic::AtomicBool,
}

/// The inner service's error, type-erased for the orphan recovery runner.
#[derive(Debug)]
pub(crate) struct InnerFailed;

type Invoker = tower::util::BoxCloneService<JsonRpcRequest, JsonRpcResponse, InnerFailed>;

/// The era and capabilities of one request, read from its own `_meta`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestEra {
    pub(crate) modern: bool,
    pub(crate) tasks_declared: bool,
}

impl RequestEra {
    pub(crate) fn of(req: &JsonRpcRequest) -> Self {
        let Some(meta) = req.meta() else {
            return RequestEra {
                modern: false,
                tasks_declared: false,
            };
        };
        let modern = meta
            .get(META_PROTOCOL_VERSION)
            .is_some_and(Value::is_string);
        let tasks_declared = modern
            && meta
                .get(META_CLIENT_CAPABILITIES)
                .and_then(|c| c.get("extensions"))
                .and_then(|e| e.get(TASKS_EXTENSION))
                .is_some_and(Value::is_object);
        RequestEra {
            modern,
            tasks_declared,
        }
    }
}

pub(crate) fn missing_tasks_capability() -> JsonRpcError {
    JsonRpcError::missing_capability(json!({ "extensions": { TASKS_EXTENSION: {} } }))
}

/// The one answer for unknown, expired and foreign task ids, so that a
/// task's existence never leaks (R51).
pub(crate) fn task_not_found() -> JsonRpcError {
    JsonRpcError::new(
        crate::jsonrpc::code::INVALID_PARAMS,
        "Failed to retrieve task: Task not found",
    )
}

fn store_failure(e: &store::Error) -> JsonRpcError {
    warn!(error = %e, "task store failure");
    JsonRpcError::internal("the task store is unavailable")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC) of Unix milliseconds.
///
/// Years 0 to 9999 are written digit by digit (a task's timestamps are
/// formatted on every read); anything else takes `time`'s formatter, which
/// gives the same text for those years.
pub(crate) fn rfc3339(ms: i64) -> String {
    match rfc3339_digits(ms) {
        // Digits and ASCII punctuation only: always UTF-8.
        Some(text) => {
            std::str::from_utf8(&text).map_or_else(|_| rfc3339_formatted(ms), String::from)
        }
        None => rfc3339_formatted(ms),
    }
}

fn rfc3339_digits(ms: i64) -> Option<[u8; 24]> {
    const DAY_MS: i64 = 86_400_000;
    /// Julian day number of 1970-01-01.
    const UNIX_EPOCH_JD: i64 = 2_440_588;
    let jd = i32::try_from(ms.div_euclid(DAY_MS).checked_add(UNIX_EPOCH_JD)?).ok()?;
    let (year, month, day) = time::Date::from_julian_day(jd).ok()?.to_calendar_date();
    let year = u32::try_from(year).ok().filter(|y| *y <= 9999)?;
    // 0 <= in_day < DAY_MS, so it fits a u32.
    let in_day = u32::try_from(ms.rem_euclid(DAY_MS)).ok()?;
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u32| {
        for slot in out[at..at + width].iter_mut().rev() {
            // A digit: `n % 10 < 10`.
            *slot = b'0' + u8::try_from(n % 10).unwrap_or(0);
            n /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, u32::from(u8::from(month)));
    put(8, 2, u32::from(day));
    put(11, 2, in_day / 3_600_000);
    put(14, 2, in_day / 60_000 % 60);
    put(17, 2, in_day / 1000 % 60);
    put(20, 3, in_day % 1000);
    Some(out)
}

fn rfc3339_formatted(ms: i64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| String::from("1970-01-01T00:00:00.000Z"))
}

/// A fresh task id: 128 bits from the operating system's CSPRNG, as 32
/// lowercase hex digits.
///
/// The random bytes are fetched 16 ids at a time into a per-thread buffer
/// (one system call instead of sixteen); each byte is used for one id only
/// and cleared once taken.
pub(crate) fn new_task_id() -> Result<String, getrandom::Error> {
    const IDS_PER_FILL: usize = 16;
    thread_local! {
        static POOL: std::cell::RefCell<([u8; 16 * IDS_PER_FILL], usize)> =
            const { std::cell::RefCell::new(([0; 16 * IDS_PER_FILL], 16 * IDS_PER_FILL)) };
    }
    let bytes = POOL.with_borrow_mut(|(pool, used)| -> Result<[u8; 16], getrandom::Error> {
        if *used == pool.len() {
            getrandom::fill(pool)?;
            *used = 0;
        }
        let mut bytes = [0u8; 16];
        let taken = &mut pool[*used..*used + 16];
        bytes.copy_from_slice(taken);
        taken.fill(0);
        *used += 16;
        Ok(bytes)
    })?;
    let mut id = String::with_capacity(32);
    for b in bytes {
        id.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        id.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    Ok(id)
}

fn result_type(v: &Value) -> Option<&str> {
    v.get("resultType").and_then(Value::as_str)
}

pub(crate) fn is_mrtr(resp: &JsonRpcResponse) -> bool {
    resp.result_value()
        .is_some_and(|v| result_type(v) == Some("input_required"))
}

/// The response for a handler's outcome.
fn reply(id: Option<RequestId>, outcome: Result<Value, JsonRpcError>) -> JsonRpcResponse {
    match outcome {
        Ok(v) => JsonRpcResponse::result(id, v),
        Err(e) => JsonRpcResponse::error(id, e),
    }
}

fn ack(id: Option<RequestId>) -> JsonRpcResponse {
    JsonRpcResponse::result(id, json!({ "resultType": "complete" }))
}

/// Read `params.taskId` as a string.
fn task_id_param(req: &JsonRpcRequest) -> Result<&str, JsonRpcError> {
    match req.params_object().and_then(|p| p.get("taskId")) {
        Some(Value::String(id)) => Ok(id),
        Some(_) => Err(JsonRpcError::invalid_params("\"taskId\" must be a string")),
        None => Err(JsonRpcError::invalid_params("missing \"taskId\"")),
    }
}

/// A JSON-RPC error object as JSON, built without serializing it.
/// Deepest nesting of `arguments` or `_meta` a task keeps: its record must
/// read back through `serde_json`, which stops at 128 levels.
const MAX_KEPT_DEPTH: usize = 100;

/// A copy of request JSON that a task may have to store, as text, or
/// `None` if it nests deeper than [`MAX_KEPT_DEPTH`].
///
/// A `String` until a task is made (most `Auto` calls end before): the
/// shared [`JsonText`] costs one more copy.
fn keep(v: &Value) -> Option<String> {
    let mut text = String::with_capacity(256);
    crate::limits::write_json(&mut text, v);
    // Nesting 100 levels takes at least 200 bytes of brackets.
    if text.len() >= 2 * MAX_KEPT_DEPTH && crate::limits::depth(v) >= MAX_KEPT_DEPTH {
        return None;
    }
    Some(text)
}

/// A `tools/call`'s `arguments` (`None` when absent) and `_meta`, kept for
/// the task the call may become, and their serialized size (absent
/// `arguments` count as `null`, as before).
pub(crate) struct KeptCall {
    pub(crate) arguments: Option<String>,
    pub(crate) meta: Option<String>,
    pub(crate) size: usize,
}

impl KeptCall {
    /// The copies, or the error for a call nesting too deeply to keep.
    pub(crate) fn of(req: &JsonRpcRequest) -> Result<Self, JsonRpcError> {
        let mut kept = KeptCall {
            arguments: None,
            meta: None,
            size: 0,
        };
        let Some(params) = req.params_object() else {
            return Ok(kept);
        };
        let too_deep = |what: &str| {
            JsonRpcError::invalid_params(format!(
                "{what} nests deeper than {MAX_KEPT_DEPTH} levels, too deep to keep for a task"
            ))
        };
        kept.size = "null".len();
        if let Some(a) = params.get("arguments") {
            let text = keep(a).ok_or_else(|| too_deep("arguments"))?;
            kept.size = text.len();
            kept.arguments = Some(text);
        }
        if let Some(m) = params.get("_meta") {
            let text = keep(m).ok_or_else(|| too_deep("_meta"))?;
            kept.size += text.len();
            kept.meta = Some(text);
        }
        Ok(kept)
    }
}

/// What the layer remembers of the `tools/call` that may become a task.
pub(crate) struct ToolCall {
    pub(crate) id: Option<RequestId>,
    pub(crate) name: String,
    /// `arguments` and `_meta`, read back only if a task is made.
    pub(crate) kept: KeptCall,
    pub(crate) input_responses: InputResponses,
    pub(crate) request_state: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) token: CancellationToken,
    pub(crate) era: Era,
    pub(crate) requested_ttl: Option<u64>,
    pub(crate) peer: Option<Peer>,
}

impl ToolCall {
    pub(crate) fn from_request(
        req: &JsonRpcRequest,
        kept: KeptCall,
        owner: Option<String>,
        era: Era,
    ) -> Self {
        let mut call = ToolCall {
            id: req.id.clone(),
            name: String::new(),
            kept,
            input_responses: InputResponses::new(),
            request_state: None,
            owner,
            token: CancellationToken::new(),
            era,
            requested_ttl: None,
            peer: req.extensions.get::<Peer>().cloned(),
        };
        // One pass over the parameters rather than a lookup per key.
        for (key, value) in req.params_object().into_iter().flatten() {
            match key.as_str() {
                "name" => call.name = value.as_str().unwrap_or_default().to_owned(),
                "inputResponses" => {
                    if let Some(m) = value.as_object() {
                        call.input_responses =
                            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    }
                }
                "requestState" => call.request_state = value.as_str().map(str::to_owned),
                "task" => call.requested_ttl = value.get("ttl").and_then(Value::as_u64),
                _ => {}
            }
        }
        call
    }
}

/// How a runner takes a task's handler over: the lease fence it writes
/// under, when the task was resumed (for the resume-latency metric), and how
/// many rounds in a row the handler has answered with `requestState` alone.
#[derive(Clone, Copy, Debug)]
struct Turn {
    fence: u64,
    resumed_at: Option<tokio::time::Instant>,
    state_only: u32,
}

/// What the runner does after writing a handler's answer.
enum Next {
    Done,
    Reinvoke(JsonRpcRequest),
}

type InnerFuture<E> = BoxFuture<'static, Result<JsonRpcResponse, E>>;

impl Shared {
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        cfg: Config,
        events: broadcast::Sender<TaskEvent>,
    ) -> Self {
        Shared {
            store,
            cfg,
            events,
            snapshots: broadcast::channel(1024).0,
            changes: broadcast::channel(1024).0,
            has_feed: std::sync::atomic::AtomicBool::new(false),
            clock: Clock::new(),
            local: Mutex::new(HashMap::new()),
            active_per_owner: Mutex::new(HashMap::new()),
            reaper: OnceLock::new(),
            replica: new_task_id().unwrap_or_else(|_| format!("replica-{}", std::process::id())),
            invoker: Mutex::new(None),
            invoker_set: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) fn owner_of(&self, req: &JsonRpcRequest) -> Option<String> {
        (self.cfg.owner)(req)
    }

    fn locals(&self) -> std::sync::MutexGuard<'_, HashMap<String, Local>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, usize>> {
        self.active_per_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Remember a task this process runs or waits on.
    fn track(&self, id: &str, local: Local) {
        let owner = local.owner.clone();
        if self.locals().insert(id.to_owned(), local).is_none() {
            *self.owners().entry(owner).or_default() += 1;
        }
    }

    /// Whether `owner` already has as many unfinished tasks in this process
    /// as [`Limits::max_tasks_per_owner`] allows.
    pub(crate) fn owner_at_capacity(&self, owner: Option<&str>) -> Option<JsonRpcError> {
        let max = self.cfg.limits.max_tasks_per_owner;
        let active = self
            .owners()
            .get(&owner.map(str::to_owned))
            .copied()
            .unwrap_or(0);
        (active >= max).then(|| {
            JsonRpcError::invalid_params(format!(
                "the caller already has {active} unfinished tasks; at most {max} are allowed"
            ))
        })
    }

    /// The task's token and span, made if this process has none yet (the
    /// task was created before a restart, or on another replica).
    fn local(&self, record: &TaskRecord) -> Local {
        if let Some(local) = self.local_of(&record.id) {
            return local;
        }
        let local = Local {
            token: CancellationToken::new(),
            span: task_span(&record.id, &record.tool_name),
            peer: None,
            status: record.status,
            owner: record.owner.clone(),
        };
        self.track(&record.id, local.clone());
        local
    }

    fn forget(&self, id: &str) -> Option<Local> {
        let local = self.locals().remove(id)?;
        let mut owners = self.owners();
        if let Some(n) = owners.get_mut(&local.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.remove(&local.owner);
            }
        }
        Some(local)
    }

    fn local_of(&self, id: &str) -> Option<Local> {
        self.locals().get(id).cloned()
    }

    /// Announce a written status: log it in the task's span, send it on the
    /// event channel, and (2025-11-25) notify the creating client if its
    /// transport left a way back.
    fn publish(&self, prev: TaskStatus, record: &TaskRecord, local: Option<&Local>) {
        crate::metrics::transition(prev, record.status);
        if let Some(l) = self.locals().get_mut(&record.id) {
            l.status = record.status;
        }
        let span = local.map_or_else(Span::none, |l| l.span.clone());
        info!(parent: &span, status = %record.status, version = record.version, "task status");
        if record.era == Era::Legacy {
            if let Some(peer) = local.and_then(|l| l.peer.clone()) {
                let params = serde_json::to_value(self.legacy_task(record)).unwrap_or_default();
                tokio::spawn(peer.notify("notifications/tasks/status".into(), params));
            }
        }
        self.announce(record);
    }

    /// Send a written record to event and subscription listeners.
    fn announce(&self, record: &TaskRecord) {
        if self.snapshots.receiver_count() > 0 {
            let _ = self.snapshots.send(Arc::new(record.clone()));
        }
        let _ = self.events.send(TaskEvent {
            task_id: record.id.clone(),
            status: record.status,
            version: record.version,
        });
    }

    /// `subscriptions/listen` with `notifications.taskIds` (2026-07-28):
    /// acknowledge the ids the caller may see, then push
    /// `notifications/tasks` (what `tasks/get` would return, without
    /// `resultType`, tagged with the subscription id) on every change of
    /// those tasks, in order, through the request's [`Peer`]. Answers when
    /// every watched task has ended or the client has gone.
    pub(crate) async fn listen(&self, req: JsonRpcRequest) -> JsonRpcResponse {
        let id = req.id.clone();
        match self.listen_inner(&req).await {
            Ok(()) => ack(id),
            Err(e) => JsonRpcResponse::error(id, e),
        }
    }

    async fn listen_inner(&self, req: &JsonRpcRequest) -> Result<(), JsonRpcError> {
        const MAX_WATCHED: usize = 1024;
        let asked = req
            .params_object()
            .and_then(|p| p.get("notifications"))
            .and_then(|n| n.get("taskIds"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                JsonRpcError::invalid_params("\"notifications.taskIds\" must be an array")
            })?;
        if asked.len() > MAX_WATCHED {
            return Err(JsonRpcError::invalid_params(format!(
                "at most {MAX_WATCHED} task ids per subscription"
            )));
        }
        let peer = req.extensions.get::<Peer>().cloned().ok_or_else(|| {
            JsonRpcError::new(
                crate::jsonrpc::code::INVALID_REQUEST,
                "subscriptions/listen needs a transport that can stream notifications",
            )
        })?;
        let subscription = serde_json::to_value(&req.id).unwrap_or(Value::Null);
        let owner = self.owner_of(req);
        // Subscribe before reading, so no change falls in between.
        let mut snapshots = self.snapshots.subscribe();
        let mut changes = self.changes.subscribe();
        let mut watched: HashMap<String, Seen> = HashMap::new();
        let mut order = Vec::new();
        for task_id in asked.iter().filter_map(Value::as_str) {
            if watched.contains_key(task_id) {
                continue;
            }
            if let Some(r) = self.lookup(task_id, owner.as_deref(), Era::Modern).await? {
                if !r.status.is_terminal() {
                    watched.insert(r.id.clone(), Seen::of(&r));
                }
                order.push(Value::String(r.id.clone()));
            }
        }
        let meta = json!({ META_SUBSCRIPTION_ID: subscription });
        peer.notify(
            "notifications/subscriptions/acknowledged".into(),
            json!({ "notifications": { "taskIds": order }, "_meta": meta }),
        )
        .await;
        let closed = peer.closed();
        tokio::pin!(closed);
        let mut resync = self.resync_period().map(|period| {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        while !watched.is_empty() {
            let tick = async {
                match resync.as_mut() {
                    Some(tick) => {
                        tick.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let record = tokio::select! {
                snapshot = snapshots.recv() => match snapshot {
                    Ok(r) => r,
                    // Too slow to see every write: catch up from the store.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.resync(&peer, &meta, &mut watched, owner.as_deref()).await?;
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                change = changes.recv() => {
                    match change {
                        Ok(TaskChange::Updated { id, version, .. }) => {
                            if watched.get(&id).is_some_and(|seen| seen.version < version) {
                                self.refresh(&peer, &meta, &mut watched, owner.as_deref(), id).await?;
                            }
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                            self.resync(&peer, &meta, &mut watched, owner.as_deref()).await?;
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                    continue;
                }
                () = tick => {
                    self.resync(&peer, &meta, &mut watched, owner.as_deref()).await?;
                    continue;
                }
                () = &mut closed => break,
            };
            self.push_change(&peer, &meta, &mut watched, &record).await;
        }
        Ok(())
    }

    /// Re-read every watched task and push what changed.
    async fn resync(
        &self,
        peer: &Peer,
        meta: &Value,
        watched: &mut HashMap<String, Seen>,
        owner: Option<&str>,
    ) -> Result<(), JsonRpcError> {
        let ids: Vec<String> = watched.keys().cloned().collect();
        for task_id in ids {
            self.refresh(peer, meta, watched, owner, task_id).await?;
        }
        Ok(())
    }

    /// Re-read one watched task and push it if it changed; stop watching it
    /// if it is gone.
    async fn refresh(
        &self,
        peer: &Peer,
        meta: &Value,
        watched: &mut HashMap<String, Seen>,
        owner: Option<&str>,
        task_id: String,
    ) -> Result<(), JsonRpcError> {
        match self.lookup(&task_id, owner, Era::Modern).await? {
            Some(r) => self.push_change(peer, meta, watched, &r).await,
            None => {
                watched.remove(&task_id);
            }
        }
        Ok(())
    }

    /// Notify one watched task's change, once per version.
    async fn push_change(
        &self,
        peer: &Peer,
        meta: &Value,
        watched: &mut HashMap<String, Seen>,
        r: &TaskRecord,
    ) {
        let Some(seen) = watched.get_mut(&r.id) else {
            return;
        };
        if r.version <= seen.version {
            return;
        }
        let now = Seen::of(r);
        // A lease renewal is a new version that shows nothing new.
        let visible = (now.status, now.updated_at_ms, now.round)
            != (seen.status, seen.updated_at_ms, seen.round);
        *seen = now;
        if !visible {
            return;
        }
        if r.status.is_terminal() {
            watched.remove(&r.id);
        }
        let mut params = self.detailed_value(r, None);
        params["_meta"] = meta.clone();
        peer.notify("notifications/tasks".into(), params).await;
    }

    /// Start the background reaper once, on the runtime of the first
    /// intercepted request. It holds only a weak reference, so it ends when
    /// the last layer and service are dropped.
    pub(crate) fn ensure_reaper(self: &Arc<Self>) {
        self.reaper.get_or_init(|| {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let weak = Arc::downgrade(self);
                let period = self.cfg.reap_interval;
                handle.spawn(reap_loop(weak.clone(), period));
                if let Some(feed) = self.store.changes() {
                    self.has_feed
                        .store(true, std::sync::atomic::Ordering::Release);
                    handle.spawn(change_loop(weak, feed));
                }
            }
        });
    }

    /// A change the store reported, maybe written by another replica: a
    /// cancel stops this process's handler of the task now (the heartbeat
    /// would, a period later); subscribers and waiters re-read.
    fn on_change(&self, change: TaskChange) {
        if let TaskChange::Updated {
            id,
            status: TaskStatus::Cancelled,
            ..
        } = &change
        {
            if let Some(local) = self.locals().get(id) {
                if !local.token.is_cancelled() {
                    info!(parent: &local.span, "cancelled on another replica");
                    local.token.cancel();
                }
            }
        }
        if self.changes.receiver_count() > 0 {
            let _ = self.changes.send(change);
        }
    }

    /// How often a subscription re-reads its tasks when the store reports
    /// no changes (another process may write them): the lease heartbeat's
    /// period.
    fn resync_period(&self) -> Option<Duration> {
        (!self.has_feed.load(std::sync::atomic::Ordering::Acquire))
            .then(|| (self.cfg.lease_ttl / 3).max(Duration::from_millis(10)))
    }

    async fn reap_once(&self) {
        loop {
            match self.store.delete_expired(self.now_ms(), REAP_BATCH).await {
                Ok(ids) => {
                    for id in &ids {
                        let local = self.forget(id);
                        crate::metrics::expired(local.as_ref().map(|l| l.status));
                        if let Some(local) = local {
                            // Expiry is a cancellation signal for a handler
                            // that is still running.
                            local.token.cancel();
                            info!(parent: &local.span, "task expired");
                        }
                    }
                    if ids.len() < REAP_BATCH {
                        return;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "reaping expired tasks failed; will retry");
                    return;
                }
            }
        }
    }

    /// Look a task up for a caller: absent, expired, of another owner or of
    /// another era all read as `None`.
    async fn lookup(
        &self,
        id: &str,
        owner: Option<&str>,
        era: Era,
    ) -> Result<Option<Arc<TaskRecord>>, JsonRpcError> {
        visible(self.store.get(id, self.now_ms()).await, owner, era)
    }

    fn metadata(&self, r: &TaskRecord) -> TaskMetadata {
        TaskMetadata::new(
            r.id.clone(),
            rfc3339(r.created_at_ms),
            rfc3339(r.updated_at_ms),
            r.ttl_ms,
        )
        .with_poll_interval_ms(r.poll_interval_ms)
        .with_status_message(r.status_message.clone())
    }

    /// The 2026-07-28 view of a record, as the typed model; the wire body
    /// is written by [`detailed_json`], which a test holds to it.
    #[cfg(test)]
    pub(crate) fn detailed(&self, r: &TaskRecord) -> crate::protocol::DetailedTask {
        use crate::protocol::DetailedTask;
        let metadata = self.metadata(r);
        match r.status {
            TaskStatus::Working => DetailedTask::working(metadata),
            TaskStatus::InputRequired => DetailedTask::input_required(
                metadata,
                r.input_requests
                    .iter()
                    .map(|(k, p)| (k.clone(), p.request.clone()))
                    .collect(),
            ),
            TaskStatus::Completed => match &r.outcome {
                Some(TaskOutcome::Result(result)) => {
                    DetailedTask::completed(metadata, result.to_object())
                }
                _ => DetailedTask::completed(metadata, Map::new()),
            },
            TaskStatus::Failed => match &r.outcome {
                Some(TaskOutcome::Error(e)) => DetailedTask::failed(metadata, e.clone()),
                _ => DetailedTask::failed(metadata, JsonRpcError::internal("the task failed")),
            },
            TaskStatus::Cancelled => DetailedTask::cancelled(metadata),
        }
    }

    /// The 2026-07-28 body of a record as a value, with `resultType` when
    /// given: [`Shared::detailed_json`] parsed.
    fn detailed_value(&self, r: &TaskRecord, result_type: Option<&str>) -> Value {
        serde_json::from_str(&detailed_json(r, result_type)).unwrap_or_default()
    }

    // ----- tasks/get, tasks/update, tasks/cancel (2026-07-28) -----

    pub(crate) async fn tasks_get(&self, req: JsonRpcRequest, era: Era) -> JsonRpcResponse {
        let answer = async {
            let task_id = task_id_param(&req)?;
            let owner = self.owner_of(&req);
            let record = self.lookup(task_id, owner.as_deref(), era).await?;
            self.get_body(record, era)
        };
        let answer = answer.await;
        get_reply(req, answer)
    }

    /// `tasks/get` answered without waiting if the store can read so, or
    /// the request back.
    pub(crate) fn tasks_get_ready(
        &self,
        req: JsonRpcRequest,
        era: Era,
    ) -> Result<JsonRpcResponse, JsonRpcRequest> {
        let answer = match task_id_param(&req) {
            Err(e) => Err(e),
            Ok(task_id) => match self.store.get_ready(task_id, self.now_ms()) {
                None => return Err(req),
                Some(found) => {
                    let owner = self.owner_of(&req);
                    visible(found, owner.as_deref(), era).and_then(|r| self.get_body(r, era))
                }
            },
        };
        Ok(get_reply(req, answer))
    }

    /// The `tasks/get` result of what a lookup found.
    fn get_body(&self, record: Option<Arc<TaskRecord>>, era: Era) -> Result<String, JsonRpcError> {
        let record = record.ok_or_else(task_not_found)?;
        Ok(match era {
            Era::Legacy => serde_json::to_string(&self.legacy_task(&record)).unwrap_or_default(),
            _ => detailed_json(&record, Some("complete")),
        })
    }

    // ----- tasks/result and tasks/list (2025-11-25) -----

    /// `tasks/result`: wait until the task is terminal, woken by task events
    /// (and by its expiry), then answer with its result or its error. While
    /// the task waits for input and the transport gave a [`Peer`], send its
    /// input requests to the client as real requests and feed the answers
    /// back, exactly as `tasks/update` does.
    pub(crate) async fn tasks_result<S>(
        self: Arc<Self>,
        svc: S,
        req: JsonRpcRequest,
    ) -> JsonRpcResponse
    where
        S: InnerService,
    {
        let id = req.id.clone();
        reply(id, self.result_inner(svc, &req).await)
    }

    async fn result_inner<S>(
        self: &Arc<Self>,
        svc: S,
        req: &JsonRpcRequest,
    ) -> Result<Value, JsonRpcError>
    where
        S: InnerService,
    {
        let task_id = task_id_param(req)?;
        let owner = self.owner_of(req);
        let peer = req.extensions.get::<Peer>().cloned();
        let mut events = self.events.subscribe();
        let mut changes = self.changes.subscribe();
        let mut notified: Option<(TaskStatus, u64)> = None;
        loop {
            let record = self
                .lookup(task_id, owner.as_deref(), Era::Legacy)
                .await?
                .ok_or_else(task_not_found)?;
            if let Some(peer) = &peer {
                if notified.is_some() && notified != Some((record.status, record.version)) {
                    let params =
                        serde_json::to_value(self.legacy_task(&record)).unwrap_or_default();
                    peer.notify("notifications/tasks/status".into(), params)
                        .await;
                }
            }
            notified = Some((record.status, record.version));
            match (record.status, &record.outcome) {
                (TaskStatus::Completed | TaskStatus::Failed, Some(TaskOutcome::Result(result))) => {
                    let mut result = result.to_object();
                    let meta = result
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(meta) = meta {
                        meta.insert(META_RELATED_TASK.into(), json!({ "taskId": record.id }));
                    }
                    return Ok(Value::Object(result));
                }
                (TaskStatus::Failed, Some(TaskOutcome::Error(e))) => return Err(e.clone()),
                (status, _) if status.is_terminal() => {
                    return Err(JsonRpcError::new(
                        crate::jsonrpc::code::INTERNAL_ERROR,
                        format!("The task ended {status} and has no result"),
                    )
                    .with_data(json!({ "taskId": record.id, "status": status })))
                }
                (TaskStatus::InputRequired, _) if peer.is_some() => {
                    if let Some(peer) = &peer {
                        self.deliver_inputs(svc.clone(), peer, &record, owner.as_deref())
                            .await?;
                    }
                    continue;
                }
                _ => {}
            }
            // Wait for a change of this task, or its expiry.
            let expiry = record.expires_at_ms().map(|at| {
                let left = u64::try_from(at.saturating_sub(self.now_ms())).unwrap_or(0);
                tokio::time::Instant::now() + Duration::from_millis(left)
            });
            let expired = async {
                match expiry {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(expired);
            // Without a change feed, another replica's write shows up only
            // when read again.
            let resync = async {
                match self.resync_period() {
                    Some(period) => tokio::time::sleep(period).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(resync);
            loop {
                tokio::select! {
                    () = &mut resync => break,
                    event = events.recv() => match event {
                        Ok(e) if e.task_id != record.id => continue,
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            return Err(JsonRpcError::internal("the task layer is shutting down"))
                        }
                    },
                    change = changes.recv() => match change {
                        Ok(TaskChange::Updated { id, version, .. })
                            if id != record.id || version <= record.version => continue,
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            return Err(JsonRpcError::internal("the task layer is shutting down"))
                        }
                    },
                    () = &mut expired => break,
                }
            }
        }
    }

    /// Send each outstanding input request of a 2025-11-25 task to the
    /// client through `peer`, tagged with the related-task `_meta`, and
    /// record each answer as it comes.
    async fn deliver_inputs<S>(
        self: &Arc<Self>,
        svc: S,
        peer: &Peer,
        record: &TaskRecord,
        owner: Option<&str>,
    ) -> Result<(), JsonRpcError>
    where
        S: InnerService,
    {
        for (key, pending) in &record.input_requests {
            let mut params = pending.request.params.clone().unwrap_or_default();
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(META_RELATED_TASK.into(), json!({ "taskId": record.id }));
            }
            let answer = peer
                .request(pending.request.method.clone(), Value::Object(params))
                .await
                .map_err(|client_error| {
                    // The client refused or failed the input request: say so
                    // as the layer, so it cannot read as "no tasks/result".
                    JsonRpcError::internal("the client did not answer the task's input request")
                        .with_data(json!({
                            "taskId": record.id,
                            "status": TaskStatus::InputRequired,
                            "clientError": client_error,
                        }))
                })?;
            let mut answers = Map::new();
            answers.insert(key.clone(), answer);
            self.cfg.limits.check_answers(&answers)?;
            self.accept_answers(svc.clone(), &record.id, owner, Era::Legacy, &answers)
                .await?;
        }
        Ok(())
    }

    /// `tasks/list`: the caller's 2025-11-25 tasks, newest first.
    pub(crate) async fn tasks_list(&self, req: JsonRpcRequest) -> JsonRpcResponse {
        let id = req.id.clone();
        reply(id, self.list_inner(&req).await)
    }

    async fn list_inner(&self, req: &JsonRpcRequest) -> Result<Value, JsonRpcError> {
        let after = match req.params_object().and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(
                decode_cursor(c).ok_or_else(|| JsonRpcError::invalid_params("Invalid cursor"))?,
            ),
            Some(_) => return Err(JsonRpcError::invalid_params("\"cursor\" must be a string")),
        };
        let owner = self.owner_of(req);
        let page = self.cfg.list_page_size.max(1);
        let records = self
            .store
            .list(
                owner.as_deref(),
                after.as_ref().map(|(c, id)| (*c, id.as_str())),
                page + 1,
                self.now_ms(),
            )
            .await
            .map_err(|e| match e {
                store::Error::Unsupported(_) => JsonRpcError::method_not_found("tasks/list"),
                e => store_failure(&e),
            })?;
        let more = records.len() > page;
        let shown = &records[..records.len().min(page)];
        let tasks: Vec<Value> = shown
            .iter()
            .filter(|r| r.era == Era::Legacy)
            .map(|r| serde_json::to_value(self.legacy_task(r)).unwrap_or_default())
            .collect();
        let mut out = json!({ "tasks": tasks });
        if more {
            if let Some(last) = shown.last() {
                out["nextCursor"] = Value::String(encode_cursor(last.created_at_ms, &last.id));
            }
        }
        Ok(out)
    }

    pub(crate) async fn tasks_update<S>(
        self: Arc<Self>,
        svc: S,
        req: JsonRpcRequest,
    ) -> JsonRpcResponse
    where
        S: InnerService,
    {
        let id = req.id.clone();
        let answered = async move {
            let task_id = task_id_param(&req)?;
            let answers = match req.params_object().and_then(|p| p.get("inputResponses")) {
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(JsonRpcError::invalid_params(
                        "\"inputResponses\" must be an object",
                    ))
                }
                None => return Err(JsonRpcError::invalid_params("missing \"inputResponses\"")),
            };
            self.cfg.limits.check_answers(answers)?;
            let owner = self.owner_of(&req);
            // Boxed, like the handler run inside it: futures of 1 KB and more
            // are large allocations, slower to make and free.
            Box::pin(self.accept_answers(svc, task_id, owner.as_deref(), Era::Modern, answers))
                .await
        };
        match answered.await {
            Ok(()) => ack(id),
            Err(e) => JsonRpcResponse::error(id, e),
        }
    }

    /// Merge the outstanding ones among `answers` into the task, and when
    /// that answers the last outstanding key, resume the handler. Only the
    /// writer that wins `input_required → working` resumes it: exactly once
    /// per round, however many answers race.
    async fn accept_answers<S>(
        self: &Arc<Self>,
        svc: S,
        task_id: &str,
        owner: Option<&str>,
        era: Era,
        answers: &Map<String, Value>,
    ) -> Result<(), JsonRpcError>
    where
        S: InnerService,
    {
        for _ in 0..MAX_CAS_RETRIES {
            let record = self
                .lookup(task_id, owner, era)
                .await?
                .ok_or_else(task_not_found)?;
            let Some(next) = self.apply_answers(&record, answers) else {
                // Nothing outstanding was answered: ack and change nothing
                // (R33, R40).
                return Ok(());
            };
            if next.input_responses.len() > self.cfg.limits.max_accumulated_responses {
                return Err(JsonRpcError::invalid_params(format!(
                    "the task has accumulated more than {} answers",
                    self.cfg.limits.max_accumulated_responses
                )));
            }
            let next = Arc::new(next);
            match self
                .store
                .replace_shared(Arc::clone(&next), record.version)
                .await
            {
                Ok(()) if next.status == TaskStatus::Working => {
                    let local = self.local(&next);
                    self.publish(record.status, &next, Some(&local));
                    let request = self.resume_request(&next, &local.token);
                    let fut: InnerFuture<S::Error> = Box::pin(svc.clone().oneshot(request));
                    let resumed = Some(tokio::time::Instant::now());
                    let fence = next.lease.as_ref().map_or(0, |l| l.fence);
                    let turn = Turn {
                        fence,
                        resumed_at: resumed,
                        state_only: 0,
                    };
                    Box::pin(self.drive(svc, next.id.clone(), local, fut, turn, next.era)).await;
                    return Ok(());
                }
                Ok(()) => {
                    self.publish(record.status, &next, self.local_of(&next.id).as_ref());
                    return Ok(());
                }
                Err(store::Error::Conflict) => continue,
                Err(store::Error::NotFound) => return Err(task_not_found()),
                Err(e) => return Err(store_failure(&e)),
            }
        }
        Err(JsonRpcError::internal(
            "the task is changing too fast; try again",
        ))
    }

    /// The next version of `record` with the outstanding answers merged in,
    /// or `None` when no outstanding key is answered.
    fn apply_answers(
        &self,
        record: &TaskRecord,
        answers: &Map<String, Value>,
    ) -> Option<TaskRecord> {
        if record.status != TaskStatus::InputRequired
            || !answers
                .keys()
                .any(|k| record.input_requests.contains_key(k))
        {
            return None;
        }
        let mut next = next_without_inputs(record, self.now_ms());
        for (key, pending) in &record.input_requests {
            match answers.get(key) {
                // A later answer to the same inner key wins.
                Some(answer) => {
                    next.input_responses
                        .insert(pending.inner_key.clone(), answer.clone());
                }
                None => {
                    next.input_requests.insert(key.clone(), pending.clone());
                }
            }
        }
        if next.input_requests.is_empty() {
            next.status = TaskStatus::Working;
            next.status_message = None;
            next.round += 1;
            // The writer that wins this transition runs the handler.
            next.lease = Some(self.new_lease(record.lease.as_ref()));
        }
        Some(next)
    }

    pub(crate) async fn tasks_cancel(&self, req: JsonRpcRequest, era: Era) -> JsonRpcResponse {
        let id = req.id.clone();
        match self.cancel_inner(&req, era).await {
            Ok(Some(record)) if era == Era::Legacy => JsonRpcResponse::result(
                id,
                serde_json::to_value(self.legacy_task(&record)).unwrap_or_default(),
            ),
            Ok(_) => ack(id),
            Err(e) => JsonRpcResponse::error(id, e),
        }
    }

    async fn cancel_inner(
        &self,
        req: &JsonRpcRequest,
        era: Era,
    ) -> Result<Option<TaskRecord>, JsonRpcError> {
        let task_id = task_id_param(req)?;
        let owner = self.owner_of(req);
        for _ in 0..MAX_CAS_RETRIES {
            let record = self
                .lookup(task_id, owner.as_deref(), era)
                .await?
                .ok_or_else(task_not_found)?;
            if record.status.is_terminal() {
                return match era {
                    // Idempotent in 2026-07-28 (R45).
                    Era::Modern => Ok(None),
                    // An error in 2025-11-25 (R71).
                    _ => Err(JsonRpcError::invalid_params(format!(
                        "Cannot cancel task: already in terminal status '{}'",
                        record.status
                    ))),
                };
            }
            let mut next = next_finished(&record, self.now_ms());
            finish(
                &mut next,
                TaskStatus::Cancelled,
                None,
                Some("The task was cancelled by the client.".into()),
            );
            next.cancel_requested = true;
            match self.store.replace(next.clone(), record.version).await {
                Ok(()) => {
                    let local = self.forget(&next.id);
                    self.publish(record.status, &next, local.as_ref());
                    if let Some(local) = local {
                        local.token.cancel();
                    }
                    return Ok(Some(next));
                }
                Err(store::Error::Conflict) => continue,
                Err(store::Error::NotFound) => return Err(task_not_found()),
                Err(e) => return Err(store_failure(&e)),
            }
        }
        Err(JsonRpcError::internal(
            "the task is changing too fast; try again",
        ))
    }

    /// The 2025-11-25 view of a record.
    pub(crate) fn legacy_task(&self, r: &TaskRecord) -> crate::protocol::Task {
        let m = self.metadata(r);
        crate::protocol::Task {
            task_id: m.task_id,
            status: r.status,
            status_message: m.status_message,
            created_at: m.created_at,
            last_updated_at: m.last_updated_at,
            ttl: m.ttl_ms,
            poll_interval: m.poll_interval_ms,
        }
    }

    /// The answer to the `tools/call` that made the task, as JSON text.
    fn create_result(&self, r: &TaskRecord) -> String {
        match r.era {
            Era::Legacy => {
                serde_json::to_string(&json!({ "task": self.legacy_task(r) })).unwrap_or_default()
            }
            _ => detailed_json(r, Some("task")),
        }
    }

    // ----- leases, heartbeat, recovery -----

    /// A lease for this replica, taking over from `prev`.
    fn new_lease(&self, prev: Option<&Lease>) -> Lease {
        Lease {
            holder: self.replica.clone(),
            fence: prev.map_or(1, |l| l.fence + 1),
            until_ms: self.now_ms().saturating_add(ms(self.cfg.lease_ttl)),
        }
    }

    fn holds(&self, record: &TaskRecord, fence: u64) -> bool {
        record
            .lease
            .as_ref()
            .is_some_and(|l| l.holder == self.replica && l.fence == fence)
    }

    /// Keep a clone of the inner service, type-erased, for recovering
    /// orphaned tasks (the first intercepted request registers it).
    pub(crate) fn register_invoker<S>(&self, svc: &S)
    where
        S: InnerService,
    {
        use std::sync::atomic::Ordering;
        if self.invoker_set.load(Ordering::Acquire) || self.cfg.recovery != Recovery::Rerun {
            return;
        }
        let mut slot = self.invoker.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(tower::util::BoxCloneService::new(
                svc.clone().map_err(|_| InnerFailed),
            ));
            self.invoker_set.store(true, Ordering::Release);
        }
    }

    /// Renew the runner's lease. `false` when the runner must stop: the
    /// task ended or left `working` (a cancel on any replica), expired, or
    /// another replica took it over.
    async fn heartbeat(&self, id: &str, fence: u64) -> bool {
        let record = match self.store.get(id, self.now_ms()).await {
            Ok(Some(r)) => r,
            Ok(None) => return false,
            Err(e) => {
                warn!(error = %e, "heartbeat cannot read the task; will retry");
                return true;
            }
        };
        if record.status != TaskStatus::Working {
            return false;
        }
        if !self.holds(&record, fence) {
            crate::metrics::lease_lost();
            warn!("another replica took this task over; stopping its handler here");
            return false;
        }
        // A renewal is not a change clients see: `lastUpdatedAt` stays.
        let mut next = (*record).clone();
        next.version += 1;
        if let Some(lease) = &mut next.lease {
            lease.until_ms = self.now_ms().saturating_add(ms(self.cfg.lease_ttl));
        }
        match self.store.replace(next, record.version).await {
            Ok(()) | Err(store::Error::Conflict) => true,
            Err(store::Error::NotFound) => false,
            Err(e) => {
                warn!(error = %e, "cannot renew the task's lease; will retry");
                true
            }
        }
    }

    /// Recover `working` tasks whose runner died (lease ran out), by policy:
    /// fail them honestly, or re-run them from their stored request.
    async fn recover_orphans(self: &Arc<Self>) {
        let orphans = match self.store.orphans(self.now_ms(), 64).await {
            Ok(o) => o,
            Err(store::Error::Unsupported(_)) => return,
            Err(e) => {
                warn!(error = %e, "cannot look for orphaned tasks; will retry");
                return;
            }
        };
        let invoker = self
            .invoker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for record in orphans {
            if record.status != TaskStatus::Working
                || record
                    .lease
                    .as_ref()
                    .is_some_and(|l| l.until_ms >= self.now_ms())
            {
                continue;
            }
            let mut next = record.next_version(self.now_ms());
            match (invoker.clone(), self.cfg.recovery) {
                (Some(svc), Recovery::Rerun) => {
                    next.lease = Some(self.new_lease(record.lease.as_ref()));
                    next.round += 1;
                    if self
                        .store
                        .replace(next.clone(), record.version)
                        .await
                        .is_ok()
                    {
                        info!(task_id = %next.id, "re-running an orphaned task");
                        let local = self.local(&next);
                        let request = self.resume_request(&next, &local.token);
                        let fut: InnerFuture<InnerFailed> = Box::pin(svc.clone().oneshot(request));
                        let fence = next.lease.as_ref().map_or(0, |l| l.fence);
                        let turn = Turn {
                            fence,
                            resumed_at: None,
                            state_only: 0,
                        };
                        self.spawn_runner(svc.clone(), next.id.clone(), local, fut, turn);
                    }
                }
                _ => {
                    let e = JsonRpcError::internal(
                        "the server running this task stopped or restarted before the task finished; it cannot be resumed",
                    );
                    fail(&mut next, e);
                    if self
                        .store
                        .replace(next.clone(), record.version)
                        .await
                        .is_ok()
                    {
                        let local = self.forget(&next.id);
                        self.publish(record.status, &next, local.as_ref());
                    }
                }
            }
        }
    }

    // ----- tools/call -----

    /// Run a `tools/call` that may become a task: wait up to the policy's
    /// window for the handler, answer synchronously (or with plain MRTR) if
    /// it finished, otherwise store a task and keep the handler running.
    pub(crate) async fn tools_call<S>(
        self: Arc<Self>,
        svc: S,
        call: ToolCall,
        policy: TaskPolicy,
        fut: S::Future,
    ) -> Result<JsonRpcResponse, S::Error>
    where
        S: InnerService,
    {
        let window = match policy {
            TaskPolicy::Auto { within } => within,
            _ => self.cfg.task_window,
        };
        let mut fut: InnerFuture<S::Error> = Box::pin(fut);
        // A 2025-11-25 client asked for a task itself: it gets one at once.
        let fut = if call.era == Era::Legacy {
            fut
        } else {
            // A zero window polls the handler once: tokio would round a
            // zero timeout up to its next 1 ms timer tick.
            let first = if window.is_zero() {
                std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(match fut.as_mut().poll(cx) {
                        std::task::Poll::Ready(out) => Ok(out),
                        std::task::Poll::Pending => Err(()),
                    })
                })
                .await
            } else {
                tokio::time::timeout(window, &mut fut).await.map_err(drop)
            };
            match first {
                Ok(Err(e)) => return Err(e),
                Ok(Ok(resp)) if is_mrtr(&resp) || matches!(policy, TaskPolicy::Auto { .. }) => {
                    return Ok(resp)
                }
                // A `Task` tool that has answered already: its task is
                // written once, finished.
                Ok(Ok(resp)) => return Box::pin(self.create_finished(Box::new(call), resp)).await,
                Err(()) => fut,
            }
        };
        // Boxed, the call too: the window above is all most `Auto` calls
        // need, and futures of 1 KB and more are large allocations, slower
        // to make and free (this one would be 1.6 KB).
        Box::pin(self.create_task(svc, Box::new(call), fut)).await
    }

    /// The record of a new task for `call`, `working` at version 1, or the
    /// error to answer if no id could be made.
    fn new_record(&self, call: &mut ToolCall) -> Result<TaskRecord, JsonRpcError> {
        let task_id = match new_task_id() {
            Ok(id) => id,
            Err(e) => {
                call.token.cancel();
                warn!(error = %e, "the OS random source failed; no task created");
                return Err(JsonRpcError::internal("cannot create a task id"));
            }
        };
        let now = self.now_ms();
        let mut record = TaskRecord::new(
            task_id,
            call.era,
            std::mem::take(&mut call.name),
            Value::Null,
            now,
            self.cfg.ttl_ms(call.requested_ttl),
        )
        .with_owner(call.owner.take());
        // Absent arguments are kept as `{}`.
        record.arguments = Some(
            call.kept
                .arguments
                .take()
                .map_or_else(|| JsonText::from_value(&json!({})), JsonText::from_written),
        );
        record.poll_interval_ms =
            Some(u64::try_from(self.cfg.poll_interval.as_millis()).unwrap_or(u64::MAX));
        record.meta = call.kept.meta.take().map(JsonText::from_written);
        // Answers given before the task existed seed the task's answers, so a
        // handler resumed from the top finds them again.
        record.input_responses = std::mem::take(&mut call.input_responses);
        record.request_state = call.request_state.take();
        Ok(record)
    }

    /// The task of a `tools/call` whose handler answered on its first poll
    /// (2026-07-28): written once, already finished, instead of `working`
    /// and then finished. Answered and announced as if it had been written
    /// twice: the answer shows the task `working`, and event listeners see
    /// `working` then the end.
    async fn create_finished<E>(
        self: Arc<Self>,
        mut call: Box<ToolCall>,
        resp: JsonRpcResponse,
    ) -> Result<JsonRpcResponse, E> {
        let working = match self.new_record(&mut call) {
            Ok(record) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        let mut done = next_finished(&working, working.created_at_ms);
        match Answer::from_output::<E>(Ok(resp)).bounded(self.cfg.limits.max_result_bytes) {
            // A 2026-07-28 tool error stays `completed` (R22).
            Answer::Result(result, _) => finish(
                &mut done,
                TaskStatus::Completed,
                Some(TaskOutcome::Result(result)),
                None,
            ),
            Answer::Error(e) => fail(&mut done, e),
            // Input requests were answered as MRTR before the task.
            Answer::Input { .. } | Answer::StateOnly(_) => fail(
                &mut done,
                JsonRpcError::internal("the tool asked for input in an unexpected way"),
            ),
        }
        let span = task_span(&working.id, &working.tool_name);
        let done = Arc::new(done);
        if let Err(e) = self.store.create_shared(Arc::clone(&done)).await {
            return Ok(JsonRpcResponse::error(call.id, store_failure(&e)));
        }
        info!(parent: &span, status = %working.status, "task created");
        self.announce(&working);
        let created = self.create_result(&working);
        crate::metrics::created(working.era);
        let local = Local {
            token: call.token.clone(),
            span,
            peer: None,
            status: working.status,
            owner: None,
        };
        self.publish(working.status, &done, Some(&local));
        Ok(JsonRpcResponse::trusted_text(call.id, created))
    }

    /// Store the task of a `tools/call` whose handler is running (or has
    /// answered, for a `Task` tool), answer with it, and run the handler.
    async fn create_task<S>(
        self: Arc<Self>,
        svc: S,
        call: Box<ToolCall>,
        fut: InnerFuture<S::Error>,
    ) -> Result<JsonRpcResponse, S::Error>
    where
        S: InnerService,
    {
        let mut call = call;
        let mut record = match self.new_record(&mut call) {
            Ok(record) => record,
            Err(e) => return Ok(JsonRpcResponse::error(call.id, e)),
        };
        record.lease = Some(self.new_lease(None));
        let span = task_span(&record.id, &record.tool_name);
        let record = Arc::new(record);
        if let Err(e) = self.store.create_shared(Arc::clone(&record)).await {
            // Dropping the handler's future stops it.
            call.token.cancel();
            return Ok(JsonRpcResponse::error(call.id, store_failure(&e)));
        }
        info!(parent: &span, status = %record.status, "task created");
        let local = Local {
            token: call.token,
            span,
            peer: call.peer,
            status: record.status,
            owner: record.owner.clone(),
        };
        self.track(&record.id, local.clone());
        self.announce(&record);
        let created = self.create_result(&record);
        crate::metrics::created(record.era);
        let fence = record.lease.as_ref().map_or(0, |l| l.fence);
        let turn = Turn {
            fence,
            resumed_at: None,
            state_only: 0,
        };
        Box::pin(self.drive(svc, record.id.clone(), local, fut, turn, record.era)).await;
        Ok(JsonRpcResponse::trusted_text(call.id, created))
    }

    /// The `tools/call` that re-invokes the handler from the top.
    fn resume_request(&self, r: &TaskRecord, token: &CancellationToken) -> JsonRpcRequest {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(r.tool_name.clone()));
        let arguments = r
            .arguments
            .as_ref()
            .map_or_else(|| json!({}), JsonText::to_value);
        params.insert("arguments".into(), arguments.clone());
        if !r.input_responses.is_empty() {
            let answers: Map<String, Value> = r
                .input_responses
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            params.insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(state) = &r.request_state {
            params.insert("requestState".into(), Value::String(state.clone()));
        }
        if let Some(meta) = &r.meta {
            params.insert("_meta".into(), meta.to_value());
        }
        let mut req = JsonRpcRequest::new(
            format!("mcp-task-layer:{}:{}", r.id, r.round),
            "tools/call",
            Value::Object(params),
        );
        let context =
            TaskResumeContext::new(r.tool_name.clone(), arguments, r.input_responses.clone())
                .with_cancellation_token(token.clone());
        req.extensions.insert(context);
        req.extensions.insert(token.clone());
        req.extensions.insert(TaskId(r.id.clone()));
        if let Some(owner) = &r.owner {
            req.extensions.insert(TaskOwner(owner.clone()));
        }
        req
    }

    fn spawn_runner<S>(
        self: &Arc<Self>,
        svc: S,
        id: String,
        local: Local,
        first: InnerFuture<S::Error>,
        turn: Turn,
    ) where
        S: InnerService,
    {
        let shared = Arc::clone(self);
        let span = local.span.clone();
        tokio::spawn(
            shared
                .run(svc, id, local.token, first, turn)
                .instrument(span),
        );
    }

    /// Run a task's handler: when `first` answers on its first poll, write
    /// the answer here and now (no runner, no handler task, no heartbeat);
    /// otherwise hand it to a runner. 2025-11-25 tasks always get a runner:
    /// their status notifications must not reach the client on the
    /// request that made (or answered) the task.
    async fn drive<S>(
        self: &Arc<Self>,
        svc: S,
        id: String,
        local: Local,
        mut first: InnerFuture<S::Error>,
        turn: Turn,
        era: Era,
    ) where
        S: InnerService,
    {
        let ready = match era {
            Era::Legacy => None,
            _ => poll_once(&mut first).await,
        };
        let Some(out) = ready else {
            self.spawn_runner(svc, id, local, first, turn);
            return;
        };
        drop(first);
        let mut state_only = turn.state_only;
        let next = Box::pin(self.settle(&id, out, &local.token, turn.fence, &mut state_only))
            .instrument(local.span.clone())
            .await;
        if let Some(at) = turn.resumed_at {
            crate::metrics::resumed(at.elapsed());
        }
        if let Next::Reinvoke(req) = next {
            let again: InnerFuture<S::Error> = Box::pin(svc.clone().oneshot(req));
            let turn = Turn {
                fence: turn.fence,
                resumed_at: None,
                state_only,
            };
            self.spawn_runner(svc, id, local, again, turn);
        }
    }

    /// Drive the handler until the task is terminal or waits for input. A
    /// tripped token gives the handler the cancel grace to stop on its own;
    /// then its future is dropped (aborted).
    async fn run<S>(
        self: Arc<Self>,
        svc: S,
        id: String,
        token: CancellationToken,
        first: InnerFuture<S::Error>,
        turn: Turn,
    ) where
        S: InnerService,
    {
        let Turn {
            fence,
            mut resumed_at,
            mut state_only,
        } = turn;
        let grace = self.cfg.cancel_grace;
        let mut cancelled_at: Option<tokio::time::Instant> = None;
        // The handler runs as a task of its own, so a panic in it fails
        // the task instead of leaving it `working` forever.
        let mut handler = tokio::spawn(first);
        let period = (self.cfg.lease_ttl / 3).max(Duration::from_millis(10));
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let give_up = async {
                match cancelled_at {
                    Some(at) => tokio::time::sleep_until(at + grace).await,
                    None => std::future::pending().await,
                }
            };
            let out = tokio::select! {
                // Notice the cancellation before the handler's answer to it.
                biased;
                () = token.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(tokio::time::Instant::now());
                    continue;
                }
                joined = &mut handler => match joined {
                    Ok(out) => out,
                    Err(e) => {
                        warn!(panicked = e.is_panic(), "the tool's handler died");
                        Ok(JsonRpcResponse::error(None, JsonRpcError::internal("the tool's handler died")))
                    }
                },
                _ = beat.tick(), if cancelled_at.is_none() => {
                    if !self.heartbeat(&id, fence).await {
                        // Cancelled or taken over elsewhere: stop here too.
                        token.cancel();
                    }
                    continue;
                }
                () = give_up => {
                    debug!("the handler outlived its cancel grace; aborting it");
                    handler.abort();
                    crate::metrics::cancel_stopped(grace);
                    return;
                }
            };
            if let Some(at) = cancelled_at {
                crate::metrics::cancel_stopped(at.elapsed());
            }
            let next = self.settle(&id, out, &token, fence, &mut state_only).await;
            if let Some(at) = resumed_at.take() {
                crate::metrics::resumed(at.elapsed());
            }
            match next {
                Next::Done => return,
                Next::Reinvoke(req) => handler = tokio::spawn(svc.clone().oneshot(req)),
            }
        }
    }

    /// Write what the handler answered. Loses every race to a terminal
    /// state written first (a cancel, an expiry).
    async fn settle<E>(
        &self,
        id: &str,
        out: Result<JsonRpcResponse, E>,
        token: &CancellationToken,
        fence: u64,
        state_only: &mut u32,
    ) -> Next {
        let answer = Answer::from_output(out).bounded(self.cfg.limits.max_result_bytes);
        for _ in 0..MAX_CAS_RETRIES {
            let record = match self.store.get(id, self.now_ms()).await {
                Ok(Some(r)) => r,
                Ok(None) => return Next::Done,
                Err(e) => {
                    warn!(error = %e, "cannot read the task to record the handler's answer");
                    return Next::Done;
                }
            };
            if record.status != TaskStatus::Working {
                return Next::Done;
            }
            if !self.holds(&record, fence) {
                // Fenced off: another replica runs this task now.
                crate::metrics::lease_lost();
                return Next::Done;
            }
            let now = self.now_ms();
            let refused = match &answer {
                Answer::Input { requests, .. } => {
                    undeclared(record.era, record.meta.as_ref(), requests)
                }
                _ => None,
            };
            let mut next = match &answer {
                // The new requests replace the old.
                Answer::Input { .. } if refused.is_none() => next_without_inputs(&record, now),
                Answer::StateOnly(_) if *state_only < MAX_STATE_ONLY_ROUNDS => {
                    record.next_version(now)
                }
                // Every other answer finishes the task.
                _ => next_finished(&record, now),
            };
            let mut reinvoke = false;
            match &answer {
                Answer::Result(result, tool_error) => {
                    // 2025-11-25 marks a tool error `failed` (R69); 2026-07-28
                    // keeps it `completed` (R22).
                    let status = if *tool_error && record.era == Era::Legacy {
                        TaskStatus::Failed
                    } else {
                        TaskStatus::Completed
                    };
                    finish(
                        &mut next,
                        status,
                        Some(TaskOutcome::Result(result.clone())),
                        None,
                    );
                }
                Answer::Error(e) => {
                    fail(&mut next, e.clone());
                }
                Answer::Input { requests, state } => match refused {
                    Some(error) => {
                        fail(&mut next, error);
                    }
                    None => {
                        expose_keys(&mut next, requests);
                        next.status = TaskStatus::InputRequired;
                        next.status_message = Some("The task is waiting for input.".into());
                        next.request_state = state.clone();
                    }
                },
                Answer::StateOnly(state) if *state_only < MAX_STATE_ONLY_ROUNDS => {
                    next.request_state = Some(state.clone());
                    next.round += 1;
                    if let Some(lease) = &mut next.lease {
                        lease.until_ms = self.now_ms().saturating_add(ms(self.cfg.lease_ttl));
                    }
                    reinvoke = true;
                }
                Answer::StateOnly(_) => {
                    let e =
                        JsonRpcError::internal("the tool kept answering with requestState alone");
                    fail(&mut next, e);
                }
            }
            let next = Arc::new(next);
            match self
                .store
                .replace_shared(Arc::clone(&next), record.version)
                .await
            {
                Ok(()) if reinvoke => {
                    *state_only += 1;
                    return Next::Reinvoke(self.resume_request(&next, token));
                }
                Ok(()) => {
                    let local = if next.status.is_terminal() {
                        self.forget(id)
                    } else {
                        self.local_of(id)
                    };
                    self.publish(record.status, &next, local.as_ref());
                    return Next::Done;
                }
                Err(store::Error::Conflict) => continue,
                Err(e) => {
                    warn!(error = %e, "cannot record the handler's answer");
                    return Next::Done;
                }
            }
        }
        Next::Done
    }
}

/// Poll a handler's future once on the current task: its output if it is
/// ready. A panic in it reads as the handler dying, as in a runner.
async fn poll_once<E>(fut: &mut InnerFuture<E>) -> Option<Result<JsonRpcResponse, E>> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::Poll;
    std::future::poll_fn(|cx| {
        Poll::Ready(
            match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Ready(out)) => Some(out),
                Ok(Poll::Pending) => None,
                Err(_) => {
                    warn!(panicked = true, "the tool's handler died");
                    Some(Ok(JsonRpcResponse::error(
                        None,
                        JsonRpcError::internal("the tool's handler died"),
                    )))
                }
            },
        )
    })
    .await
}

/// What a handler's answer means for its task.
enum Answer {
    /// The result object as stored, and whether it is a tool error.
    Result(JsonText, bool),
    Error(JsonRpcError),
    Input {
        requests: std::collections::BTreeMap<String, InputRequest>,
        state: Option<String>,
    },
    StateOnly(String),
}

impl Answer {
    /// A result or error too large to store fails the task instead.
    fn bounded(self, max_bytes: usize) -> Self {
        let size = match &self {
            Answer::Result(r, _) => r.get().len(),
            Answer::Error(e) => e.message.len() + e.data.as_ref().map_or(0, json_size),
            Answer::Input { requests, .. } => requests
                .values()
                .map(|r| {
                    r.method.len()
                        + r.params
                            .as_ref()
                            .map_or(0, |p| p.iter().map(|(k, v)| k.len() + json_size(v)).sum())
                })
                .sum(),
            Answer::StateOnly(s) => s.len(),
        };
        if size > max_bytes {
            Answer::Error(JsonRpcError::internal(format!(
                "the tool's answer is larger than {max_bytes} bytes and cannot be stored"
            )))
        } else {
            self
        }
    }

    fn from_output<E>(out: Result<JsonRpcResponse, E>) -> Self {
        let value = match out {
            Err(_) => return Answer::Error(JsonRpcError::internal("the tool's service failed")),
            Ok(resp) => match resp.into_payload() {
                Err(e) => return Answer::Error(e),
                Ok(v) => v,
            },
        };
        let Value::Object(mut result) = value else {
            return Answer::Error(JsonRpcError::internal(
                "the tool returned a non-object result",
            ));
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            let tool_error = result.get("isError") == Some(&Value::Bool(true));
            return Answer::Result(JsonText::from(result), tool_error);
        }
        let state = match result.remove("requestState") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let requests = match result.remove("inputRequests") {
            None | Some(Value::Null) => Default::default(),
            Some(v) => {
                match serde_json::from_value::<std::collections::BTreeMap<String, InputRequest>>(v)
                {
                    Ok(r) => r,
                    Err(_) => {
                        return Answer::Error(JsonRpcError::internal(
                            "the tool returned malformed inputRequests",
                        ))
                    }
                }
            }
        };
        match (requests.is_empty(), state) {
            (false, state) => Answer::Input { requests, state },
            (true, Some(state)) => Answer::StateOnly(state),
            (true, None) => Answer::Error(JsonRpcError::internal(
                "the tool asked for input without inputRequests or requestState",
            )),
        }
    }
}

/// What a read found, as a caller may see it: absent, expired, of another
/// owner or of another era all read as `None`.
fn visible(
    found: store::Result<Option<Arc<TaskRecord>>>,
    owner: Option<&str>,
    era: Era,
) -> Result<Option<Arc<TaskRecord>>, JsonRpcError> {
    match found {
        Ok(Some(r)) if r.owner.as_deref() == owner && r.era == era => Ok(Some(r)),
        Ok(_) => Ok(None),
        Err(e) => Err(store_failure(&e)),
    }
}

/// The answer to `req`.
fn get_reply(req: JsonRpcRequest, answer: Result<String, JsonRpcError>) -> JsonRpcResponse {
    match answer {
        Ok(json) => JsonRpcResponse::trusted_text(req.id, json),
        Err(e) => JsonRpcResponse::error(req.id, e),
    }
}

/// `ms` as a quoted RFC 3339 timestamp, as [`rfc3339`] writes it.
fn write_rfc3339(out: &mut String, ms: i64) {
    write_stamp(out, ms, rfc3339_digits(ms).as_ref());
}

/// `ms` quoted, from its digits if [`rfc3339_digits`] gave them.
fn write_stamp(out: &mut String, ms: i64, digits: Option<&[u8; 24]>) {
    out.push('"');
    match digits.and_then(|d| std::str::from_utf8(d).ok()) {
        Some(digits) => out.push_str(digits),
        None => out.push_str(&rfc3339_formatted(ms)),
    }
    out.push('"');
}

/// `n` in decimal (without `fmt`'s machinery, on every read).
fn write_u64(out: &mut String, mut n: u64) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        // A digit: `n % 10 < 10`.
        digits[at] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
}

/// The 2026-07-28 body of a record (`DetailedTask`), with `resultType`
/// when given, written field by field: the stored result text is copied in
/// as it is. The same JSON as serializing [`Shared::detailed`] (a test
/// holds them together).
fn detailed_json(r: &TaskRecord, result_type: Option<&str>) -> String {
    // Room for everything but input requests and errors: one allocation.
    let extra = match &r.outcome {
        Some(TaskOutcome::Result(text)) => text.get().len(),
        _ => 0,
    } + r.id.len()
        + r.status_message.as_ref().map_or(0, String::len);
    let mut out = String::with_capacity(256 + extra);
    out.push('{');
    if let Some(rt) = result_type {
        out.push_str("\"resultType\":");
        write_json_str(&mut out, rt);
        out.push(',');
    }
    out.push_str("\"taskId\":");
    write_json_str(&mut out, &r.id);
    out.push_str(",\"status\":");
    write_json_str(&mut out, r.status.as_str());
    if let Some(msg) = &r.status_message {
        out.push_str(",\"statusMessage\":");
        write_json_str(&mut out, msg);
    }
    out.push_str(",\"createdAt\":");
    let created = rfc3339_digits(r.created_at_ms);
    write_stamp(&mut out, r.created_at_ms, created.as_ref());
    out.push_str(",\"lastUpdatedAt\":");
    if r.updated_at_ms == r.created_at_ms {
        // A task unchanged since it was made: formatted once.
        write_stamp(&mut out, r.created_at_ms, created.as_ref());
    } else {
        write_rfc3339(&mut out, r.updated_at_ms);
    }
    out.push_str(",\"ttlMs\":");
    match r.ttl_ms {
        Some(ttl) => write_u64(&mut out, ttl),
        None => out.push_str("null"),
    }
    if let Some(p) = r.poll_interval_ms {
        out.push_str(",\"pollIntervalMs\":");
        write_u64(&mut out, p);
    }
    match (r.status, &r.outcome) {
        (TaskStatus::InputRequired, _) => {
            out.push_str(",\"inputRequests\":{");
            for (i, (key, pending)) in r.input_requests.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_str(&mut out, key);
                out.push(':');
                // Strings and JSON values only: cannot fail.
                out.push_str(&serde_json::to_string(&pending.request).unwrap_or_default());
            }
            out.push('}');
        }
        (TaskStatus::Completed, Some(TaskOutcome::Result(result))) => {
            out.push_str(",\"result\":");
            out.push_str(result.get());
        }
        (TaskStatus::Completed, _) => out.push_str(",\"result\":{}"),
        (TaskStatus::Failed, outcome) => {
            let fallback;
            let error = match outcome {
                Some(TaskOutcome::Error(e)) => e,
                _ => {
                    fallback = JsonRpcError::internal("the task failed");
                    &fallback
                }
            };
            out.push_str(",\"error\":");
            out.push_str(&serde_json::to_string(error).unwrap_or_default());
        }
        _ => {}
    }
    out.push('}');
    out
}

/// `r.next_version(now_ms)` for a write that [`finish`]es the task: what
/// `finish` clears (arguments, `_meta`, answers, request state, outcome,
/// lease) is not copied.
fn next_finished(r: &TaskRecord, now_ms: i64) -> TaskRecord {
    TaskRecord {
        id: r.id.clone(),
        owner: r.owner.clone(),
        era: r.era,
        status: r.status,
        status_message: r.status_message.clone(),
        created_at_ms: r.created_at_ms,
        updated_at_ms: r.updated_at_ms.max(now_ms),
        ttl_ms: r.ttl_ms,
        poll_interval_ms: r.poll_interval_ms,
        version: r.version + 1,
        tool_name: r.tool_name.clone(),
        arguments: None,
        meta: None,
        request_state: None,
        round: r.round,
        input_requests: Default::default(),
        issued_keys: Default::default(),
        input_responses: Default::default(),
        outcome: None,
        cancel_requested: r.cancel_requested,
        lease: None,
    }
}

/// `r.next_version(now_ms)` without its outstanding input requests, for a
/// write that replaces them (not copied only to be dropped).
fn next_without_inputs(r: &TaskRecord, now_ms: i64) -> TaskRecord {
    TaskRecord {
        arguments: r.arguments.clone(),
        meta: r.meta.clone(),
        request_state: r.request_state.clone(),
        issued_keys: r.issued_keys.clone(),
        input_responses: r.input_responses.clone(),
        outcome: r.outcome.clone(),
        lease: r.lease.clone(),
        ..next_finished(r, now_ms)
    }
}

/// Fail a record with `e`, its message the status message.
fn fail(next: &mut TaskRecord, e: JsonRpcError) {
    let message = Some(e.message.clone());
    finish(
        next,
        TaskStatus::Failed,
        Some(TaskOutcome::Error(e)),
        message,
    );
}

/// Make a record terminal and drop what only a resume needed.
fn finish(
    next: &mut TaskRecord,
    status: TaskStatus,
    outcome: Option<TaskOutcome>,
    message: Option<String>,
) {
    next.status = status;
    next.outcome = outcome;
    next.status_message = message;
    next.input_requests.clear();
    next.issued_keys.clear();
    next.input_responses.clear();
    next.arguments = None;
    next.meta = None;
    next.request_state = None;
    next.lease = None;
}

/// Give each inner key a key never shown before for this task: the inner
/// key itself the first time, then `key.2`, `key.3`, ... (R36, R37).
fn expose_keys(next: &mut TaskRecord, requests: &std::collections::BTreeMap<String, InputRequest>) {
    next.input_requests.clear();
    for (inner, request) in requests {
        let mut key = inner.clone();
        let mut n = 2u64;
        while next.issued_keys.contains(&key) {
            key = format!("{inner}.{n}");
            n += 1;
        }
        next.issued_keys.insert(key.clone());
        next.input_requests.insert(
            key,
            PendingInput {
                inner_key: inner.clone(),
                request: request.clone(),
            },
        );
    }
}

/// The `-32021` error if a request needs a client capability the original
/// 2026-07-28 call did not declare (R39).
fn undeclared(
    era: Era,
    meta: Option<&JsonText>,
    requests: &std::collections::BTreeMap<String, InputRequest>,
) -> Option<JsonRpcError> {
    // 2025-11-25 clients declare capabilities once, at `initialize`, which
    // the layer does not see; the transport's peer refuses what it cannot do.
    if era != Era::Modern {
        return None;
    }
    /// Only the capabilities out of the stored `_meta` text.
    #[derive(serde::Deserialize)]
    struct Declared {
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
        capabilities: Option<Value>,
    }
    let declared = meta.and_then(|m| serde_json::from_str::<Declared>(m.get()).ok());
    let caps = declared.as_ref().and_then(|d| d.capabilities.as_ref());
    for request in requests.values() {
        let declared = request
            .required_capability()
            .is_some_and(|cap| caps.and_then(|c| c.get(cap)).is_some_and(Value::is_object));
        if !declared {
            let cap = request.required_capability().unwrap_or("unknown");
            let mut e = JsonRpcError::missing_capability(json!({ cap: {} }));
            e.message = format!(
                "The tool asked for {}, which the client did not declare",
                request.method
            );
            return Some(e);
        }
    }
    None
}

pub(crate) fn task_span(id: &str, tool: &str) -> Span {
    tracing::info_span!("mcp_task", task_id = %id, tool = %tool)
}

/// What a subscription last saw of a task.
struct Seen {
    version: u64,
    status: TaskStatus,
    updated_at_ms: i64,
    round: u32,
}

impl Seen {
    fn of(r: &TaskRecord) -> Self {
        Seen {
            version: r.version,
            status: r.status,
            updated_at_ms: r.updated_at_ms,
            round: r.round,
        }
    }
}

/// Hand the store's change feed to the layer while it lives.
async fn change_loop(weak: Weak<Shared>, mut feed: broadcast::Receiver<TaskChange>) {
    loop {
        let change = match feed.recv().await {
            Ok(change) => change,
            Err(broadcast::error::RecvError::Lagged(_)) => TaskChange::Missed,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(shared) = weak.upgrade() else { return };
        shared.on_change(change);
    }
}

async fn reap_loop(weak: Weak<Shared>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = weak.upgrade() else { return };
        shared.reap_once().await;
        shared.recover_orphans().await;
    }
}

/// An opaque `tasks/list` cursor: the position `(createdAt, id)` of the last
/// task shown, hex-encoded. It only positions a listing; whose tasks are
/// listed always comes from the caller's identity, never from the cursor.
fn encode_cursor(created_ms: i64, id: &str) -> String {
    let raw = format!("{created_ms}:{id}");
    let mut out = String::with_capacity(raw.len() * 2);
    for b in raw.bytes() {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    out
}

fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    if cursor.len() % 2 != 0 || cursor.len() > 512 {
        return None;
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let raw = String::from_utf8(bytes).ok()?;
    let (created, id) = raw.split_once(':')?;
    Some((created.parse().ok()?, id.to_owned()))
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn a_finished_next_version_is_the_cleared_clone() {
        let mut r = TaskRecord::new("t", Era::Modern, "tool", json!({"a": 1}), 5, Some(9))
            .with_owner(Some("o".into()));
        r.status_message = Some("m".into());
        r.meta = Some(JsonText::from_value(&json!({"k": true})));
        r.request_state = Some("s".into());
        r.round = 3;
        r.issued_keys.insert("q".into());
        r.input_responses.insert("q".into(), json!({"x": 1}));
        r.cancel_requested = true;
        r.poll_interval_ms = Some(7);
        r.lease = Some(Lease {
            holder: "h".into(),
            fence: 2,
            until_ms: 50,
        });
        for now in [1, 100] {
            let mut cloned = r.next_version(now);
            let mut built = next_finished(&r, now);
            for next in [&mut cloned, &mut built] {
                finish(
                    next,
                    TaskStatus::Failed,
                    Some(TaskOutcome::Error(JsonRpcError::internal("x"))),
                    Some("x".into()),
                );
            }
            assert_eq!(built, cloned);
        }
    }

    #[test]
    fn kept_call_json_reads_back_unchanged() {
        let mut deep = json!({"leaf": [1.5, -0.0, 18_446_744_073_709_551_615u64]});
        for _ in 0..150 {
            deep = json!({ "d": [deep] });
        }
        let values = [
            json!({"text": "h\u{e9}llo \"q\" \n\u{1}", "n": -12, "f": 0.1, "big": 1e300}),
            json!(null),
            json!([]),
        ];
        for v in values {
            let kept = keep(&v).unwrap();
            assert_eq!(kept.len(), crate::limits::json_size(&v));
            assert_eq!(JsonText::from_written(kept).to_value(), v);
        }
        // Too deep to read back from a durable store: refused.
        assert!(keep(&deep).is_none());
    }

    #[test]
    fn timestamps_match_the_time_formatter() {
        let mut cases = vec![
            0,
            -1,
            1,
            999,
            1_000,
            86_399_999,
            86_400_000,
            951_782_400_000,     // 2000-02-29
            1_767_225_600_123,   // 2026-01-01
            4_107_542_400_000,   // 2100-03-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            253_402_300_800_000, // year 10000: out of range
            -62_167_219_200_000, // 0000-01-01
            -62_167_219_200_001, // before year 0
            i64::MIN,
            i64::MAX,
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Spread over years 0 to 10000 and a bit beyond.
            cases.push((x % 320_000_000_000_000) as i64 - 63_000_000_000_000);
        }
        for ms in cases {
            assert_eq!(rfc3339(ms), rfc3339_formatted(ms), "{ms}");
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 999, 1_000, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::from("x");
            write_u64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

    #[test]
    fn the_hand_built_body_is_the_typed_one() {
        let shared = Shared::new(
            Arc::new(MemoryStore::new()),
            Config::default(),
            broadcast::channel(1).0,
        );
        let mut r = TaskRecord::new(
            "t1",
            Era::Modern,
            "tool",
            json!({}),
            1_767_225_600_123,
            Some(60_000),
        );
        r.poll_interval_ms = Some(500);
        let mut cases = Vec::new();
        cases.push(r.clone());
        let mut ir = r.clone();
        ir.status = TaskStatus::InputRequired;
        ir.status_message = Some("waiting".into());
        ir.input_requests.insert(
            "k".into(),
            PendingInput {
                inner_key: "k".into(),
                request: InputRequest::new(
                    "elicitation/create",
                    json!({"message": "?"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
            },
        );
        cases.push(ir);
        let mut done = r.clone();
        done.status = TaskStatus::Completed;
        done.outcome = Some(TaskOutcome::Result(JsonText::from_value(
            &json!({"content": [{"type": "text", "text": "a \"q\" \u{7}"}], "isError": true}),
        )));
        cases.push(done);
        let mut failed = r.clone();
        failed.status = TaskStatus::Failed;
        failed.outcome = Some(TaskOutcome::Error(
            JsonRpcError::new(-32050, "x").with_data(json!({"a": 1})),
        ));
        cases.push(failed);
        let mut cancelled = r.clone();
        cancelled.status = TaskStatus::Cancelled;
        cancelled.ttl_ms = None;
        cases.push(cancelled);
        // Timestamps: changed since creation, and (equal or not) beyond the
        // digit-by-digit years.
        let mut changed = r.clone();
        changed.updated_at_ms += 1_234;
        let mut far = r.clone();
        far.created_at_ms = 253_402_300_800_000; // year 10000
        far.updated_at_ms = far.created_at_ms;
        let mut farther = far.clone();
        farther.updated_at_ms += 1;
        cases.extend([changed, far, farther]);
        for r in cases {
            let typed = serde_json::to_value(shared.detailed(&r)).unwrap_or_default();
            assert_eq!(shared.detailed_value(&r, None), typed, "{:?}", r.status);
        }
    }
}
