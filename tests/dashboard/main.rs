//! The dashboard over HTTP, nested at `/ops` as an application would:
//! nobody gets in without a token, sign-in sets a strict cookie, actions
//! need the full role, the session's CSRF token and an allowed `Origin`,
//! task texts are escaped, the list filters and pages, and the open task
//! and the counts change over SSE. (`cli/tests/dashboard.rs` drives the
//! same pages in Chromium.)
#![cfg(feature = "dashboard")]

#[path = "../common/mod.rs"]
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

mod live;
mod pages;
mod signin;
