//! The ceiling of `benches/http.sh`: a bare hyper 1 HTTP/1.1 server that
//! reads each request's body and answers a fixed `application/json` body of
//! the given size, with no JSON work at all. What the example server
//! reaches against it, with the same client on the same machine in the same
//! run, is the share of the machine's HTTP capacity the crate's HTTP path
//! leaves (BENCHMARKS.md, "HTTP at the ceiling").
//!
//! ```sh
//! cargo run --release -p mcp-task-layer-benches --example ceiling -- --port 38118 --bytes 420
//! ```
//!
//! It listens on 127.0.0.1 only, on a multi-threaded tokio runtime (one
//! worker per core), as the example server does, and prints `listening`
//! once it accepts.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// The same allocator as the example server it is compared with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let port = u16::try_from(arg("--port", 38118)).expect("a port");
    let body = Bytes::from(vec![b' '; arg("--bytes", 420)]);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind 127.0.0.1");
    println!("listening on http://127.0.0.1:{port}/");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let body = body.clone();
                async move {
                    // Read the whole request body, as any server must.
                    let _ = req.into_body().collect().await;
                    let mut response = Response::new(Full::new(body));
                    response
                        .headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
