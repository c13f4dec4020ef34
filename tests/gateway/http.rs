//! The gateway in front of upstreams served over Streamable HTTP:
//! tests/gateway/upstream.py `--http PORT` and server-everything's
//! `streamableHttp` mode. Over HTTP a question arrives on the answer stream
//! of the call that asked it, so calls asking at once are told apart.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_task_layer::gateway::{ProxyConfig, UpstreamTarget};
use mcp_task_layer::TaskPolicy;
use serde_json::json;

use crate::common;
use crate::fake::{fake_upstream, Fake};
use crate::harness::{event, events_file, text, Gateway};

/// An upstream process, killed (and continued first, if stopped) when the
/// test ends.
pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.id().to_string()])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start `line` (with `env`) and wait (at most 30 s) until it accepts on
/// `port`.
async fn serve(line: &str, port: u16, env: &[(&str, String)]) -> (Server, UpstreamTarget) {
    let mut words = line.split_whitespace();
    let mut cmd = Command::new(words.next().unwrap());
    cmd.args(words).stdin(Stdio::null()).stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let server = Server(cmd.spawn().unwrap());
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            let url = format!("http://127.0.0.1:{port}/mcp");
            return (
                server,
                UpstreamTarget::Url {
                    url,
                    headers: vec![],
                },
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{line} never listened on {port}");
}

pub(crate) async fn python(events: &std::path::Path) -> Option<(Server, UpstreamTarget)> {
    python_with(events, "").await
}

async fn python_with(events: &std::path::Path, flags: &str) -> Option<(Server, UpstreamTarget)> {
    let py = common::server_url(
        "MCP_TASKS_PYTHON",
        "Python with the mcp package",
        ".ci/python.sh",
    )?;
    let port = free_port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gateway/upstream.py");
    let line = format!("{py} {script} --http {port} {flags}");
    Some(
        serve(
            &line,
            port,
            &[("UPSTREAM_EVENTS", events.display().to_string())],
        )
        .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_two_calls_asking_at_once_each_get_their_own_answer() {
    let (_dir, file) = events_file();
    let Some((_server, up)) = python(&file).await else {
        return;
    };
    let gw = Gateway::start(
        up,
        &[
            ("confirm_delete", TaskPolicy::Task),
            ("long", TaskPolicy::Task),
        ],
    )
    .await;

    crate::python::calls_asking_at_once_get_their_own_answers(&gw, &file).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_cancel_reaches_the_upstream() {
    let (_dir, file) = events_file();
    let Some((_server, up)) = python(&file).await else {
        return;
    };
    let gw = Gateway::start(up, &[("slow_compute", TaskPolicy::Task)]).await;
    let r = gw
        .call("slow_compute", json!({ "seconds": 60, "label": "h1" }))
        .await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    event(&file, "started slow_compute").await;
    gw.send26("tasks/cancel", json!({ "taskId": task }), true)
        .await;
    event(&file, "cancelled h1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_stops_answering_fails_its_calls_and_the_next_call_works_once_it_is_back()
{
    let (_dir, file) = events_file();
    let Some((server, up)) = python(&file).await else {
        return;
    };
    let cfg = ProxyConfig::default()
        .with_tool_policy("slow_compute", TaskPolicy::Task)
        .with_tool_policy("greet", TaskPolicy::Sync)
        .with_connect_wait(Duration::from_secs(30))
        .with_keepalive(Duration::from_millis(200), Duration::from_millis(500));
    let gw = Gateway::with_config(up, cfg).await;
    let r = gw
        .call("slow_compute", json!({ "seconds": 60, "label": "s" }))
        .await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    event(&file, "started slow_compute").await;
    let pid = server.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let t = gw.status(&task, "failed").await;
    let message = t["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer a ping"), "{message}");
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    let r = gw.call("greet", json!({ "name": "again" })).await;
    assert_eq!(text(&r), "Hello, again!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_http_gets_tasks_with_progress_and_elicitation() {
    let Some(line) = common::server_url(
        "MCP_TASKS_EVERYTHING_HTTP",
        "@modelcontextprotocol/server-everything",
        ".ci/python.sh: ensure_everything",
    ) else {
        return;
    };
    let port = free_port();
    let (_server, up) = serve(&line, port, &[("PORT", port.to_string())]).await;
    let gw = Gateway::start(
        up,
        &[
            ("trigger-long-running-operation", TaskPolicy::Task),
            ("trigger-elicitation-request", TaskPolicy::Task),
        ],
    )
    .await;
    crate::everything::progress_and_elicitation(&gw).await;
}

/// The upstream closes a call's SSE stream before answering (the
/// 2025-11-25 transport lets a server do so, keeping its events): the
/// gateway resumes with `GET` and `Last-Event-ID` and the call gets its
/// answer, instead of "closed the stream without answering".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_closed_before_its_answer_is_resumed_after_the_last_event() {
    let (_dir, file) = events_file();
    let Some((_server, up)) = python_with(&file, "--resumable").await else {
        return;
    };
    let gw = Gateway::start(up, &[("hop", TaskPolicy::Sync)]).await;
    for _ in 0..2 {
        let result = gw.call("hop", json!({})).await;
        assert_eq!(text(&result), "landed", "{result}");
    }
    event(&file, "finished hop").await;
}

/// The session's `GET` stream ends (the upstream or a proxy between closes
/// it): the gateway opens it again, and what the upstream says there later
/// (its tools changed) still arrives. Before, the stream was opened once,
/// and every notification after its end was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_stream_is_opened_again_when_it_ends() {
    let (up, fake) = fake_upstream().await;
    let gw = Gateway::start(up, &[]).await;
    // Bounded: 10 s.
    for _ in 0..200 {
        let tools = gw.send("tools/list", json!({})).await;
        let names: Vec<String> = common::ok(&tools)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        if names.iter().any(|n| n == "second") {
            assert!(fake.gets.load(Ordering::SeqCst) >= 2);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the tools never changed: the stream was not opened again");
}

/// An upstream that never ends the answer stream of a request it was told
/// to cancel (the TypeScript SDK sends no answer then): the gateway stops
/// reading the stream when it stops waiting, and its connection closes.
/// Before, each cancelled call kept a task and a connection open for the
/// life of the upstream's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_calls_answer_stream_is_closed_though_the_upstream_never_ends_it() {
    let (up, fake) = fake_upstream().await;
    let gw = Gateway::start(up, &[("hang", TaskPolicy::Task)]).await;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let r = gw.call("hang", json!({})).await;
        tasks.push(r["taskId"].as_str().unwrap().to_owned());
    }
    // Bounded waits: 10 s each.
    let settle = |want: usize| {
        let fake = Arc::clone(&fake);
        async move {
            for _ in 0..200 {
                if fake.open.load(Ordering::SeqCst) == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!(
                "{} streams open, not {want}",
                fake.open.load(Ordering::SeqCst)
            );
        }
    };
    settle(3).await;
    for task in &tasks {
        gw.send26("tasks/cancel", json!({ "taskId": task }), true)
            .await;
    }
    settle(0).await;
}

/// An upstream that stops answering (its pings go unanswered) is given up,
/// and every request the gateway had sent it lets go of its connection:
/// the answer stream of a call in flight and the unanswered pings. Before,
/// each stayed open for as long as the upstream kept it, after the
/// connection it belonged to had ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_given_up_holds_none_of_the_gateways_requests() {
    let (up, fake) = fake_upstream().await;
    let cfg = mcp_task_layer::gateway::ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(30))
        .with_tool_policy("hang", TaskPolicy::Sync)
        .with_keepalive(Duration::from_millis(200), Duration::from_millis(500));
    let gw = Gateway::with_config(up, cfg).await;
    let call = {
        let gw = gw.as_owner("alice");
        tokio::spawn(async move {
            gw.send("tools/call", json!({ "name": "hang", "arguments": {} }))
                .await
        })
    };
    // Bounded: 10 s.
    for _ in 0..200 {
        if fake.open.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.open.load(Ordering::SeqCst), 1, "the call's stream");
    fake.mute.store(true, Ordering::SeqCst);
    let failed = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the call fails once the upstream is given up")
        .unwrap();
    assert!(
        common::err(&failed).message.contains("upstream"),
        "{failed:?}"
    );
    // Bounded: 10 s.
    for _ in 0..200 {
        if fake.open.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.open.load(Ordering::SeqCst), 0, "its stream let go");
    // The upstream answers again: no ping of a connection given up is
    // still held (bounded: 10 s).
    fake.mute.store(false, Ordering::SeqCst);
    for _ in 0..200 {
        if fake.hung.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        fake.hung.load(Ordering::SeqCst),
        0,
        "unanswered pings let go"
    );
}

/// An upstream that says its tools changed and then does not answer the
/// `tools/list` is given up as one that does not answer a ping: the
/// gateway connects again. Before, it waited for that list with no
/// deadline and sent no ping meanwhile, so every call on the connection
/// hung for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_does_not_list_its_changed_tools_is_given_up() {
    let (up, fake) = fake_upstream().await;
    fake.relist_hangs.store(true, Ordering::SeqCst);
    let cfg = mcp_task_layer::gateway::ProxyConfig::default()
        .with_connect_wait(Duration::from_secs(30))
        // Pings far apart: none is out when the tools change.
        .with_keepalive(Duration::from_secs(30), Duration::from_millis(500));
    let _gw = Gateway::with_config(up, cfg).await;
    // The session's stream says the tools changed; the list never comes
    // (bounded: 10 s).
    for _ in 0..200 {
        if fake.inits.load(Ordering::SeqCst) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fake.tools_lists.load(Ordering::SeqCst) >= 2,
        "the tools were listed again"
    );
    assert!(fake.inits.load(Ordering::SeqCst) >= 2, "connected again");
}

/// Over Streamable HTTP one connection carries every client's calls: a
/// question the upstream asks on its session's stream, with no request of
/// the gateway's to say whose it is, is no call's. It is answered with an
/// error and reaches no client's call, even when one call alone is in
/// flight. Before, it went to that call, whoever's client it was (another
/// client's roots or answers to a session serving someone else).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_on_the_sessions_stream_reaches_no_clients_call() {
    let (up, fake) = fake_upstream().await;
    fake.ask_on_get.store(true, Ordering::SeqCst);
    let gw = Gateway::start(up, &[("hang", TaskPolicy::Task)]).await;
    let r = gw.call("hang", json!({})).await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    // Bounded: 20 s.
    let mut answer = None;
    for _ in 0..400 {
        answer = fake.answer_777.lock().unwrap().clone();
        if answer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = answer.expect("the gateway answers the question itself");
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(gw.get(&task).await["status"], "working");
}

/// A cancelled call whose upstream answers in JSON (no headers before the
/// answer, and no answer to a cancelled request) lets go of its
/// connection. Before, the request waited for headers for as long as the
/// connection lived: one task and one connection more for every
/// cancelled call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_waiting_for_the_upstreams_headers_lets_go() {
    cancelling_lets_go("silent", |fake| &fake.silent).await;
}

/// A task of `tool` on the fake upstream holds one of `open` until it is
/// cancelled, and none after.
async fn cancelling_lets_go(tool: &str, open: fn(&Fake) -> &AtomicUsize) {
    let (up, fake) = fake_upstream().await;
    let gw = Gateway::start(up, &[(tool, TaskPolicy::Task)]).await;
    let r = gw.call(tool, json!({})).await;
    let task = r["taskId"].as_str().unwrap().to_owned();
    let settles = |want: usize| {
        let fake = Arc::clone(&fake);
        async move {
            // Bounded: 10 s.
            for _ in 0..200 {
                if open(&fake).load(Ordering::SeqCst) == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let now = open(&fake).load(Ordering::SeqCst);
            panic!("{tool}: {now} open, not {want}");
        }
    };
    settles(1).await;
    gw.send26("tasks/cancel", json!({ "taskId": task }), true)
        .await;
    settles(0).await;
}

/// The upstream has taken `notifications/initialized` before any request
/// after the handshake reaches it, as from an SDK client (the Python SDK
/// refuses requests before it). Before, the gateway's `tools/list` went
/// out beside the notification and could arrive first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_hears_initialized_before_any_request_after_it() {
    let (up, fake) = fake_upstream().await;
    fake.slow_initialized.store(true, Ordering::SeqCst);
    let gw = Gateway::start(up, &[]).await;
    let tools = gw.send("tools/list", json!({})).await;
    assert!(common::ok(&tools)["tools"].is_array());
    assert_eq!(fake.early.load(Ordering::SeqCst), 0);
}

/// An upstream that keeps a call's answer stream open after the answer
/// (the spec says it SHOULD close it) holds nothing of the gateway's: the
/// gateway stops reading and lets the stream go once the answer is in.
/// Before, each such call kept a task and a connection for the
/// connection's life.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stream_the_upstream_keeps_open_is_let_go_after_the_answer() {
    let (up, fake) = fake_upstream().await;
    let gw = Gateway::start(up, &[("linger", TaskPolicy::Sync)]).await;
    for _ in 0..3 {
        let r = gw.call("linger", json!({})).await;
        assert_eq!(crate::harness::text(&r), "lingered");
    }
    // Bounded: 10 s.
    for _ in 0..200 {
        if fake.open.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        fake.open.load(Ordering::SeqCst),
        0,
        "answer streams still open"
    );
}

/// An upstream that takes a call (HTTP 202) with no answer in the body:
/// the call fails at once, saying so. Before, it waited for an answer that
/// no stream was left to bring, for as long as its caller did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_body_without_the_answer_fails_the_call() {
    let (up, _fake) = fake_upstream().await;
    let gw = Gateway::start(up, &[("blank", TaskPolicy::Sync)]).await;
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        gw.send26(
            "tools/call",
            json!({ "name": "blank", "arguments": {} }),
            true,
        ),
    )
    .await
    .expect("the call is answered");
    let r = serde_json::to_value(&r).unwrap();
    let failed = r.to_string();
    assert!(failed.contains("held no answer to the request"), "{failed}");
}

/// A call's stream ends before its answer and the upstream never sends
/// the headers of the `GET` that resumes it: once the call is cancelled,
/// that `GET` is let go. Before, it was waited for as long as the
/// connection lived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_calls_resuming_get_is_let_go() {
    cancelling_lets_go("cut", |fake| &fake.resumes).await;
}
