//! The dashboard and Prometheus metrics beside an MCP endpoint, in one
//! axum app: `/mcp` (a `TaskLayer` over a small MCP server whose `deploy`
//! tool asks for approval), `/dashboard` (the operator's dashboard) and
//! `/metrics` (the layer's metrics in Prometheus's text format, through
//! `metrics-exporter-prometheus`).
//!
//! ```text
//! MCP_TASKS_DASHBOARD_TOKEN=a-token-of-16-chars-or-more \
//!   cargo run --example dashboard_metrics --features dashboard,metrics -- 127.0.0.1:3000
//! ```
//!
//! It prints `listening on http://ADDR` once it accepts connections.

use std::convert::Infallible;
use std::time::Duration;

use axum::routing::get;
use mcp_task_layer::dashboard::{Access, Dashboard};
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, McpEndpoint, MemoryStore, TaskLayer, TaskPolicy,
};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::json;
use tower::{service_fn, ServiceBuilder};

/// The MCP server: `deploy` asks for approval, then finishes.
async fn mcp_server(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let params = req.params.clone().unwrap_or_default();
    let approved = params["inputResponses"]["approve"]["content"]["approved"].as_bool();
    let result = match (req.method.as_str(), approved) {
        ("tools/call", None) => {
            // Some work first: longer than the task window, so a task.
            tokio::time::sleep(Duration::from_millis(300)).await;
            json!({
            "resultType": "input_required",
            "inputRequests": {"approve": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Deploy?",
                "requestedSchema": {"type": "object", "properties": {"approved": {"type": "boolean"}}}
            }}}
            })
        }
        ("tools/call", Some(approved)) => json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": if approved { "deployed" } else { "skipped" }}],
            "isError": false
        }),
        _ => json!({"resultType": "complete"}),
    };
    Ok(JsonRpcResponse::result(req.id, result))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".into());
    // The recorder every `metrics::` call of the layer reports to.
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let layer = TaskLayer::new(MemoryStore::new()).with_tool_policy(
        "deploy",
        TaskPolicy::Auto {
            within: Duration::from_millis(100),
        },
    );
    let dashboard = Dashboard::new(layer.operator(), Access::from_env()?);
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(service_fn(mcp_server));
    let app = McpEndpoint::new(service)
        .into_router("/mcp")
        .nest("/dashboard", dashboard.router())
        .route(
            "/metrics",
            get(move || std::future::ready(prometheus.render())),
        );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    mcp_task_layer::serve(listener, app).await?;
    Ok(())
}
