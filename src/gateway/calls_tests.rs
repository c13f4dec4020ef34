//! The gateway's call tables: what reaches which call, and what a
//! parked call leaves behind when it goes.

use super::*;

/// Over Streamable HTTP one link carries every client's calls: what the
/// upstream sends on the answer stream of a call that has ended (client
/// A cancelled it) never goes to the one other call on the link
/// (client B's). Before, it went to B: A's question and its parameters
/// into B's task, A's log onto B's stream.
#[tokio::test]
async fn a_message_for_an_ended_call_never_reaches_another_call() {
    let notices = Notices::default();
    let mut heard = notices.subscribe();
    let calls = Calls::new(
        ParkLimits {
            ttl: Duration::from_secs(60),
            max: 10,
            per_owner: 10,
        },
        notices,
    );
    let (out, mut sent) = mpsc::channel(8);
    let link = Link::new(1, out);
    let (a, b) = (5, 7);
    let a_events = calls.register(1, a);
    drop(a_events);
    calls.unregister(1, a);
    let mut b_events = calls.register(1, b);

    let ask = json!({ "message": "A's secret question", "requestedSchema": {} });
    calls.inbound(
        &link,
        Inbound::Request {
            id: json!(99),
            method: "elicitation/create".into(),
            params: ask,
            related: Some(a),
        },
    );
    calls.inbound(
        &link,
        Inbound::Notification {
            method: LOG_MESSAGE.into(),
            params: json!({ "level": "info", "data": "A's log" }),
            related: Some(a),
        },
    );
    assert!(b_events.try_recv().is_err(), "nothing of A's reaches B");
    assert!(heard.try_recv().is_err(), "nor every listening client");
    let refused: serde_json::Value = serde_json::from_slice(&sent.try_recv().unwrap()).unwrap();
    assert_eq!(refused["id"], 99);
    assert_eq!(
        refused["error"],
        serde_json::to_value(call_ended()).unwrap()
    );

    // B's own question still reaches B.
    calls.inbound(
        &link,
        Inbound::Request {
            id: json!(100),
            method: "elicitation/create".into(),
            params: json!({}),
            related: Some(b),
        },
    );
    assert!(matches!(b_events.try_recv(), Ok(CallEvent::Ask { .. })));
}

/// A parked call's timer ends when the call leaves the table (here,
/// answered): before, each park left a task sleeping out the whole
/// TTL (24 h by default) after its call had gone on, one more for
/// every round of questions.
#[tokio::test(flavor = "current_thread")]
async fn a_call_that_leaves_the_table_takes_its_timer_with_it() {
    let calls = table();
    let (out, _sent) = mpsc::channel(8);
    let link = Link::new(1, out);
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = alive();
    for round in 0..3 {
        let call = started(&calls, &link, round);
        let key = format!("k{round}");
        calls
            .park(call, Some("alice".into()), None, key.clone(), "tools/call")
            .unwrap();
        assert_eq!(alive(), before + 1, "its timer");
        let call = calls
            .unpark(&key, Some("alice"), "tools/call")
            .expect("parked");
        // Bounded: the timer sees its token at its next poll.
        for _ in 0..10 {
            if alive() == before {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(alive(), before, "round {round}: no timer left");
        drop(call);
    }
}

/// Upstream request `id` on `link` (serial 1), registered with `calls`.
fn started(calls: &Arc<Calls>, link: &Arc<Link>, id: u64) -> UpstreamCall {
    let events = calls.register(1, id);
    let registry = Arc::clone(calls) as Arc<dyn Registry>;
    UpstreamCall::start(registry, events, link, None, id, "{}".into())
}

/// A table whose parked calls wait an hour, ten at most.
fn table() -> Arc<Calls> {
    Calls::new(
        ParkLimits {
            ttl: Duration::from_secs(3_600),
            max: 10,
            per_owner: 10,
        },
        Notices::default(),
    )
}

/// A call parked before its task is known, and answered (unparked) before
/// any task ends, leaves nothing in the table. Before, its key stayed in
/// the list of calls to bind to their tasks until some task ended.
#[tokio::test(flavor = "current_thread")]
async fn a_call_parked_without_its_task_leaves_no_key_behind() {
    let calls = table();
    let (out, _sent) = mpsc::channel(8);
    let link = Link::new(1, out);
    for round in 0..3 {
        let call = started(&calls, &link, round);
        let handle = TaskHandle::unbound(CancellationToken::new());
        let key = format!("k{round}");
        calls
            .park(call, None, Some(handle), key.clone(), "tools/call")
            .unwrap();
        assert_eq!(lock(&calls.parked).unbound.len(), 1);
        let call = calls.unpark(&key, None, "tools/call").expect("parked");
        drop(call);
    }
    assert!(lock(&calls.parked).unbound.is_empty());
    assert_eq!(calls.parked(), 0);
}

/// A call whose connection closed before it could park (the upstream
/// process died while it asked) is refused: nothing would ever take it
/// out of the table again, holding its client's slot for the wait's TTL.
#[tokio::test(flavor = "current_thread")]
async fn a_call_on_a_closed_connection_never_parks() {
    let calls = table();
    let (out, _sent) = mpsc::channel(8);
    let link = Link::new(1, out);
    let call = started(&calls, &link, 1);
    link.close("the upstream process exited".to_owned());
    let refused = calls
        .park(call, Some("alice".into()), None, "k".into(), "tools/call")
        .expect_err("refused");
    assert!(refused.message.contains("connection ended"), "{refused:?}");
    assert_eq!(calls.parked(), 0);
}
