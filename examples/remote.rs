//! Call a tool on a remote MCP server by URL and drive whatever comes back
//! (a result, MRTR rounds, or a task) to the end.
//!
//! ```text
//! cargo run --release --features axum --example server -- --port 3001 &
//! cargo run --features http-client --example remote -- \
//!     --url http://127.0.0.1:3001/mcp --tool confirm_delete --args '{"filename":"a.txt"}'
//! ```
//!
//! Input requests are answered automatically: every boolean field of an
//! elicitation schema gets `true`, every other field the string `"demo"`.

use std::time::Instant;

use mcp_task_layer::client::{ClientEra, HttpTransport, TaskClient};
use mcp_task_layer::{InputRequest, JsonRpcError};
use serde_json::{json, Map, Value};

async fn answer(req: InputRequest) -> Result<Value, JsonRpcError> {
    let params = req.params.unwrap_or_default();
    println!(
        "  input requested: {} {}",
        req.method,
        params.get("message").unwrap_or(&Value::Null)
    );
    let mut content = Map::new();
    if let Some(props) = params
        .get("requestedSchema")
        .and_then(|s| s["properties"].as_object())
    {
        for (field, schema) in props {
            let value = if schema["type"] == "boolean" {
                json!(true)
            } else {
                json!("demo")
            };
            content.insert(field.clone(), value);
        }
    }
    Ok(json!({"action": "accept", "content": content}))
}

#[tokio::main]
async fn main() {
    let mut url = String::from("http://127.0.0.1:3001/mcp");
    let mut tool = String::from("slow_compute");
    let mut args = json!({"seconds": 2, "label": "remote"});
    let mut era = ClientEra::Modern;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--url" => url = value,
            "--tool" => tool = value,
            "--args" => args = serde_json::from_str(&value).expect("--args must be JSON"),
            "--era" if value == "2025-11-25" => era = ClientEra::Legacy,
            "--era" => era = ClientEra::Modern,
            other => {
                eprintln!("unknown flag {other}\nusage: remote [--url URL] [--tool NAME] [--args JSON] [--era 2026-07-28|2025-11-25]");
                std::process::exit(2);
            }
        }
    }
    let transport = HttpTransport::new(&url).expect("a valid http:// URL");
    let client = TaskClient::new(transport)
        .with_era(era)
        .with_input_handler(answer);
    let start = Instant::now();
    println!("calling {tool} on {url}");
    match client.call_tool(&tool, args).await {
        Ok(result) => println!(
            "{:>7.3}s  result: {}",
            start.elapsed().as_secs_f64(),
            Value::Object(result)
        ),
        Err(e) => {
            eprintln!("{:>7.3}s  error: {e}", start.elapsed().as_secs_f64());
            std::process::exit(1);
        }
    }
}
