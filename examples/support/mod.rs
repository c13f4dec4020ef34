//! What `examples/server.rs` and `examples/rmcp_server.rs` share: the
//! command line, the task store, the fixtures' task policies, and serving
//! the layered service over Streamable HTTP or stdio. Only the inner MCP
//! server differs between them.

use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::Extensions;
use mcp_task_layer::{
    Execution, IdentityRefusal, JsonRpcRequest, JsonRpcResponse, McpEndpoint, Recovery, TaskLayer,
    TaskOwner, TaskPolicy, TaskStore,
};
use tower::ServiceBuilder;

mod run_log;

/// Parse the command line, open the store, put `inner` behind a
/// [`TaskLayer`] with the fixtures' policies and serve it until Ctrl-C or
/// SIGTERM, then drain (or, with `--stdio`, until stdin closes; or, with
/// `--role worker`, run its queued tasks instead). `name` is the program's
/// name in the usage line.
pub(crate) async fn run<S>(name: &str, inner: S)
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError> + Send + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}\nusage: {name} {USAGE}");
            std::process::exit(2);
        }
    };
    // `sqlite:` needs `--features sqlite`, `postgres://` `--features postgres`,
    // `redis://` `--features redis`.
    let store = match mcp_task_layer::store::connect(&args.store).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("cannot open the task store: {e}");
            std::process::exit(1);
        }
    };
    let store = match &args.seal_key_file {
        Some(path) => sealed(store, path),
        None => store,
    };

    let tasks = TaskLayer::new(store)
        .with_tool_policies([
            ("greet", TaskPolicy::Sync),
            (
                "slow_compute",
                TaskPolicy::Auto {
                    within: Duration::from_millis(100),
                },
            ),
            ("failing_job", TaskPolicy::Task),
            ("protocol_error_job", TaskPolicy::Task),
            ("confirm_delete", TaskPolicy::Task),
            ("multi_input", TaskPolicy::Task),
            ("test_tool_with_task", TaskPolicy::Task),
            ("progress_job", TaskPolicy::Task),
        ])
        .with_poll_interval(Duration::from_millis(250))
        .with_lease_ttl(args.lease_ttl)
        .with_recovery(args.recovery)
        .with_execution(match args.role {
            Role::All => Execution::Inline,
            Role::Front | Role::Worker => Execution::Queued,
        });
    match &args.run_log {
        Some(path) => match run_log::RunLog::open(inner, path) {
            Ok(logged) => serve(&args, tasks, logged).await,
            Err(e) => {
                eprintln!("cannot open the run log {path}: {e}");
                std::process::exit(1);
            }
        },
        None => serve(&args, tasks, inner).await,
    }
}

/// Serve `inner` behind `tasks` as `args` say.
async fn serve<S>(args: &Args, tasks: TaskLayer, inner: S)
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError> + Send + 'static,
{
    if args.role == Role::Worker {
        let worker = tasks.worker(inner).with_concurrency(args.concurrency);
        println!("worker ready");
        let report = worker.run(shutdown_signal(), args.drain).await;
        eprintln!("worker drained: {report:?}");
        return;
    }
    let service = ServiceBuilder::new().layer(tasks.clone()).service(inner);
    // Recover what a crash left behind now, not at the first request.
    service.start_background_work();
    if args.stdio {
        serve_stdio(service).await;
        return;
    }
    // `tasks/get` answered by the endpoint from the layer's store (the same
    // answers, without a call of the service).
    let app = McpEndpoint::new(service)
        .with_authentication(bearer_identity)
        .with_direct_tasks_get();

    let port = args.port;
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map_or(port, |a| a.port());
    println!("listening on http://127.0.0.1:{port}/mcp");
    // The endpoint is the server's only route: no router in front of it.
    // `serve` keeps the deadlines for slow clients (30 s for a request's
    // headers, 30 s for its body, 60 s idle), which `axum::serve` has not.
    if let Err(e) = app
        .serve(listener, "/mcp")
        .with_graceful_shutdown(shutdown_signal())
        .await
    {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
    // In-flight requests have their answers; now the handlers still running.
    let report = tasks.drain(args.drain).await;
    eprintln!("drained: {report:?}");
}

/// Ctrl-C, or SIGTERM (what a deploy sends).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => eprintln!("cannot listen for SIGTERM: {e}"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// MCP on stdin/stdout until stdin closes (`--stdio`).
#[cfg(feature = "stdio")]
async fn serve_stdio<S>(service: S)
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    // One process, one client: every task of the process is its own.
    let transport =
        mcp_task_layer::StdioTransport::new(service).with_owner(TaskOwner::new("stdio"));
    if let Err(e) = transport.serve_stdio().await {
        eprintln!("stdio error: {e}");
        std::process::exit(1);
    }
}

#[cfg(not(feature = "stdio"))]
async fn serve_stdio<S>(_service: S) {
    eprintln!("--stdio needs the `stdio` feature (--features axum,stdio)");
    std::process::exit(2);
}

/// `store` with its tasks' private fields sealed under the keys in the
/// file at `path` (`--seal-key-file`).
#[cfg(feature = "seal")]
fn sealed(store: std::sync::Arc<dyn TaskStore>, path: &str) -> std::sync::Arc<dyn TaskStore> {
    use mcp_task_layer::store::{SealKeyRing, SealedStore};
    match SealKeyRing::from_file(path) {
        Ok(ring) => std::sync::Arc::new(SealedStore::new(store, ring)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "seal"))]
fn sealed(_: std::sync::Arc<dyn TaskStore>, _: &str) -> std::sync::Arc<dyn TaskStore> {
    eprintln!("--seal-key-file needs the `seal` feature (--features axum,seal)");
    std::process::exit(2);
}

/// Where this process runs task handlers (`--role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    All,
    Front,
    Worker,
}

/// The command line.
struct Args {
    role: Role,
    concurrency: usize,
    drain: Duration,
    run_log: Option<String>,
    stdio: bool,
    port: u16,
    store: String,
    lease_ttl: Duration,
    recovery: Recovery,
    seal_key_file: Option<String>,
}

const USAGE: &str = "[--stdio | --port PORT] [--store memory|sqlite:PATH|postgres://...|redis://...] \
                     [--lease-ttl SECONDS] [--recovery fail|rerun] [--seal-key-file PATH] \
                     [--role all|front|worker] [--concurrency N] [--drain-secs SECONDS] [--run-log PATH]";

/// `--stdio` (MCP on stdin/stdout, no port), `--port PORT` (default 3001), `--store URL` (default `memory`),
/// `--lease-ttl SECONDS` (default 30: how long a task whose server died
/// stays `working` before it is recovered) and `--recovery fail|rerun`
/// (default `fail`), `--seal-key-file PATH` (seal tasks at rest with the
/// keys in PATH), `--role all|front|worker` (default `all`),
/// `--concurrency N` (a worker's handlers at once, default 16),
/// `--drain-secs SECONDS` (default 10), `--run-log PATH`, each also as
/// `--flag=value`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        role: Role::All,
        concurrency: 16,
        drain: Duration::from_secs(10),
        run_log: None,
        stdio: false,
        port: 3001,
        store: "memory".to_owned(),
        lease_ttl: Duration::from_secs(30),
        recovery: Recovery::Fail,
        seal_key_file: None,
    };
    while let Some(arg) = args.next() {
        if arg == "--stdio" {
            out.stdio = true;
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        if ![
            "--port",
            "--store",
            "--lease-ttl",
            "--recovery",
            "--seal-key-file",
            "--role",
            "--concurrency",
            "--drain-secs",
            "--run-log",
        ]
        .contains(&flag.as_str())
        {
            return Err(format!("unknown argument {arg:?}"));
        }
        let value = match inline {
            Some(value) => value,
            None => args.next().ok_or(format!("{flag} needs a value"))?,
        };
        match flag.as_str() {
            "--port" => {
                out.port = value
                    .parse()
                    .map_err(|_| format!("invalid port {value:?}"))?;
            }
            "--lease-ttl" => {
                out.lease_ttl = value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .filter(|d| !d.is_zero())
                    .ok_or(format!("invalid lease TTL {value:?} (seconds)"))?;
            }
            "--recovery" => {
                out.recovery = match value.as_str() {
                    "fail" => Recovery::Fail,
                    "rerun" => Recovery::Rerun,
                    _ => return Err(format!("invalid recovery {value:?}: fail or rerun")),
                };
            }
            "--seal-key-file" => out.seal_key_file = Some(value),
            "--role" => {
                out.role = match value.as_str() {
                    "all" => Role::All,
                    "front" => Role::Front,
                    "worker" => Role::Worker,
                    _ => return Err(format!("invalid role {value:?}: all, front or worker")),
                };
            }
            "--concurrency" => {
                out.concurrency = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(format!("invalid concurrency {value:?}"))?;
            }
            "--drain-secs" => {
                out.drain = value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .ok_or(format!("invalid drain deadline {value:?} (seconds)"))?;
            }
            "--run-log" => out.run_log = Some(value),
            _ => out.store = value,
        }
    }
    Ok(out)
}

/// Demo identity: `Authorization: Bearer <token>` makes `<token>` the owner
/// of the caller's tasks. Unverified; see the module docs. No `Authorization`
/// header is an anonymous caller (the demo requires no identity); one that
/// is not a bearer token is refused: HTTP 401, `error="invalid_token"`.
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
