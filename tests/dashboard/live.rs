//! Live pages: the open task and the counts change over SSE, also when
//! another process writes (PostgreSQL's feed).

use super::*;

/// An SSE stream's `data:` payloads, one at a time.
struct Events {
    body: hyper::body::Incoming,
    buffer: String,
}

impl Events {
    async fn open(addr: SocketAddr, path: &str) -> Events {
        let bearer = format!("Bearer {READ_ONLY}");
        Events::open_as(addr, path, ("authorization", &bearer)).await
    }

    /// The stream of `path` for the caller `credential` (a header) names.
    async fn open_as(addr: SocketAddr, path: &str, credential: (&str, &str)) -> Events {
        let response = Events::request(addr, path, credential).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[CONTENT_TYPE], "text/event-stream");
        Events {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// `GET path` as the caller `credential` names; the response, its
    /// body unread.
    async fn request(
        addr: SocketAddr,
        path: &str,
        credential: (&str, &str),
    ) -> hyper::Response<hyper::body::Incoming> {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let request = Request::get(path)
            .header(HOST, addr.to_string())
            .header(credential.0, credential.1)
            .body(Full::new(Bytes::new()))
            .unwrap();
        sender.send_request(request).await.unwrap()
    }

    /// The next `update` event's data (within 30 s).
    async fn next(&mut self) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if event.contains("event: update") {
                    let data = event
                        .lines()
                        .find_map(|l| l.strip_prefix("data: "))
                        .unwrap();
                    return serde_json::from_str(data).unwrap();
                }
                continue;
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("an update in time")
                .expect("the stream goes on")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    /// Wait (at most 30 s) for the stream to end; an update before its
    /// end fails the test.
    async fn ends(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                !self.buffer.contains("event: update"),
                "an update after the session ended: {}",
                self.buffer
            );
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("the stream ends in time");
            let Some(frame) = frame else { return };
            if let Ok(data) = frame.unwrap().into_data() {
                self.buffer.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }
}

/// A browser's live stream ends with its session: once it signs out, the
/// open task's next change is not sent and the stream ends. Before, a
/// stream opened with a cookie went on for ever, after a sign-out or past
/// the session's end too.
///
/// Live streams are bounded (here one at a time): another is refused
/// with 503 while that one is open, and its slot comes back when it ends.
#[tokio::test]
async fn a_sessions_live_stream_ends_when_it_signs_out() {
    let layer: TaskLayer = layer();
    let operator = layer.operator();
    let dashboard = Dashboard::new(layer.operator(), access()).with_max_live_streams(1);
    let addr = serve_dashboard(dashboard).await;
    let mut client = Client::new(layer);
    let id = client.start("ask", json!({})).await;
    client.wait_for(&id, TaskStatus::InputRequired).await;
    let cookie = sign_in(addr, FULL).await;
    let path = format!("/ops/events?view=task&id={id}");
    let mut task = Events::open_as(addr, &path, ("cookie", &cookie)).await;
    assert_eq!(task.next().await["status"], "input_required");
    let bearer = format!("Bearer {READ_ONLY}");
    let refused = get(
        addr,
        "/ops/events?view=counts",
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );

    let page = get(addr, "/ops/tasks", &[("cookie", &cookie)]).await;
    let out = send(
        addr,
        Method::POST,
        "/ops/sign-out",
        &[(CONTENT_TYPE.as_str(), FORM), ("cookie", &cookie)],
        &format!("csrf={}", csrf_of(&page.body)),
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    operator.cancel(&id).await.unwrap();
    task.ends().await;
    // Bounded: the server drops the ended stream right after its end.
    let mut status = None;
    for _ in 0..100 {
        let r = Events::request(addr, "/ops/events?view=counts", ("authorization", &bearer)).await;
        if r.status() != StatusCode::SERVICE_UNAVAILABLE {
            status = Some(r.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, Some(StatusCode::OK), "the ended stream's slot");
}

#[tokio::test]
async fn the_open_task_and_the_counts_change_over_sse() {
    let layer: TaskLayer = layer();
    let operator = layer.operator();
    let addr = serve(layer.operator(), access()).await;
    let mut client = Client::new(layer);
    let id = client.start("ask", json!({})).await;
    client.wait_for(&id, TaskStatus::InputRequired).await;

    let mut task = Events::open(addr, &format!("/ops/events?view=task&id={id}")).await;
    let mut counts = Events::open(addr, "/ops/events?view=counts").await;
    let first = task.next().await;
    assert_eq!(first["status"], "input_required");
    assert!(first["fragments"]["live-task"]
        .as_str()
        .unwrap()
        .contains("elicitation/create"));
    let before = counts.next().await;
    assert_eq!(before["counts"]["input_required"], 1);
    assert_eq!(before["counts"]["cancelled"], 0);

    operator.cancel(&id).await.unwrap();
    let after = task.next().await;
    assert_eq!(after["status"], "cancelled");
    assert!(after["fragments"]["live-task"]
        .as_str()
        .unwrap()
        .contains(r#"data-status="cancelled""#));
    let after = counts.next().await;
    assert_eq!(after["counts"]["cancelled"], 1);
    assert_eq!(after["counts"]["input_required"], 0);

    let bad = get(
        addr,
        "/ops/events?view=nope",
        &[("authorization", &format!("Bearer {READ_ONLY}"))],
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("view \"nope\""));
}

/// A dashboard over a store alone (as `mcp-tasks dashboard` runs) hears of
/// another process's write through PostgreSQL's change feed: the update
/// is the only way the page hears of it (no resync within the test).
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_write_reaches_the_open_page_through_the_postgres_feed() {
    let Some(url) = common::pg::url() else { return };
    let tables = common::pg::Tables::new(&url, "dashboard");
    let table = tables.next();
    let runner = layer_on(tables.store(&table).await).with_lease_ttl(Duration::from_secs(600));
    let mut client = Client::new(runner).as_owner("alice");
    let id = client.start("ask", json!({})).await;
    client.wait_for(&id, TaskStatus::InputRequired).await;
    // No resync within the test: the feed is the only way the page hears.
    let alone = Dashboard::new(Operator::new(tables.store(&table).await), access())
        .with_resync_period(Duration::from_secs(3600));
    let addr = serve_dashboard(alone).await;

    let mut task = Events::open(addr, &format!("/ops/events?view=task&id={id}")).await;
    assert_eq!(task.next().await["status"], "input_required");
    // The owner's tasks/cancel, written by the runner's layer.
    ok(&client.cancel(&id).await);
    let after = task.next().await;
    assert_eq!(after["status"], "cancelled");
    tables.drop_all().await;
}
