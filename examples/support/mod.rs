//! What `examples/server.rs` and `examples/rmcp_server.rs` share: the
//! command line, the task store, the fixtures' task policies, and serving
//! the layered service over Streamable HTTP or stdio. Only the inner MCP
//! server differs between them.

use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::Extensions;
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, McpEndpoint, Recovery, TaskLayer, TaskOwner, TaskPolicy,
    TaskStore,
};
use tower::ServiceBuilder;

/// Parse the command line, open the store, put `inner` behind a
/// [`TaskLayer`] with the fixtures' policies and serve it until Ctrl-C (or,
/// with `--stdio`, until stdin closes). `name` is the program's name in
/// the usage line.
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
    let (port, store_url) = (args.port, args.store);
    // `sqlite:` needs `--features sqlite`, `postgres://` `--features postgres`.
    let store = match mcp_task_layer::store::connect(&store_url).await {
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
        .with_recovery(args.recovery);
    let service = ServiceBuilder::new().layer(tasks).service(inner);
    // Recover what a crash left behind now, not at the first request.
    service.start_background_work();
    if args.stdio {
        serve_stdio(service).await;
        return;
    }
    let app = McpEndpoint::new(service)
        .with_identity(bearer_identity)
        .into_router("/mcp");

    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map_or(port, |a| a.port());
    println!("listening on http://127.0.0.1:{port}/mcp");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
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

/// The command line.
struct Args {
    stdio: bool,
    port: u16,
    store: String,
    lease_ttl: Duration,
    recovery: Recovery,
    seal_key_file: Option<String>,
}

const USAGE: &str = "[--stdio | --port PORT] [--store memory|sqlite:PATH|postgres://...] \
                     [--lease-ttl SECONDS] [--recovery fail|rerun] [--seal-key-file PATH]";

/// `--stdio` (MCP on stdin/stdout, no port), `--port PORT` (default 3001), `--store URL` (default `memory`),
/// `--lease-ttl SECONDS` (default 30: how long a task whose server died
/// stays `working` before it is recovered) and `--recovery fail|rerun`
/// (default `fail`), `--seal-key-file PATH` (seal tasks at rest with the
/// keys in PATH), each also as `--flag=value`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
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
            _ => out.store = value,
        }
    }
    Ok(out)
}

/// Demo identity: `Authorization: Bearer <token>` makes `<token>` the owner
/// of the caller's tasks. Unverified; see the module docs.
fn bearer_identity(parts: &Parts, extensions: &mut Extensions) {
    let token = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    if let Some(token) = token {
        extensions.insert(TaskOwner::new(format!("bearer:{token}")));
    }
}
