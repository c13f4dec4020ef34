//! Who gets in: tokens, the sign-in cookie, and one session on every
//! dashboard with the same tokens.

use super::*;

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
    // An Authorization of another scheme, as a proxy with HTTP Basic in
    // front passes on, leaves the cookie to decide; the scheme's name is
    // read in any case. Before, every such request was refused.
    let basic = [cookie[0], ("authorization", "Basic YWxpY2U6cHc=")];
    let behind_a_proxy = get(a, "/ops/tasks", &basic).await;
    assert_eq!(
        behind_a_proxy.status,
        StatusCode::OK,
        "{}",
        behind_a_proxy.body
    );
    let lower = format!("bearer {READ_ONLY}");
    assert_eq!(
        get(a, "/ops/tasks", &[("authorization", &lower)])
            .await
            .status,
        StatusCode::OK
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
