//! The endpoint as a bare tower service, without a router.

use super::*;

/// `into_service` answers as `into_router` does, without a router: `POST`
/// on its path is the endpoint, other methods there get 405 with
/// `Allow: POST`, other paths 404.
#[tokio::test]
async fn the_service_without_a_router_answers_as_the_router_does() {
    use tower::ServiceExt;

    let echo = service_fn(|req: JsonRpcRequest| async move {
        Ok::<_, Infallible>(JsonRpcResponse::result(
            req.id,
            json!({"method": req.method}),
        ))
    });
    let service = McpEndpoint::new(echo).into_service("/mcp");
    let body = modern(3, "custom/echo", json!({}), false);
    let request = |method: Method, path: &str| {
        // The routing headers include `Content-Type`.
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in routing_headers(&body) {
            builder = builder.header(name, value);
        }
        builder
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    };

    let ok = service
        .clone()
        .oneshot(request(Method::POST, "/mcp"))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let bytes = ok.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["method"], "custom/echo");

    let get = service
        .clone()
        .oneshot(request(Method::GET, "/mcp"))
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.headers()["allow"], "POST");

    let elsewhere = service
        .oneshot(request(Method::POST, "/other"))
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::NOT_FOUND);
}
