//! `examples/server.rs` (a hand-written `tower::Service`) and
//! `examples/rmcp_server.rs` (the same fixtures as rmcp tools behind
//! `RmcpService`) answer one script of requests the same way (issue 28).
//!
//! Both are built by cargo from this checkout and run with `--stdio` on a
//! memory store. One script per era is written to each, request for
//! request, with the same JSON-RPC ids:
//!
//! - 2026-07-28 (`modern.rs`, every request with its `_meta`):
//!   `server/discover`, `tools/list`; `greet` (sync, with and without its
//!   argument, without the extension); `slow_compute` answered in its
//!   window, and as a task cancelled; `failing_job` (completed with
//!   `isError`), `protocol_error_job` (failed); `confirm_delete` asking and
//!   answered with `tasks/update`; `multi_input` answered one key at a time;
//!   `test_tool_with_task`'s MRTR round, then its task; `progress_job`'s
//!   first `statusMessage`; and the errors: unknown task ids, `-32021`
//!   without the extension, `tasks/result` and `tasks/list` (`-32601`),
//!   an unknown tool and method, bad params, an unsupported version.
//! - 2025-11-25 (`legacy.rs`, after `initialize`): `ping`, `tools/list`
//!   with `execution.taskSupport`, `params.task` on a sync tool and none
//!   on a task tool, the cancelled task, `tasks/result` of a tool error and
//!   of a JSON-RPC error, the questions of `confirm_delete`, `multi_input`
//!   and `test_tool_with_task` as `elicitation/create` requests on the
//!   pipes, `progress_job`, `tasks/list`, and the errors.
//!
//! Tasks are waited for by polling `tasks/get` (bounded: at most 800 polls
//! 25 ms apart), or by the 2025 `tasks/result`, which blocks; only the
//! state polled for is recorded, never how many polls it took.
//!
//! Each response (the whole message: `id`, `result` or `error`) and each
//! server→client request is recorded under the name of its step; the two
//! servers' records must be equal after these, and only these, are
//! normalised (`normalise.rs`):
//!
//! - the `id` of each response: the driver has matched it to its request
//!   already, and the number of polls before it differs between runs;
//! - every `taskId` value: random per run (R53); replaced by `task-N`, N
//!   its order of first appearance, so that a response naming another
//!   step's task still shows;
//! - `createdAt` and `lastUpdatedAt`: wall-clock times (each must be a
//!   string; `lastUpdatedAt` not before `createdAt`);
//! - the `id` of a server→client request (`srv-…`): the transport's
//!   counter, which counts the requests of both servers alike but is not
//!   part of the behaviour;
//! - the server's name (`serverInfo.name` in `initialize`,
//!   `_meta["io.modelcontextprotocol/serverInfo"].name` in
//!   `server/discover`) and `instructions`: two servers saying who they
//!   are;
//! - `tools/list`: the tools are compared sorted by name (rmcp's router
//!   lists them so, the other server in its own order; MCP gives the order
//!   no meaning), and a tool's `inputSchema` by its property names and
//!   their JSON types only: rmcp writes its schemas with `schemars`
//!   (`$schema`, `title`, `null` for an optional member), the other server
//!   by hand.
//!
//! Notifications (`notifications/tasks/status` of the 2025 era) are not
//! compared: how many a run sends depends on timing; `tests/stdio/`
//! asserts them.
#![cfg(all(feature = "axum", feature = "stdio", feature = "rmcp"))]

mod driver;
#[allow(unreachable_pub)]
#[path = "../common/features.rs"]
mod features;
mod legacy;
mod modern;
mod normalise;

use std::fmt::Write as _;

use serde_json::Value;

use driver::Server;

/// What one server answered, step by step.
#[derive(Default)]
pub(crate) struct Transcript {
    steps: Vec<(String, Value)>,
}

impl Transcript {
    pub(crate) fn add(&mut self, step: &str, message: Value) {
        self.steps.push((step.to_owned(), message));
    }
}

/// Every step where the two transcripts differ after normalising.
fn differences(era: &str, plain: Transcript, rmcp: Transcript) -> Vec<String> {
    let plain = normalise::transcript(plain);
    let rmcp = normalise::transcript(rmcp);
    let mut out = Vec::new();
    let names = |t: &[(String, Value)]| t.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>();
    if names(&plain) != names(&rmcp) {
        out.push(format!(
            "{era}: different steps:\n  server.rs      {:?}\n  rmcp_server.rs {:?}",
            names(&plain),
            names(&rmcp)
        ));
        return out;
    }
    for ((step, a), (_, b)) in plain.iter().zip(&rmcp) {
        if a != b {
            let mut text = format!("{era} / {step}:\n");
            let _ = writeln!(text, "  server.rs      {a}");
            let _ = write!(text, "  rmcp_server.rs {b}");
            out.push(text);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_example_servers_answer_every_acceptance_case_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (plain_bin, rmcp_bin) = driver::build_examples(dir.path());

    let run = |name: &'static str, bin: std::path::PathBuf, modern: bool| async move {
        let mut s = Server::start(name, &bin);
        let t = if modern {
            modern::script(&mut s).await
        } else {
            legacy::script(&mut s).await
        };
        s.close().await;
        t
    };
    let (plain26, rmcp26, plain25, rmcp25) = tokio::join!(
        run("server.rs", plain_bin.clone(), true),
        run("rmcp_server.rs", rmcp_bin.clone(), true),
        run("server.rs", plain_bin, false),
        run("rmcp_server.rs", rmcp_bin, false),
    );
    let mut all = differences("2026-07-28", plain26, rmcp26);
    all.extend(differences("2025-11-25", plain25, rmcp25));
    assert!(
        all.is_empty(),
        "the two example servers differ at {} steps:\n\n{}",
        all.len(),
        all.join("\n\n")
    );
}
