//! The pages: the chart, waiting tasks with their texts escaped, cancel
//! (role, CSRF token, `Origin`), and the list's filters and pages.

use super::*;

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
    // Nor a form: a script's bare POST. Before, it got 415.
    let bare = post(
        vec![
            ("authorization", format!("Bearer {FULL}")),
            ("accept", "application/json".into()),
        ],
        String::new(),
    )
    .await;
    assert_eq!(bare.status, StatusCode::OK, "{}", bare.body);
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
