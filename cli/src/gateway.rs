//! `mcp-tasks gateway`: the wiring of `mcp_task_layer::gateway::Proxy`
//! under a `TaskLayer`, served over Streamable HTTP or stdio.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::Extensions;
use mcp_task_layer::gateway::{Proxy, ProxyConfig, UpstreamTarget};
use mcp_task_layer::{
    IdentityRefusal, McpEndpoint, StdioTransport, TaskOwner, TaskPolicy, TaskStore,
};
use tower::ServiceBuilder;

use crate::policy;

/// How long running handlers get to finish at a shutdown.
const DRAIN: Duration = Duration::from_secs(10);

/// `mcp-tasks gateway`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("serve").required(true).args(["listen", "stdio"])))]
pub(crate) struct Args {
    /// Serve Streamable HTTP on ADDR (for example 127.0.0.1:3000), at /mcp.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Serve MCP on stdin and stdout (as hosts launch servers).
    #[arg(long)]
    stdio: bool,
    /// Where tasks live: memory, sqlite:PATH, postgres://..., redis://...
    #[arg(
        long,
        value_name = "URL",
        default_value = "memory",
        env = "MCP_TASKS_STORE",
        hide_env_values = true
    )]
    store: String,
    /// The policy of tools without one of their own: sync, task or auto:MS.
    #[arg(long, value_name = "P", default_value = "auto:1000", value_parser = policy::parse)]
    default_policy: TaskPolicy,
    /// One tool's policy, TOOL=P (repeatable).
    #[arg(long = "policy", value_name = "TOOL=P", value_parser = policy::parse_tool)]
    policies: Vec<(String, TaskPolicy)>,
    /// A tool safe to run again from the top when its upstream call was lost
    /// with a restart (repeatable); other tools' tasks fail then.
    #[arg(long = "rerun", value_name = "TOOL")]
    rerun: Vec<String>,
    /// For `task` tools: questions the upstream asks within MS of the call
    /// are plain MRTR rounds, before the task exists (default 0: the task
    /// exists before the upstream is called).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    task_window: u64,
    /// Over stdio, the most upstream processes at once: each tool call runs
    /// in one of its own (a question over stdio says nothing of which call
    /// asked it), started as calls need them; one waiting for answers
    /// keeps its process.
    #[arg(long, value_name = "N", default_value_t = 16)]
    upstream_processes: usize,
    /// Over stdio, the most upstream processes starting at once (default:
    /// the host's CPUs); a call waits for the first process free rather
    /// than start one more while that many start.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    upstream_starts: Option<usize>,
    /// The most calls waiting at once for their clients' answers to the
    /// upstream's questions; a call past it fails and is cancelled upstream.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = at_least_one)]
    parked_calls: usize,
    /// The most of those one client (one bearer token; every client without
    /// one counts as one) has at once.
    #[arg(long, value_name = "N", default_value_t = 1_000, value_parser = at_least_one)]
    parked_calls_per_owner: usize,
    /// How long a call waits for its client's answers before it is
    /// cancelled upstream (seconds; default one day, the longest task TTL).
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400.0)]
    park_ttl: f64,
    /// How long a call waits for the upstream to be up (started, or
    /// reconnected after it went away) before it fails (seconds; default
    /// 10). Raise it for an upstream that is slow to start.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    connect_wait: f64,
    /// How long a task stays `working` after its gateway died before it is
    /// recovered: failed, or started again if its tool is marked --rerun
    /// (seconds; default 30).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    lease_ttl: f64,
    /// Seal tasks' arguments, answers and results at rest with the keys in
    /// PATH (lines KEY_ID:HEX, the last the newest).
    #[arg(long, value_name = "PATH")]
    seal_key_file: Option<String>,
    /// The upstream MCP server's Streamable HTTP endpoint (http://...),
    /// instead of a command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    upstream_url: Option<String>,
    /// A header sent with every request to the upstream URL, 'Name: value'
    /// (repeatable).
    #[arg(
        long = "upstream-header",
        value_name = "HEADER",
        requires = "upstream_url"
    )]
    upstream_headers: Vec<String>,
    /// The upstream MCP server's command and arguments, after `--`.
    #[arg(
        last = true,
        value_name = "COMMAND",
        required_unless_present = "upstream_url"
    )]
    command: Vec<String>,
}

impl Args {
    /// Whether it serves one client on stdin and stdout.
    pub(crate) fn serves_stdio(&self) -> bool {
        self.stdio
    }
}

/// Run the gateway until Ctrl-C or SIGTERM (HTTP) or the end of stdin.
pub(crate) async fn run(args: Args) -> Result<(), String> {
    let target = match (&args.upstream_url, args.command.split_first()) {
        (Some(url), _) => UpstreamTarget::Url {
            url: url.clone(),
            headers: args.upstream_headers.clone(),
        },
        (None, Some((program, rest))) => UpstreamTarget::Command {
            program: program.clone(),
            args: rest.to_vec(),
        },
        (None, None) => return Err("no upstream: a command after -- or --upstream-url".to_owned()),
    };
    target.check()?;
    let mut cfg = ProxyConfig::default()
        .with_default_policy(args.default_policy)
        .with_upstream_processes(args.upstream_processes)
        .with_parked_calls(seconds("--park-ttl", args.park_ttl)?, args.parked_calls)
        .with_parked_calls_per_owner(args.parked_calls_per_owner)
        .with_connect_wait(seconds("--connect-wait", args.connect_wait)?);
    if let Some(n) = args.upstream_starts {
        cfg = cfg.with_upstream_starts(n);
    }
    for (tool, policy) in &args.policies {
        cfg = cfg.with_tool_policy(tool.clone(), *policy);
    }
    for tool in &args.rerun {
        cfg = cfg.with_rerun(tool.clone());
    }
    let store = mcp_task_layer::store::connect(&args.store)
        .await
        .map_err(|e| crate::operator::cannot_open(&args.store, e))?;
    let store = match &args.seal_key_file {
        Some(path) => sealed(store, path)?,
        None => store,
    };
    let lease = seconds("--lease-ttl", args.lease_ttl)?;
    let proxy = Proxy::start(target, cfg);
    let layer = proxy
        .task_layer(store)
        .with_task_window(Duration::from_millis(args.task_window))
        .with_lease_ttl(lease);
    let service = ServiceBuilder::new().layer(layer.clone()).service(proxy);
    service.start_background_work();
    if args.stdio {
        // One process, one client: every task of the process is its own.
        // Served on a task of its own, not on `block_on`'s future: a call
        // that finishes wakes the stream's writer, and a spawned task is
        // run in the same turn of the scheduler, where `block_on`'s future
        // waits for the next poll of the I/O driver (one more `epoll_wait`
        // a call).
        let serve = StdioTransport::new(service)
            .with_owner(TaskOwner::new("stdio"))
            .serve_stdio();
        return match tokio::spawn(serve).await {
            Ok(served) => served.map_err(|e| format!("stdio: {e}")),
            Err(e) => Err(format!("stdio: {e}")),
        };
    }
    let Some(addr) = args.listen else {
        return Err("--listen ADDR or --stdio is needed".to_owned());
    };
    // `tasks/get` answered from the layer's store where it can be without
    // waiting (the memory store), as the service would answer it.
    let endpoint = McpEndpoint::new(service)
        .with_authentication(bearer_identity)
        .with_direct_tasks_get();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr().unwrap_or(addr);
    println!("listening on http://{addr}/mcp");
    // The endpoint's own server keeps the deadlines for slow clients (30 s
    // for a request's headers, 30 s for its body, 60 s idle).
    endpoint
        .serve(listener, "/mcp")
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| format!("server error: {e}"))?;
    let report = layer.drain(DRAIN).await;
    eprintln!("drained: {report:?}");
    Ok(())
}

/// `value` of `flag` as a positive duration.
fn seconds(flag: &str, value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{flag} {value}: a positive number of seconds"))
}

/// A count of at least one.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?}: a whole number of at least 1")),
    }
}

/// `Authorization: Bearer <token>` makes `bearer:<token>` the owner of the
/// caller's tasks; another `Authorization` is 401 `invalid_token`. The
/// gateway does not verify tokens: put it behind whatever authenticates
/// your users, or on loopback only.
fn bearer_identity(parts: &Parts, extensions: &mut Extensions) -> Result<(), IdentityRefusal> {
    let Some(header) = parts.headers.get(AUTHORIZATION) else {
        return Ok(());
    };
    let token = header
        .to_str()
        .ok()
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or(IdentityRefusal::Invalid)?;
    extensions.insert(TaskOwner::new(format!("bearer:{token}")));
    Ok(())
}

/// Ctrl-C, or SIGTERM (what a deploy sends).
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(feature = "seal")]
fn sealed(store: Arc<dyn TaskStore>, path: &str) -> Result<Arc<dyn TaskStore>, String> {
    use mcp_task_layer::store::{SealKeyRing, SealedStore};
    let ring = SealKeyRing::from_file(path).map_err(|e| e.to_string())?;
    Ok(Arc::new(SealedStore::new(store, ring)))
}

#[cfg(not(feature = "seal"))]
fn sealed(_: Arc<dyn TaskStore>, _: &str) -> Result<Arc<dyn TaskStore>, String> {
    Err("--seal-key-file needs mcp-tasks built with the `seal` feature".to_owned())
}
