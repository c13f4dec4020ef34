//! The HTTP layer: the body limit, 2026-07-28 routing headers that
//! disagree with the body, other HTTP methods, odd but harmless headers.

use axum::body::Bytes;
use axum::http::Method;
use mcp_task_layer::DEFAULT_BODY_LIMIT;
use serde_json::{json, Value};

use super::{answer, error, Case, Cases, Ctx, Want};
use crate::client::{base64, header, modern, routing, set_header, without, Body, Headers};
use crate::world::T;
use crate::{ALICE, BOB, UNKNOWN};

/// Bodies over the limit: HTTP 413, -32600, id null. Each carries a
/// valid answer.
pub(super) fn over_the_body_limit(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let headers = k.headers.clone();
    let mut padded = answer(n(), &ask).to_string().into_bytes();
    padded.resize(DEFAULT_BODY_LIMIT + 1, b' ');
    c.raw(
        "a body one byte over the limit",
        headers.clone(),
        padded.clone(),
        error(413, -32600, Value::Null),
    );
    let chunks: Vec<Bytes> = padded
        .chunks(256 * 1024)
        .rev()
        .map(Bytes::copy_from_slice)
        .collect();
    c.0.push(Case {
        what: "a chunked body over the limit".into(),
        method: Method::POST,
        headers: without(headers.clone(), "content-length"),
        body: Body::Chunked(chunks),
        want: error(413, -32600, Value::Null),
    });
    // Exactly at the limit is read: a 4 MiB tasks/get of alice's task.
    let get_ask = modern(n(), "tasks/get", json!({ "taskId": ask }));
    let mut at_limit = get_ask.to_string().into_bytes();
    at_limit.resize(DEFAULT_BODY_LIMIT, b' ');
    c.raw(
        "a body exactly at the limit",
        routing(&get_ask, Some(ALICE)),
        at_limit,
        Want::Same(T::Ask, get_ask["id"].clone()),
    );
}

/// 2026-07-28 headers that disagree with the body: -32020, HTTP 400,
/// the request's id.
pub(super) fn headers_that_disagree(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let bodies = [
        answer(n(), &ask),
        modern(n(), "tasks/cancel", json!({ "taskId": hang })),
        modern(n(), "tasks/get", json!({ "taskId": ask })),
        modern(
            n(),
            "tools/call",
            json!({ "name": "hang", "arguments": {} }),
        ),
    ];
    for body in &bodies {
        let good = routing(body, Some(ALICE));
        let method = body["method"].as_str().unwrap();
        let id = body["id"].clone();
        let mut variants: Vec<(String, Headers)> = vec![
            (
                "no MCP-Protocol-Version".into(),
                without(good.clone(), "mcp-protocol-version"),
            ),
            (
                "an older MCP-Protocol-Version".into(),
                set_header(good.clone(), "mcp-protocol-version", "2025-11-25"),
            ),
            (
                "a future MCP-Protocol-Version".into(),
                set_header(good.clone(), "mcp-protocol-version", "2026-07-29"),
            ),
            ("no Mcp-Method".into(), without(good.clone(), "mcp-method")),
            (
                "another Mcp-Method".into(),
                set_header(good.clone(), "mcp-method", "ping"),
            ),
            (
                "an upper-case Mcp-Method".into(),
                set_header(good.clone(), "mcp-method", method.to_uppercase()),
            ),
            ("no Mcp-Name".into(), without(good.clone(), "mcp-name")),
            (
                "another task in Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", UNKNOWN),
            ),
            (
                "an upper-case Mcp-Name".into(),
                set_header(
                    good.clone(),
                    "mcp-name",
                    body["params"]["taskId"]
                        .as_str()
                        .or(body["params"]["name"].as_str())
                        .unwrap()
                        .to_uppercase(),
                ),
            ),
            (
                "a non-ASCII Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", &b"t\xe9st"[..]),
            ),
            (
                "a malformed base64 Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", "=?base64?!!!?="),
            ),
            (
                "a base64 Mcp-Name of something else".into(),
                set_header(
                    good.clone(),
                    "mcp-name",
                    format!("=?base64?{}?=", base64(b"other")),
                ),
            ),
        ];
        for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
            let mut repeated = good.clone();
            let value = good.iter().find(|(n, _)| n == name).unwrap().1.clone();
            header(&mut repeated, name, value);
            variants.push((format!("a repeated {name}"), repeated));
        }
        for (what, headers) in variants {
            c.raw(
                format!("{method}: {what}"),
                headers,
                body.to_string(),
                error(400, -32020, id.clone()),
            );
        }
    }
    // The same for notifications: no id member.
    for body in [
        modern(0, "tasks/cancel", json!({ "taskId": hang })),
        answer(0, &ask),
    ] {
        let mut body = body;
        body.as_object_mut().unwrap().remove("id");
        let headers = set_header(routing(&body, Some(ALICE)), "mcp-method", "ping");
        c.raw(
            "a notification with a wrong Mcp-Method",
            headers,
            body.to_string(),
            error(400, -32020, None),
        );
    }
}

/// Other HTTP methods: 405.
pub(super) fn other_http_methods(c: &mut Cases, k: &Ctx<'_>) {
    let valid = k.valid.clone();
    for method in [
        Method::GET,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ] {
        c.0.push(Case {
            what: format!("HTTP {method}"),
            method,
            headers: routing(&valid, Some(ALICE)),
            body: Body::Full(valid.to_string().into_bytes()),
            want: Want::NotAllowed,
        });
    }
}

/// Odd but harmless headers: the body decides.
pub(super) fn odd_headers(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let id = n();
    let body = modern(id, "tasks/cancel", json!({ "taskId": hang }));
    c.raw(
        "text/plain",
        set_header(routing(&body, Some(BOB)), "content-type", "text/plain"),
        body.to_string(),
        // Not harmless since defect 11: refused before the body is read.
        error(415, -32600, None),
    );
    let id = n();
    let body = modern(id, "tasks/get", json!({ "taskId": UNKNOWN }));
    let mut hs = routing(&body, Some(ALICE));
    header(&mut hs, "accept", "text/event-stream");
    c.raw(
        "an SSE Accept on an error",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = modern(id, "tasks/cancel", json!({ "taskId": hang }));
    let mut hs = routing(&body, Some(BOB));
    header(&mut hs, "authorization", "Bearer alice");
    c.raw(
        "two bearer tokens, bob's first",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = modern(id, "tasks/get", json!({ "taskId": ask }));
    let hs = set_header(routing(&body, Some(ALICE)), "authorization", "bearer alice");
    c.raw(
        "a lower-case bearer scheme",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );
}
