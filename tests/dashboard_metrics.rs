//! `examples/dashboard_metrics.rs` as a process: a tool call over `/mcp`
//! becomes a task, which the dashboard beside it counts (`/dashboard`,
//! with a bearer token) and `/metrics` exports in Prometheus's format.
#![cfg(all(feature = "dashboard", feature = "metrics"))]

mod common;

use std::net::SocketAddr;

use axum::http::Method;
use common::process::Process;
use common::wire::{send, send_to};
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{json, Value};

const TOKEN: &str = "metrics-example-dashboard-token";

/// `GET path` with `headers`; the status and the body.
async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let headers: Vec<(String, &str)> = headers.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
    let reply = send_to(addr, Method::GET, path, &headers, Full::new(Bytes::new())).await;
    (
        reply.status.as_u16(),
        String::from_utf8(reply.body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn a_task_shows_on_the_dashboard_and_in_the_prometheus_scrape() {
    let process = Process::start_example(
        "dashboard_metrics",
        "dashboard,metrics",
        &["127.0.0.1:0".to_owned()],
        &[("MCP_TASKS_DASHBOARD_TOKEN", TOKEN)],
    );
    let addr: SocketAddr = process
        .url()
        .strip_prefix("http://")
        .unwrap()
        .parse()
        .unwrap();

    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "deploy", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": { "io.modelcontextprotocol/tasks": {} },
                "elicitation": { "form": {} }
            }
        } }
    });
    let headers = [
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "deploy"),
    ]
    .map(|(n, v)| (n.to_owned(), v.to_owned()));
    let reply = send(
        addr,
        Method::POST,
        &headers,
        Full::new(Bytes::from(body.to_string())),
    )
    .await;
    let created = reply.json();
    assert_eq!(created["result"]["resultType"], "task", "{created}");

    let (status, stats) = get(
        addr,
        "/dashboard/api/stats",
        &[("authorization", &format!("Bearer {TOKEN}"))],
    )
    .await;
    assert_eq!(status, 200, "{stats}");
    let stats: Value = serde_json::from_str(&stats).unwrap();
    let live: u64 = stats["by_status"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(live, 1, "{stats}");
    let (status, _) = get(addr, "/dashboard/api/stats", &[]).await;
    assert_eq!(status, 401, "the dashboard wants its token");

    let (status, scrape) = get(addr, "/metrics", &[]).await;
    assert_eq!(status, 200);
    assert!(
        scrape.contains("mcp_tasks_created_total{era=\"modern\"} 1"),
        "{scrape}"
    );
}
