//! The upstream's processes (`--upstream-processes`): a call holds one
//! while it runs, and gives it back on every way out.

use std::time::Duration;

use mcp_task_layer::gateway::{ProxyConfig, UpstreamTarget};
use mcp_task_layer::TaskPolicy;
use serde_json::{json, Value};

use crate::common;
use crate::harness::{event, events_file, kill, python, text, Gateway};

/// A call whose caller goes away (a client's cancel over stdio, a
/// timeout, a disconnect) while the one process it was given starts again
/// gives that process back. Before, the process stayed marked busy for
/// ever, and every later call failed with "all 1 upstream processes are
/// busy".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_while_its_process_starts_gives_the_process_back() {
    let (_dir, file) = events_file();
    let Some(UpstreamTarget::Command { program, args }) = python(&file) else {
        return;
    };
    // A process that takes a second to start, so that a call waits for it.
    let slow = UpstreamTarget::Command {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("sleep 1; exec {program} {}", args.join(" ")),
        ],
    };
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(10))
        .with_upstream_processes(1)
        .with_tool_policy("pid", TaskPolicy::Sync);
    let gw = Gateway::with_config(slow, cfg).await;
    let pid = text(&gw.call("pid", json!({})).await).to_owned();
    kill(&pid);
    // Calls until one waits for the process to start again (those before
    // it may fail at once on the dead connection); that one is dropped.
    let call = json!({ "name": "pid", "arguments": {} });
    let mut dropped = false;
    for _ in 0..50 {
        let waiting = gw.send26("tools/call", call.clone(), true);
        if tokio::time::timeout(Duration::from_millis(200), waiting)
            .await
            .is_err()
        {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "no call waited for the process to start");
    // The process comes back and takes the next call.
    let again = text(&gw.call("pid", json!({})).await).to_owned();
    assert!(!again.is_empty() && again != pid, "{again} after {pid}");
}

/// A question relayed to a 2025-11-25 client on a call that is no task
/// waits for its answer no longer than a parked call would: then the
/// upstream is told the client did not answer, the call ends, and its
/// process takes the next call. Before, a client that never answered held
/// the call, and its process, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_the_client_never_answers_does_not_hold_the_process() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(10))
        .with_upstream_processes(1)
        .with_parked_calls(Duration::from_secs(1), 100)
        .with_tool_policy("confirm_delete", TaskPolicy::Sync)
        .with_tool_policy("pid", TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let asked = gw.send_with_peer(
        "tools/call",
        json!({ "name": "confirm_delete", "arguments": { "filename": "x.txt" } }),
        mcp_task_layer::Peer::new(crate::common::peer::Unresponsive),
    );
    let r = tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .expect("the call ends once the wait for the answer is over");
    let said = serde_json::to_string(&r).unwrap();
    assert!(said.contains("did not answer"), "{said}");
    let pid = text(&gw.call("pid", json!({})).await).to_owned();
    assert!(!pid.is_empty());
}

/// One process: call A waits for its client's answer there while call B
/// runs on it. A's answer comes, so A waits for B to end before it goes
/// on; B then asks its client a question, which is B's, not "one of two
/// calls". Before, A counted as running again from its answer on, and
/// B's question was refused as belonging to neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_to_resume_leaves_the_running_calls_questions_to_it() {
    let (_dir, file) = events_file();
    let Some((gw, a, key)) = waiting_on_one_process(&file, "late_question").await else {
        return;
    };
    // B, a 2025-11-25 call that is no task: its question is relayed to its
    // client (which answers "Grace").
    let b = {
        let gw = gw.as_owner("alice");
        tokio::spawn(async move {
            gw.send_with_peer(
                "tools/call",
                json!({ "name": "late_question", "arguments": { "seconds": 2 } }),
                mcp_task_layer::Peer::new(crate::common::peer::TestPeer::default()),
            )
            .await
        })
    };
    event(&file, "started late_question").await;
    // A's answer: A waits for the process while B works, then asks.
    gw.send26(
        "tasks/update",
        json!({ "taskId": a, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }),
        true,
    )
    .await;
    let b = b.await.unwrap();
    assert_eq!(text(crate::common::ok(&b)), "Hello, Grace!");
    assert_eq!(
        text(&gw.status(&a, "completed").await["result"]),
        "Deleted a.txt."
    );
}

/// A call that ends without its answer (its caller gone) may leave its
/// handler running upstream, and over stdio nothing would tell that
/// handler's later questions from the next call's: the next call, of any
/// client, gets a new process. Before, it got the same one, and a question
/// the old handler asked went to whoever called next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_of_a_call_that_ended_unanswered_takes_no_other_call() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(20))
        .with_upstream_processes(1)
        .with_tool_policy("slow_compute", TaskPolicy::Sync)
        .with_tool_policy("pid", TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let before = text(&gw.call("pid", json!({})).await).to_owned();
    let running = Running::start(
        gw.as_owner("alice"),
        &file,
        "slow_compute",
        json!({ "seconds": 60, "label": "left" }),
    )
    .await;
    running.leave().await;
    let bob = gw.as_owner("bob");
    let after = text(&bob.call("pid", json!({})).await).to_owned();
    assert_ne!(before, after, "bob's call runs on a new process");
    let again = text(&bob.call("pid", json!({})).await).to_owned();
    assert_eq!(after, again, "an answered call keeps its process");
}

/// The same for a request that is no tool call: a prompt whose question
/// the client leaves unanswered past the wait (1 s) ends unanswered, and
/// the calls after it get a new process. Before, its process took the next
/// calls, and a later question of the prompt's handler (an upstream that
/// goes on after a cancel) went to the one call running there, another
/// client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_of_a_request_that_ended_unanswered_takes_no_other_call() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(20))
        .with_upstream_processes(1)
        .with_parked_calls(Duration::from_secs(1), 100)
        .with_tool_policy("pid", TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let before = text(&gw.call("pid", json!({})).await).to_owned();
    let asked = gw
        .as_owner("alice")
        .send26("prompts/get", json!({ "name": "greeting" }), false)
        .await;
    assert_eq!(common::ok(&asked)["resultType"], "input_required");
    let bob = gw.as_owner("bob");
    // Bounded: 20 s.
    for _ in 0..200 {
        let now = text(&bob.call("pid", json!({})).await).to_owned();
        if !now.is_empty() && now != before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the prompt's process {before} still takes calls");
}

/// The bound on processes holds (a running call holds one; the next call
/// is refused after the connect wait), and a call waiting for answers
/// holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_bound_holds_and_a_waiting_call_does_not_hold_a_process() {
    let (_dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let cfg = ProxyConfig::default()
        .with_tool_policy("confirm_delete", TaskPolicy::Task)
        .with_tool_policy("slow_compute", TaskPolicy::Task)
        .with_tool_policy("greet", TaskPolicy::Sync)
        .with_upstream_processes(1)
        .with_connect_wait(Duration::from_millis(500));
    let gw = Gateway::with_config(up, cfg).await;

    // A call waiting for answers leaves its process to others.
    let a = gw
        .call("confirm_delete", json!({ "filename": "a.txt" }))
        .await;
    let a = a["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&a, "input_required").await;
    let key = crate::harness::first_question(&t);
    assert_eq!(
        text(&gw.call("greet", json!({ "name": "x" })).await),
        "Hello, x!"
    );

    // A running call holds the one process: the next call is refused with
    // the reason after the connect wait, not queued forever.
    let slow = gw
        .call("slow_compute", json!({ "seconds": 60, "label": "busy" }))
        .await;
    let slow = slow["taskId"].as_str().unwrap().to_owned();
    event(&file, "started slow_compute").await;
    let refused = gw
        .send26(
            "tools/call",
            json!({ "name": "greet", "arguments": { "name": "y" } }),
            true,
        )
        .await;
    assert!(
        common::err(&refused).message.contains("busy"),
        "{:?}",
        common::err(&refused)
    );

    // The answered call goes on once the process is free again.
    gw.send26("tasks/update", json!({ "taskId": a, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }), true).await;
    assert_eq!(gw.get(&a).await["status"], "working");
    gw.send26("tasks/cancel", json!({ "taskId": slow }), true)
        .await;
    assert_eq!(
        text(&gw.status(&a, "completed").await["result"]),
        "Deleted a.txt."
    );
    // The cancelled call's process is started again once `a` has left it
    // (its handler might still ask): the next call works once it is up
    // (bounded: 20 connect waits).
    let mut z = None;
    for _ in 0..20 {
        let r = gw
            .send26(
                "tools/call",
                json!({ "name": "greet", "arguments": { "name": "z" } }),
                true,
            )
            .await;
        if let Some(result) = r.result_value() {
            z = Some(result.clone());
            break;
        }
    }
    assert_eq!(text(&z.expect("greet z answered")), "Hello, z!");
}

/// The Python upstream behind `sh -c PREFIX; exec ...`.
fn wrapped(up: UpstreamTarget, prefix: &str) -> UpstreamTarget {
    let UpstreamTarget::Command { program, args } = up else {
        unreachable!("the Python upstream is a command")
    };
    UpstreamTarget::Command {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("{prefix}; exec {program} {}", args.join(" ")),
        ],
    }
}

/// A burst of calls that each need a process of their own starts them one
/// at a time (`with_upstream_starts(1)`), and every call is answered.
/// Before, the burst started every process at once: on a small host
/// (CI's two cores, the Python interpreter's start) none came up within the
/// connect wait, and the calls, and new sessions, failed with "the
/// upstream is unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_calls_starts_processes_one_at_a_time() {
    let (dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let starts = dir.path().join("starts");
    let up = wrapped(
        up,
        &format!(
            "echo begin >> {0}; sleep 0.5; echo end >> {0}",
            starts.display()
        ),
    );
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(30))
        .with_upstream_processes(4)
        .with_upstream_starts(1)
        .with_tool_policy("slow_compute", TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let gw = gw.as_owner("alice");
            tokio::spawn(async move {
                gw.call(
                    "slow_compute",
                    json!({ "seconds": 6, "label": format!("burst {i}") }),
                )
                .await
            })
        })
        .collect();
    for call in calls {
        let answer = call.await.unwrap();
        assert!(text(&answer).contains("burst"), "{answer}");
    }
    let log = std::fs::read_to_string(&starts).unwrap();
    let (mut starting, mut most, mut begun) = (0_i32, 0, 0);
    for line in log.lines() {
        if line == "begin" {
            starting += 1;
            begun += 1;
        } else {
            starting -= 1;
        }
        most = most.max(starting);
    }
    // Four with a fast start; fewer where a call took the first process
    // when its call ended before the next process was up.
    assert!(begun >= 2, "more processes for calls at once: {log}");
    assert_eq!(most, 1, "processes started one at a time: {log}");
}

/// A new session is answered from another live process while the primary
/// one starts again (a call on it ended unanswered) and takes its time.
/// Before, `initialize` waited for the primary alone and failed after the
/// connect wait although another process was up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_is_answered_while_the_primary_process_starts_again() {
    let (dir, file) = events_file();
    let Some(up) = python(&file) else { return };
    let slow = dir.path().join("slow");
    let up = wrapped(
        up,
        &format!("if [ -e {0} ]; then sleep 30; fi", slow.display()),
    );
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(3))
        .with_upstream_processes(2)
        .with_tool_policy("slow_compute", TaskPolicy::Sync)
        .with_tool_policy("pid", TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let running = Running::start(
        gw.as_owner("alice"),
        &file,
        "slow_compute",
        json!({ "seconds": 60, "label": "left" }),
    )
    .await;
    // A second process, for this call while the first runs; bounded: the
    // first call may meet it still starting (20 connect waits).
    let mut second = None;
    for _ in 0..20 {
        let r = gw.send26(
            "tools/call",
            json!({ "name": "pid", "arguments": {} }),
            false,
        );
        if let Some(result) = r.await.result_value() {
            second = Some(text(result).to_owned());
            break;
        }
    }
    assert!(second.is_some(), "a second process answers");
    // The primary's call goes unanswered: its process ends, and its next
    // start takes 30 s.
    std::fs::write(&slow, b"").unwrap();
    running.leave().await;
    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": { "name": "test", "version": "1" },
    });
    let r = gw.send("initialize", init).await;
    assert_eq!(
        common::ok(&r)["serverInfo"]["name"],
        "mcp-task-layer-test-upstream",
        "{r:?}"
    );
}

/// One process: alice's call waits there for her answer when bob's call,
/// running on it, is dropped (bob went away), and bob's handler, which
/// ignores the cancel, asks a question anyway. The question is refused:
/// it is nobody's now. Before, the process's one remaining call was taken
/// as the asker, and bob's question reached alice's task. Alice's call
/// then goes on as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_handlers_question_never_reaches_a_call_waiting_on_its_process() {
    let (_dir, file) = events_file();
    let Some((gw, a, key)) = waiting_on_one_process(&file, "stubborn_question").await else {
        return;
    };
    let running = Running::start(
        gw.as_owner("bob"),
        &file,
        "stubborn_question",
        json!({ "seconds": 1 }),
    )
    .await;
    running.leave().await;
    event(&file, "stubborn refused").await;
    let t = gw.get(&a).await;
    assert!(
        !t.to_string().contains("stubborn"),
        "alice's task shows bob's question: {t}"
    );
    gw.send26(
        "tasks/update",
        json!({ "taskId": a, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } }),
        true,
    )
    .await;
    assert_eq!(
        text(&gw.status(&a, "completed").await["result"]),
        "Deleted a.txt."
    );
}

/// A call of the gateway's caller that runs upstream until the caller goes
/// away.
struct Running(tokio::task::JoinHandle<mcp_task_layer::JsonRpcResponse>);

impl Running {
    /// `tool` called by `gw`'s caller, once the upstream says it started.
    async fn start(gw: Gateway, events: &std::path::Path, tool: &str, args: Value) -> Self {
        let name = tool.to_owned();
        let call = tokio::spawn(async move {
            gw.send("tools/call", json!({ "name": name, "arguments": args }))
                .await
        });
        event(events, &format!("started {tool}")).await;
        Running(call)
    }

    /// The caller goes away: the call is dropped unanswered.
    async fn leave(self) {
        self.0.abort();
        assert!(self.0.await.is_err(), "the call was still running");
    }
}

/// A gateway over one upstream process (writing its events to `events`;
/// `sync` a synchronous tool), on which alice's `confirm_delete` task
/// waits for her answer: the gateway, the task and its question's key.
/// `None` without the Python upstream.
async fn waiting_on_one_process(
    events: &std::path::Path,
    sync: &str,
) -> Option<(Gateway, String, String)> {
    let up = python(events)?;
    let cfg = ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(20))
        .with_upstream_processes(1)
        .with_tool_policy("confirm_delete", TaskPolicy::Task)
        .with_tool_policy(sync, TaskPolicy::Sync);
    let gw = Gateway::with_config(up, cfg).await;
    let a = gw
        .call("confirm_delete", json!({ "filename": "a.txt" }))
        .await;
    let a = a["taskId"].as_str().unwrap().to_owned();
    let t = gw.status(&a, "input_required").await;
    let key = crate::harness::first_question(&t);
    Some((gw, a, key))
}
