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
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let request = Request::get(path)
            .header(HOST, addr.to_string())
            .header("authorization", format!("Bearer {READ_ONLY}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[CONTENT_TYPE], "text/event-stream");
        Events {
            body: response.into_body(),
            buffer: String::new(),
        }
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
