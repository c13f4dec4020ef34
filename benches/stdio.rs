//! `tasks/get` through `StdioTransport` (feature `stdio`): a client writes
//! newline-delimited 2026-07-28 `tasks/get` requests for one completed task
//! into an in-memory pipe (`tokio::io::duplex`) and reads the responses back
//! from another, the transport and `TaskLayer` over `MemoryStore` in
//! between, one core (current-thread runtime).
//!
//! - `stdio/tasks_get_round_trip`: one request at a time, each written and
//!   its response line read before the next (latency; requests/s is its
//!   inverse).
//! - `stdio/tasks_get_pipelined_64`: 64 requests written at once, then 64
//!   responses read (throughput with requests in flight).
//!
//! `cargo bench -p mcp-task-layer-benches --features stdio --bench stdio` (BENCHMARKS.md).

#![allow(missing_docs)] // criterion_group! makes an undocumented `pub fn`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_task_layer::{
    JsonRpcRequest, JsonRpcResponse, MemoryStore, StdioTransport, TaskLayer, TaskPolicy,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tower::ServiceBuilder;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "bench", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        },
    })
}

struct Pipes {
    to_server: DuplexStream,
    from_server: BufReader<DuplexStream>,
    line: String,
}

impl Pipes {
    async fn read_line(&mut self) {
        self.line.clear();
        let n = self.from_server.read_line(&mut self.line).await.unwrap();
        assert!(n > 0, "the transport closed its output");
    }
}

/// A transport on a fresh layer with one completed task; the pipes and
/// the `tasks/get` line for that task.
async fn setup() -> (Pipes, Vec<u8>) {
    let server = tower::service_fn(|req: JsonRpcRequest| async move {
        Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(
            req.id,
            json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
        ))
    });
    let service = ServiceBuilder::new()
        .layer(TaskLayer::new(MemoryStore::new()).with_tool_policies([("job", TaskPolicy::Task)]))
        .service(server);
    let (to_server, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, from_server) = tokio::io::duplex(1 << 20);
    tokio::spawn(StdioTransport::new(service).serve(server_in, server_out));
    let mut pipes = Pipes {
        to_server,
        from_server: BufReader::new(from_server),
        line: String::new(),
    };
    let call = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
        "params": {"name": "job", "arguments": {}, "_meta": meta()}});
    pipes
        .to_server
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    pipes.read_line().await;
    let created: Value = serde_json::from_str(&pipes.line).unwrap();
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
        "params": {"taskId": task, "_meta": meta()}});
    let line = format!("{get}\n").into_bytes();
    // Wait until the runner has recorded the result.
    loop {
        pipes.to_server.write_all(&line).await.unwrap();
        pipes.read_line().await;
        if pipes.line.contains("\"completed\"") {
            break;
        }
        tokio::task::yield_now().await;
    }
    (pipes, line)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut pipes, line) = rt.block_on(setup());
    let mut group = c.benchmark_group("stdio");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("tasks_get_round_trip", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    pipes.to_server.write_all(&line).await.unwrap();
                    pipes.read_line().await;
                }
                start.elapsed()
            })
        });
    });
    let batch: Vec<u8> = line.repeat(64);
    group.bench_function("tasks_get_pipelined_64", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let rounds = iters.div_ceil(64);
                let start = Instant::now();
                for _ in 0..rounds {
                    pipes.to_server.write_all(&batch).await.unwrap();
                    for _ in 0..64 {
                        pipes.read_line().await;
                    }
                }
                start.elapsed().mul_f64(iters as f64 / (rounds * 64) as f64)
            })
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
