//! `mcp-tasks list|show|cancel|purge|stats`: an operator's commands on
//! every task of a store, through `mcp_task_layer::Operator`.
//!
//! Human output is an aligned table with times relative to now; `--json`
//! is one JSON object per line (`list`) or one object (`show`, `stats`).
//! Every failure is one line on stderr and exit code 1 (see `main.rs`).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_task_layer::store::{Relative, Span, TaskOutcome, TaskQuery, TaskRecord, TaskStats};
use mcp_task_layer::{CancelOutcome, Operator, TaskStatus, TaskStore};
use serde_json::{json, Map, Value};

/// The store flags every operator command takes.
#[derive(Debug, clap::Args)]
pub(crate) struct Store {
    /// The task store: sqlite:PATH, postgres://..., redis://...
    /// (`--help` names the variable, never its value: it may hold a
    /// password.)
    #[arg(
        long,
        value_name = "URL",
        env = "MCP_TASKS_STORE",
        hide_env_values = true
    )]
    store: String,
    /// Open sealed tasks with the keys in PATH (lines KEY_ID:HEX); without
    /// it their arguments, answers and results show as sealed.
    #[arg(long, value_name = "PATH")]
    seal_key_file: Option<String>,
}

/// `mcp-tasks list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    store: Store,
    /// Only tasks in this status: working, input_required, completed,
    /// failed, cancelled (repeatable).
    #[arg(long, value_name = "S", value_parser = parse_status)]
    status: Vec<TaskStatus>,
    /// Only tasks of this tool.
    #[arg(long, value_name = "T")]
    tool: Option<String>,
    /// Only tasks of this owner key.
    #[arg(long, value_name = "O")]
    owner: Option<String>,
    /// Only tasks whose arguments (stored in clear) contain TEXT.
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// At most N tasks (newest first; at most 1000).
    #[arg(long, value_name = "N", default_value_t = 50)]
    limit: usize,
    /// The page after this cursor (printed after a full page).
    #[arg(long, value_name = "CURSOR")]
    after: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// `mcp-tasks show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    store: Store,
    /// The task id.
    id: String,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// `mcp-tasks cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    store: Store,
    /// The task id.
    id: String,
}

/// `mcp-tasks purge`.
#[derive(Debug, clap::Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    store: Store,
    /// Delete finished tasks created longer ago than this: 30d, 12h, 15m,
    /// 45s or 500ms.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Duration,
}

/// `mcp-tasks stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    store: Store,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

fn parse_status(text: &str) -> Result<TaskStatus, String> {
    TaskStatus::from_wire(text).ok_or_else(|| {
        format!("{text:?} is not a status (working, input_required, completed, failed, cancelled)")
    })
}

/// The one line saying the store at `url` did not open, and `why`; the
/// URL shown without its password.
pub(crate) fn cannot_open(url: &str, why: impl std::fmt::Display) -> String {
    format!(
        "cannot open the task store {:?}: {why}",
        mcp_task_layer::store::redacted(url)
    )
}

/// The file of a `sqlite:PATH` or `sqlite://PATH` store URL (its query
/// left out); `None` for another store or an in-memory database.
fn sqlite_file(url: &str) -> Option<&str> {
    let rest = url.trim().strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split_once('?').map_or(rest, |(path, _)| path);
    (!path.is_empty() && path != ":memory:").then_some(path)
}

/// `30d`, `12h`, `15m`, `45s`, `500ms`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (30d, 12h, 15m, 45s, 500ms)"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?} has no unit (ms, s, m, h or d)")),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// How long opening the store may take: a PostgreSQL pool retries a dead
/// server until its own timeout (30 s), which is long to wait at a prompt.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The operator of the store the flags name. A SQLite file must exist:
/// the operator reads and acts on tasks a server wrote, and a mistyped
/// path would otherwise make a new, empty store that shows nothing.
pub(crate) async fn open(args: &Store) -> Result<Operator, String> {
    if let Some(path) = sqlite_file(&args.store) {
        if !std::path::Path::new(path).exists() {
            return Err(cannot_open(
                &args.store,
                "no such file (the operator commands do not create one)",
            ));
        }
    }
    let opened = tokio::time::timeout(OPEN_TIMEOUT, mcp_task_layer::store::connect(&args.store))
        .await
        .map_err(|_| {
            cannot_open(
                &args.store,
                format_args!("no answer within {} s", OPEN_TIMEOUT.as_secs()),
            )
        })?;
    let store = opened.map_err(|e| cannot_open(&args.store, e))?;
    let store = match &args.seal_key_file {
        Some(path) => sealed(store, path)?,
        None => store,
    };
    Ok(Operator::from_shared(store))
}

#[cfg(feature = "seal")]
fn sealed(store: Arc<dyn TaskStore>, path: &str) -> Result<Arc<dyn TaskStore>, String> {
    use mcp_task_layer::store::{SealKeyRing, SealedStore};
    let ring = SealKeyRing::from_file(path).map_err(|e| format!("--seal-key-file: {e}"))?;
    Ok(Arc::new(SealedStore::new(store, ring)))
}

#[cfg(not(feature = "seal"))]
fn sealed(_: Arc<dyn TaskStore>, _: &str) -> Result<Arc<dyn TaskStore>, String> {
    Err("--seal-key-file needs mcp-tasks built with the `seal` feature".to_owned())
}

fn failed(e: mcp_task_layer::store::Error) -> String {
    format!("the task store failed: {e}")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `ms` as a time relative to `now`: `12s ago`, `in 5m`.
fn relative(ms: i64, now: i64) -> String {
    Relative {
        at_ms: ms,
        now_ms: now,
    }
    .to_string()
}

/// Rows as columns padded to the widest cell (the last one unpadded).
/// `text` with its control characters (an escape sequence a server or
/// client wrote into a tool name or a message, a line break) written as
/// `\u{..}`: what the terminal shows is what is stored, nothing it obeys.
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c)).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Who runs a `working` task: its lease holder, or the queue.
fn runner(r: &TaskRecord) -> String {
    match (&r.status, &r.lease) {
        (TaskStatus::Working, Some(lease)) if lease.is_queued() => "(queued)".to_owned(),
        (TaskStatus::Working, Some(lease)) => lease.holder.clone(),
        _ => "-".to_owned(),
    }
}

/// A task as JSON: what every line of `list --json` and `show --json` has;
/// `full` adds its arguments, input requests and outcome. Sealed fields
/// are named in `sealed` and are `"sealed"` where they would be.
fn task_json(r: &TaskRecord, full: bool) -> Value {
    let mut v = json!({
        "id": r.id,
        "status": r.status.as_str(),
        "tool": r.tool_name,
        "owner": r.owner,
        "era": match r.era { mcp_task_layer::store::Era::Legacy => "2025-11-25", _ => "2026-07-28" },
        "created_at_ms": r.created_at_ms,
        "updated_at_ms": r.updated_at_ms,
        "expires_at_ms": r.expires_at_ms(),
        "status_message": r.status_message,
        "worker": match runner(r).as_str() { "-" => Value::Null, w => Value::from(w) },
        "round": r.round,
        "version": r.version,
        "cancel_requested": r.cancel_requested,
        "sealed": r.sealed.keys().collect::<Vec<_>>(),
    });
    let sealed = |field: &str| r.sealed.contains_key(field);
    if sealed("status_message") {
        v["status_message"] = "sealed".into();
    }
    if !full {
        return v;
    }
    v["arguments"] = match &r.arguments {
        _ if sealed("arguments") => "sealed".into(),
        Some(a) => a.to_value(),
        None => Value::Null,
    };
    v["input_requests"] = if sealed("input_requests") {
        "sealed".into()
    } else {
        let requests: Map<String, Value> = r
            .input_requests
            .iter()
            .map(|(key, p)| {
                (
                    key.clone(),
                    serde_json::to_value(&p.request).unwrap_or_default(),
                )
            })
            .collect();
        requests.into()
    };
    match &r.outcome {
        _ if sealed("outcome") => v["result"] = "sealed".into(),
        Some(TaskOutcome::Result(result)) => v["result"] = result.to_value(),
        Some(TaskOutcome::Error(e)) => {
            v["error"] = json!({ "code": e.code, "message": e.message, "data": e.data })
        }
        _ => {}
    }
    v
}

fn print_json(v: &Value) {
    println!("{v}");
}

/// `mcp-tasks list`.
pub(crate) async fn list(args: ListArgs) -> Result<(), String> {
    let operator = open(&args.store).await?;
    let mut query = TaskQuery::new().limit(args.limit);
    for status in args.status {
        query = query.status(status);
    }
    if let Some(tool) = args.tool {
        query = query.tool(tool);
    }
    if let Some(owner) = args.owner {
        query = query.owner(owner);
    }
    if let Some(text) = args.search {
        query = query.search(text);
    }
    if let Some(after) = &args.after {
        let cursor = after
            .parse()
            .map_err(|_| format!("--after {after:?} is not a cursor of this command"))?;
        query = query.after(cursor);
    }
    let page = operator.list(&query).await.map_err(failed)?;
    if args.json {
        for task in &page.tasks {
            print_json(&task_json(task, false));
        }
    } else {
        print_table(&page.tasks);
    }
    if let Some(next) = page.next {
        eprintln!("more: mcp-tasks list --after {next} ...");
    }
    Ok(())
}

/// `list`'s human table.
fn print_table(tasks: &[Arc<TaskRecord>]) {
    let now = now_ms();
    let mut rows = vec![[
        "ID", "STATUS", "TOOL", "OWNER", "CREATED", "UPDATED", "WORKER",
    ]
    .map(str::to_owned)
    .to_vec()];
    for t in tasks {
        rows.push(vec![
            t.id.clone(),
            t.status.as_str().to_owned(),
            t.tool_name.clone(),
            t.owner.clone().unwrap_or_else(|| "-".to_owned()),
            relative(t.created_at_ms, now),
            relative(t.updated_at_ms, now),
            runner(t),
        ]);
    }
    print!("{}", table(&rows));
}

/// `mcp-tasks show`.
pub(crate) async fn show(args: ShowArgs) -> Result<(), String> {
    let operator = open(&args.store).await?;
    let task = operator
        .get(&args.id)
        .await
        .map_err(failed)?
        .ok_or_else(|| format!("no task {:?} (unknown, expired or purged)", args.id))?;
    let v = task_json(&task, true);
    if args.json {
        print_json(&v);
        return Ok(());
    }
    let now = now_ms();
    let text = |v: &Value| match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut rows = vec![
        vec!["id".to_owned(), task.id.clone()],
        vec!["status".to_owned(), task.status.as_str().to_owned()],
        vec!["tool".to_owned(), task.tool_name.clone()],
        vec!["owner".to_owned(), text(&v["owner"])],
        vec!["era".to_owned(), text(&v["era"])],
        vec!["created".to_owned(), relative(task.created_at_ms, now)],
        vec!["updated".to_owned(), relative(task.updated_at_ms, now)],
        vec![
            "expires".to_owned(),
            task.expires_at_ms()
                .map_or_else(|| "never".to_owned(), |at| relative(at, now)),
        ],
        vec!["worker".to_owned(), runner(&task)],
        vec!["message".to_owned(), text(&v["status_message"])],
        vec!["arguments".to_owned(), text(&v["arguments"])],
    ];
    if let Some(requests) = v["input_requests"].as_object() {
        for (key, request) in requests {
            rows.push(vec![format!("waits for {key}"), request.to_string()]);
        }
    } else {
        rows.push(vec!["waits for".to_owned(), text(&v["input_requests"])]);
    }
    for field in ["result", "error"] {
        if !v[field].is_null() {
            rows.push(vec![field.to_owned(), text(&v[field])]);
        }
    }
    print!("{}", table(&rows));
    Ok(())
}

/// `mcp-tasks cancel`.
pub(crate) async fn cancel(args: CancelArgs) -> Result<(), String> {
    let operator = open(&args.store).await?;
    match operator.cancel(&args.id).await {
        Ok(CancelOutcome::Cancelled) => println!("cancelled {}", args.id),
        Ok(CancelOutcome::AlreadyEnded(status)) => {
            println!("{} had already ended: {status}", args.id);
        }
        Ok(_) => println!("{}: nothing to do", args.id),
        Err(mcp_task_layer::store::Error::NotFound) => {
            return Err(format!(
                "no task {:?} (unknown, expired or purged)",
                args.id
            ))
        }
        Err(e) => return Err(failed(e)),
    }
    Ok(())
}

/// `mcp-tasks purge`.
pub(crate) async fn purge(args: PurgeArgs) -> Result<(), String> {
    let operator = open(&args.store).await?;
    let n = operator
        .purge_older_than(args.older_than)
        .await
        .map_err(failed)?;
    println!("purged {n} finished task{}", if n == 1 { "" } else { "s" });
    Ok(())
}

/// `stats` as JSON: the library's figures, with each oldest task's age.
fn stats_json(stats: &TaskStats) -> Value {
    let mut v = serde_json::to_value(stats).unwrap_or_default();
    for key in ["oldest_queued", "oldest_input_required"] {
        if let Some(since) = v[key]["since_ms"].as_i64() {
            v[key]["age_ms"] = stats.at_ms.saturating_sub(since).max(0).into();
        }
    }
    v
}

/// `mcp-tasks stats`.
pub(crate) async fn stats(args: StatsArgs) -> Result<(), String> {
    let operator = open(&args.store).await?;
    let stats = operator.stats().await.map_err(failed)?;
    if args.json {
        print_json(&stats_json(&stats));
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ]
    .iter()
    .map(|s| vec![s.as_str().to_owned(), stats.count(*s).to_string()])
    .collect();
    rows.push(vec!["queued".to_owned(), stats.queued.to_string()]);
    let waiting = |w: &Option<mcp_task_layer::store::WaitingTask>| match w {
        Some(w) => format!(
            "{} for {}",
            w.id,
            Span(i64::try_from(stats.waited(w).as_millis()).unwrap_or(i64::MAX))
        ),
        None => "-".to_owned(),
    };
    rows.push(vec![
        "oldest queued".to_owned(),
        waiting(&stats.oldest_queued),
    ]);
    rows.push(vec![
        "oldest input_required".to_owned(),
        waiting(&stats.oldest_input_required),
    ]);
    for (holder, n) in &stats.running_by_holder {
        rows.push(vec![format!("running on {holder}"), n.to_string()]);
    }
    print!("{}", table(&rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ages_read_and_print() {
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert_eq!(relative(0, 90_000), "1m ago");
        assert_eq!(relative(7_200_000, 0), "in 2h");
    }

    #[test]
    fn tables_align_their_columns() {
        let rows = vec![
            vec!["a".to_owned(), "bb".to_owned(), "c".to_owned()],
            vec!["aaa".to_owned(), "b".to_owned(), "c".to_owned()],
        ];
        assert_eq!(table(&rows), "a    bb  c\naaa  b   c\n");
    }

    /// A server's message that would clear the screen, or a line break in
    /// a tool name, is shown, not obeyed, and keeps its row one line.
    #[test]
    fn control_characters_are_shown_not_obeyed() {
        let rows = vec![vec!["message".to_owned(), "ok\u{1b}[2J\nfake".to_owned()]];
        assert_eq!(table(&rows), "message  ok\\u{1b}[2J\\u{a}fake\n");
    }

    #[test]
    fn the_file_of_a_sqlite_url() {
        assert_eq!(sqlite_file("sqlite:a/b.db?table=t"), Some("a/b.db"));
        assert_eq!(sqlite_file("sqlite:///x.db"), Some("/x.db"));
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://h/db"), None);
    }
}
