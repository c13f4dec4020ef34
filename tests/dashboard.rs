//! The dashboard over HTTP, nested at `/ops` as an application would:
//! nobody gets in without a token, sign-in sets a strict cookie, actions
//! need the full role, the session's CSRF token and an allowed `Origin`,
//! task texts are escaped, the list filters and pages, and the open task
//! and the counts change over SSE. (`cli/tests/dashboard.rs` drives the
//! same pages in Chromium.)
#![cfg(feature = "dashboard")]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::header::{CONTENT_TYPE, HOST};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use common::wire::send_to;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use mcp_task_layer::dashboard::{Access, Dashboard};
use mcp_task_layer::store::{Era, MemoryStore, TaskRecord};
use mcp_task_layer::{Operator, TaskLayer, TaskStatus, TaskStore};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

const FULL: &str = "full-token-for-the-tests";
const READ_ONLY: &str = "read-only-token-for-the-tests";
const LOOPBACK: &str = "http://127.0.0.1";
const FORM: &str = "application/x-www-form-urlencoded";

/// The dashboard of `operator`, nested at `/ops`, on a free port.
async fn serve(operator: Operator, access: Access) -> SocketAddr {
    serve_dashboard(Dashboard::new(operator, access)).await
}

/// `dashboard`, nested at `/ops`, on a free port.
async fn serve_dashboard(dashboard: Dashboard) -> SocketAddr {
    let app = axum::Router::new().nest("/ops", dashboard.router());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn access() -> Access {
    Access::new()
        .with_full_token(FULL)
        .unwrap()
        .with_read_only_token(READ_ONLY)
        .unwrap()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
}

/// One request on a fresh connection, read whole.
async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let headers: Vec<(String, &str)> = headers.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
    let reply = send_to(
        addr,
        method,
        path,
        &headers,
        Full::new(Bytes::from(body.to_owned())),
    )
    .await;
    Answer {
        status: reply.status,
        headers: reply.headers,
        body: String::from_utf8(reply.body.to_vec()).unwrap(),
    }
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(addr, Method::GET, path, headers, "").await
}

/// Sign in with `token`; the session cookie (`name=value`).
async fn sign_in(addr: SocketAddr, token: &str) -> String {
    let a = send(
        addr,
        Method::POST,
        "/ops/sign-in",
        &[(CONTENT_TYPE.as_str(), FORM), ("origin", LOOPBACK)],
        &format!("token={token}"),
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(a.header("location"), "/ops/");
    let cookie = a.header("set-cookie").to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ops"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    cookie.split(';').next().unwrap().to_owned()
}

/// The CSRF token in a page's forms.
fn csrf_of(page: &str) -> String {
    let at = page.find(r#"name="csrf" value=""#).expect("a CSRF field");
    let rest = &page[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn nobody_gets_in_without_a_token() {
    let layer = layer();
    let closed = serve(layer.operator(), Access::new()).await;
    let a = get(
        closed,
        "/ops",
        &[("authorization", "Bearer anything-at-all-here")],
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "off by default");
    assert!(a.body.contains("no token set"), "{}", a.body);

    let addr = serve(layer.operator(), access()).await;
    for path in [
        "/ops",
        "/ops/tasks",
        "/ops/api/stats",
        "/ops/events?view=counts",
    ] {
        let a = get(addr, path, &[]).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(a.header("www-authenticate").starts_with("Bearer"));
    }
    let browser = get(addr, "/ops/tasks", &[("accept", "text/html")]).await;
    assert_eq!(browser.status, StatusCode::UNAUTHORIZED);
    assert!(
        browser.body.contains(r#"type="password""#),
        "the sign-in page"
    );
    let wrong = get(
        addr,
        "/ops",
        &[("authorization", "Bearer not-the-token-at-all")],
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let bad = send(
        addr,
        Method::POST,
        "/ops/sign-in",
        &[(CONTENT_TYPE.as_str(), FORM)],
        "token=not-the-token-at-all",
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert!(bad.header("set-cookie").is_empty());
    let script = get(addr, "/ops/assets/dashboard.js", &[]).await;
    assert_eq!(script.status, StatusCode::OK, "the sign-in page's assets");
    let stats = get(
        addr,
        "/ops/api/stats",
        &[("authorization", &format!("Bearer {READ_ONLY}"))],
    )
    .await;
    assert_eq!(stats.status, StatusCode::OK);
    let stats: Value = serde_json::from_str(&stats.body).unwrap();
    assert!(stats["by_status"].is_object(), "{stats}");
}

/// A session signed in on one dashboard process is good on another with
/// the same tokens (a fleet behind a load balancer, or a restart), with the
/// same CSRF token; a dashboard with other tokens refuses it; signing out
/// ends it on the process that saw it.
#[tokio::test]
async fn a_session_is_good_on_every_dashboard_with_the_same_tokens() {
    let layer = layer();
    let a = serve(layer.operator(), access()).await;
    let b = serve(layer.operator(), access()).await;
    let other_tokens = Access::new()
        .with_full_token("another-full-token-000")
        .unwrap();
    let c = serve(layer.operator(), other_tokens).await;
    let cookie = sign_in(a, FULL).await;
    let cookie = [("cookie", cookie.as_str())];
    let on_a = get(a, "/ops/tasks", &cookie).await;
    let on_b = get(b, "/ops/tasks", &cookie).await;
    assert_eq!(on_b.status, StatusCode::OK, "{}", on_b.body);
    assert_eq!(csrf_of(&on_a.body), csrf_of(&on_b.body));
    assert_eq!(
        get(c, "/ops/tasks", &cookie).await.status,
        StatusCode::UNAUTHORIZED
    );
    let csrf = csrf_of(&on_b.body);
    let out = send(
        b,
        Method::POST,
        "/ops/sign-out",
        &[(CONTENT_TYPE.as_str(), FORM), cookie[0]],
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.header("set-cookie").contains("Max-Age=0"));
    assert_eq!(
        get(b, "/ops/tasks", &cookie).await.status,
        StatusCode::UNAUTHORIZED
    );
}

/// A task counts in the minute it ended, however long before it started:
/// the chart reads the store's index of ended tasks (before, it counted
/// only tasks created in the last hour, and this one not at all).
#[tokio::test]
async fn the_chart_counts_a_task_in_the_minute_it_ended_however_old() {
    let store = MemoryStore::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (id, status) in [("c", TaskStatus::Completed), ("f", TaskStatus::Failed)] {
        // Created two hours ago, ended a few seconds ago.
        let mut r = TaskRecord::new(id, Era::Modern, "long", json!({}), now - 7_200_000, None);
        r.status = status;
        r.updated_at_ms = now - 5_000;
        r.arguments = None;
        store.create(r).await.unwrap();
    }
    let addr = serve(Operator::new(store), access()).await;
    let auth = format!("Bearer {READ_ONLY}");
    let overview = get(addr, "/ops", &[("authorization", &auth)]).await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(
        overview
            .body
            .contains(r#"<span class="k-completed">1 completed</span>, <span class="k-failed">1 failed</span>"#),
        "{}",
        overview.body
    );
    assert!(!overview.body.contains("tasks created in the last hour"));
}

#[tokio::test]
async fn a_signed_in_browser_sees_waiting_tasks_with_their_arguments_escaped() {
    let layer = layer();
    let addr = serve(layer.operator(), access()).await;
    let mut client = Client::new(layer).as_owner("alice");
    let id = client
        .start("ask", json!({ "note": "<script>alert('pwned')</script>" }))
        .await;
    client.wait_for(&id, TaskStatus::InputRequired).await;
    let cookie = sign_in(addr, FULL).await;
    let cookie = [("cookie", cookie.as_str())];

    let overview = get(addr, "/ops", &cookie).await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(overview
        .header("content-security-policy")
        .contains("script-src 'self'"));
    assert!(
        overview
            .body
            .contains(&format!(r#"href="/ops/tasks/{id}""#)),
        "links follow the mount point"
    );
    assert!(overview.body.contains(r#"data-count="input_required">1<"#));
    assert!(overview.body.contains("<svg"), "the chart");

    let page = get(addr, &format!("/ops/tasks/{id}"), &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<script>alert"), "never markup");
    assert!(
        page.body.contains("elicitation/create"),
        "what it waits for"
    );
    assert!(page.body.contains("alice"), "its owner");
    assert!(
        page.body.contains(r#"id="cancel""#),
        "the full role's Cancel button"
    );
    // Its status history: created working, then waiting for input.
    let history = page
        .body
        .split(r#"<ol class="history">"#)
        .nth(1)
        .and_then(|h| h.split("</ol>").next())
        .expect("a status history");
    let statuses: Vec<&str> = history
        .split(r#"data-status=""#)
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(statuses, ["working", "input_required"], "{history}");
    // The overview lists it among those waiting longest for input.
    assert!(overview.body.contains("Waiting longest for input"));

    let missing = get(addr, "/ops/tasks/no-such-task", &cookie).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.body.contains("no task \"no-such-task\""));
}

#[tokio::test]
async fn cancel_needs_the_full_role_the_csrf_token_and_an_allowed_origin() {
    let layer = layer();
    let operator = layer.operator();
    let addr = serve(layer.operator(), access()).await;
    let client = Client::new(layer);
    let id = client.start("hang", json!({})).await;
    let path = format!("/ops/tasks/{id}/cancel");
    let cookie = sign_in(addr, FULL).await;
    let page = get(addr, &format!("/ops/tasks/{id}"), &[("cookie", &cookie)]).await;
    let csrf = csrf_of(&page.body);

    let post = |headers: Vec<(&'static str, String)>, body: String| {
        let path = path.clone();
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            send(addr, Method::POST, &path, &headers, &body).await
        }
    };
    let form = (CONTENT_TYPE.as_str(), FORM.to_owned());
    let no_csrf = post(
        vec![form.clone(), ("cookie", cookie.clone())],
        String::new(),
    )
    .await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    assert!(no_csrf.body.contains("CSRF"), "{}", no_csrf.body);
    let foreign = post(
        vec![
            form.clone(),
            ("cookie", cookie.clone()),
            ("origin", "https://evil.example".into()),
        ],
        format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    assert!(foreign.body.contains("Origin"));
    let read_only = post(
        vec![
            form.clone(),
            ("authorization", format!("Bearer {READ_ONLY}")),
        ],
        String::new(),
    )
    .await;
    assert_eq!(read_only.status, StatusCode::FORBIDDEN);
    assert!(read_only.body.contains("read-only"));
    let ro_page = get(
        addr,
        &format!("/ops/tasks/{id}"),
        &[("authorization", &format!("Bearer {READ_ONLY}"))],
    )
    .await;
    assert!(
        !ro_page.body.contains(r#"id="cancel""#),
        "no button for the read-only role"
    );
    assert_eq!(
        operator.get(&id).await.unwrap().unwrap().status,
        TaskStatus::Working
    );

    let done = post(
        vec![
            form.clone(),
            ("cookie", cookie.clone()),
            ("origin", LOOPBACK.into()),
        ],
        format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.header("location"), format!("/ops/tasks/{id}"));
    assert_eq!(
        operator.get(&id).await.unwrap().unwrap().status,
        TaskStatus::Cancelled
    );
    eventually(
        || client.seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "the running handler saw the cancel",
    )
    .await;
    let again = post(
        vec![
            form,
            ("authorization", format!("Bearer {FULL}")),
            ("accept", "application/json".into()),
        ],
        String::new(),
    )
    .await;
    assert_eq!(
        again.status,
        StatusCode::OK,
        "a bearer caller needs no CSRF token"
    );
    let again: Value = serde_json::from_str(&again.body).unwrap();
    assert_eq!(again["outcome"], "already ended");
    assert_eq!(again["status"], "cancelled");
}

#[tokio::test]
async fn the_list_filters_and_pages_and_refuses_bad_filters_precisely() {
    let layer = layer();
    let addr = serve(layer.operator(), access()).await;
    let mut client = Client::new(layer);
    let mut ids = Vec::new();
    for n in 0..3 {
        let id = client.start("ask", json!({ "n": n })).await;
        client.wait_for(&id, TaskStatus::InputRequired).await;
        ids.push(id);
    }
    let hang = client.start("hang", json!({ "n": 9 })).await;
    let auth = format!("Bearer {READ_ONLY}");
    let auth = [("authorization", auth.as_str())];
    let rows = |body: &str| body.matches("<tr data-task=").count();

    let first = get(addr, "/ops/tasks?status=input_required&limit=2", &auth).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(rows(&first.body), 2);
    assert!(!first.body.contains(&hang));
    let at = first
        .body
        .find(r#"rel="next" href=""#)
        .expect("a next page")
        + r#"rel="next" href=""#.len();
    let next = first.body[at..]
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let second = get(addr, &next, &auth).await;
    assert_eq!(rows(&second.body), 1);
    let mut seen: Vec<&String> = ids
        .iter()
        .filter(|id| first.body.contains(id.as_str()) || second.body.contains(id.as_str()))
        .collect();
    seen.dedup();
    assert_eq!(seen.len(), 3, "every task once over both pages");
    assert!(!second.body.contains(r#"rel="next""#));

    let searched = get(addr, "/ops/tasks?search=%22n%22%3A9", &auth).await;
    assert_eq!(rows(&searched.body), 1);
    assert!(searched.body.contains(&hang));
    let tool = get(
        addr,
        "/ops/tasks?tool=hang&created_after=2020-01-01T00:00",
        &auth,
    )
    .await;
    assert_eq!(rows(&tool.body), 1);
    let none = get(
        addr,
        "/ops/tasks?created_before=2020-01-01T00:00:00Z",
        &auth,
    )
    .await;
    assert_eq!(rows(&none.body), 0);

    for (query, says) in [
        ("status=done", "status \"done\""),
        ("created_after=yesterday", "created_after \"yesterday\""),
        ("after=junk", "after \"junk\""),
        ("limit=lots", "limit \"lots\""),
    ] {
        let a = get(addr, &format!("/ops/tasks?{query}"), &auth).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(a.body.contains(says), "{query}: {}", a.body);
    }
}

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
