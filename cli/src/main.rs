//! `mcp-tasks`: durable MCP tasks in front of any MCP server.
//!
//! ```text
//! mcp-tasks gateway --listen 127.0.0.1:3000 -- npx -y @modelcontextprotocol/server-everything
//! ```
//!
//! The binary parses the command line, wires the library's parts and picks
//! the exit code: 0 when it stopped as asked, 1 when it could not run (one
//! line on stderr says why), 2 for a command line it does not understand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod dashboard;
mod gateway;
mod operator;
mod policy;

/// Durable MCP tasks for any MCP server.
#[derive(Debug, Parser)]
#[command(name = "mcp-tasks", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve an MCP server with durable tasks: an MCP client to the
    /// upstream, an MCP server with tasks to everyone else.
    Gateway(gateway::Args),
    /// List tasks of every owner, newest first.
    List(operator::ListArgs),
    /// Show one task: its status, times, worker, arguments, what it waits
    /// for, its result or error.
    Show(operator::ShowArgs),
    /// Cancel one task (its handler stops wherever it runs).
    Cancel(operator::CancelArgs),
    /// Delete finished tasks older than a duration.
    Purge(operator::PurgeArgs),
    /// Counts by status, the oldest waiting tasks, running tasks by worker.
    Stats(operator::StatsArgs),
    /// Serve the operator's web dashboard (MCP_TASKS_DASHBOARD_TOKEN signs
    /// in), printing `listening on http://ADDR`.
    Dashboard(dashboard::Args),
}

/// mimalloc, not the system's: a gateway call allocates about 30 small
/// blocks, and glibc's malloc and free cost 5.3k of its 38.4k
/// instructions (mimalloc: 1.1k of 34.6k; BENCHMARKS.md, "The gateway's
/// own work, cut"). The library leaves the choice to its users.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    // One client over stdio: one thread, no wake-ups across threads on
    // each message (BENCHMARKS.md, the gateway over stdio); HTTP serves
    // many on every core.
    let one_client = matches!(&cli.command, Command::Gateway(args) if args.serves_stdio());
    let mut builder = if one_client {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-tasks: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Gateway(args) => gateway::run(args).await,
            Command::List(args) => operator::list(args).await,
            Command::Show(args) => operator::show(args).await,
            Command::Cancel(args) => operator::cancel(args).await,
            Command::Purge(args) => operator::purge(args).await,
            Command::Stats(args) => operator::stats(args).await,
            Command::Dashboard(args) => dashboard::run(args).await,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mcp-tasks: {message}");
            ExitCode::FAILURE
        }
    }
}
