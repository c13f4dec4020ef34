//! `mcp-tasks dashboard`: `mcp_task_layer::dashboard` alone, over the
//! store the flags name, through the same `Operator` as `mcp-tasks cancel`
//! (a cancel reaches the handler wherever it runs).

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;

use mcp_task_layer::dashboard::{Access, Dashboard};

use crate::operator::{open, Store};

/// `mcp-tasks dashboard`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    store: Store,
    /// The address to serve the dashboard on (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Read the full role's token from the first line of PATH instead of
    /// MCP_TASKS_DASHBOARD_TOKEN.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// A browser origin (https://ops.example.com) whose pages may sign in
    /// and act (repeatable); by default loopback pages only.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// Mark the session cookie Secure (when served over HTTPS by a proxy).
    #[arg(long)]
    secure_cookie: bool,
}

/// Serve the dashboard until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> Result<(), String> {
    let mut access = Access::from_env().map_err(|e| e.to_string())?;
    if let Some(path) = &args.token_file {
        access = access
            .with_full_token_file(path)
            .map_err(|e| format!("--token-file: {e}"))?;
    }
    if !access.is_enabled() {
        return Err(
            "no dashboard token: set MCP_TASKS_DASHBOARD_TOKEN (or _FILE, or --token-file); \
             the dashboard lets nobody in without one"
                .to_owned(),
        );
    }
    let operator = open(&args.store).await?;
    let mut dashboard = Dashboard::new(operator, access).with_secure_cookie(args.secure_cookie);
    if !args.allow_origin.is_empty() {
        dashboard = dashboard.with_allowed_origins(&args.allow_origin);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    println!("listening on http://{addr}");
    // The crate's server, not `axum::serve`: a client that sends half a
    // request head, or nothing, is let go (408 after 30 s, idle after
    // 60 s) instead of holding its connection. Open event streams never
    // end by themselves: a signal stops the server without waiting for
    // them.
    let served = mcp_task_layer::serve(listener, dashboard.router()).into_future();
    tokio::select! {
        served = served => {
            served.map_err(|e| format!("server error: {e}"))
        }
        () = crate::gateway::shutdown_signal() => Ok(()),
    }
}
