//! The cases: what each request must get back, how a reply is checked,
//! and the list of all cases, built in one order by the groups below.

mod eras;
mod framing;
mod http;
mod owners;
mod params;
mod unchanged;

use std::collections::BTreeMap;

use axum::http::Method;
use serde_json::{json, Value};

use crate::client::{accept_name, modern, routing, Body, Headers};
use crate::common::wire::Reply;
use crate::world::T;
use crate::{ALICE, NOT_FOUND};

/// What a case must get back.
#[derive(Clone, Debug)]
pub(crate) enum Want {
    /// A JSON-RPC error with this HTTP status and code; `id` is the `id`
    /// member (`None`: no `id` member at all).
    Error {
        status: u16,
        code: i64,
        id: Option<Value>,
    },
    /// `-32602` with exactly the "Task not found" body, HTTP 200.
    NotFound(Value),
    /// HTTP 200 with `{"resultType": "complete"}` (an ack that changes
    /// nothing).
    Ack(Value),
    /// HTTP 200 with what `tasks/get` of this task answered before.
    Same(T, Value),
    /// HTTP 202, empty body.
    Accepted,
    /// HTTP 405.
    NotAllowed,
}

fn error(status: u16, code: i64, id: impl Into<Option<Value>>) -> Want {
    Want::Error {
        status,
        code,
        id: id.into(),
    }
}

pub(crate) struct Case {
    pub(crate) what: String,
    pub(crate) method: Method,
    pub(crate) headers: Headers,
    pub(crate) body: Body,
    pub(crate) want: Want,
}

impl Case {
    /// A body the server answers without reading it (HTTP 413).
    pub(crate) fn refused(&self) -> bool {
        matches!(self.want, Want::Error { status: 413, .. })
    }
}

#[derive(Default)]
pub(crate) struct Cases(pub(crate) Vec<Case>);

impl Cases {
    fn raw(
        &mut self,
        what: impl Into<String>,
        headers: Headers,
        body: impl Into<Vec<u8>>,
        want: Want,
    ) {
        self.0.push(Case {
            what: what.into(),
            method: Method::POST,
            headers,
            body: Body::Full(body.into()),
            want,
        });
    }

    /// `body` with the headers a conforming client would send as `caller`.
    fn json(&mut self, what: impl Into<String>, body: &Value, caller: Option<&str>, want: Want) {
        self.raw(what, routing(body, caller), body.to_string(), want);
    }
}

fn parse_error() -> Want {
    error(400, -32700, Value::Null)
}

fn invalid(id: Value) -> Want {
    error(400, -32600, id)
}

/// A valid answer to the task that waits for it: every case built on
/// it breaks something else, so none may reach the task.
fn answer(id: i64, task: &str) -> Value {
    modern(
        id,
        "tasks/update",
        json!({ "taskId": task, "inputResponses": { "name": accept_name("Mallory") } }),
    )
}

/// What the groups of cases share.
struct Ctx<'a> {
    ids: &'a BTreeMap<T, String>,
    ask: String,
    hang: String,
    legacy_task: String,
    /// A valid answer to `Ask`, and its text and headers.
    valid: Value,
    text: String,
    headers: Headers,
    /// `1` in 100 nested arrays.
    deep100: Value,
}

/// Every case. Request ids count up across the groups, so they are built
/// in one fixed order.
pub(crate) fn hostile_cases(ids: &BTreeMap<T, String>) -> Cases {
    let mut c = Cases::default();
    let ask = ids[&T::Ask].clone();
    let hang = ids[&T::Hang].clone();
    let legacy_task = ids[&T::Legacy].clone();
    let mut counter = 1_000_000;
    let mut n = move || {
        counter += 1;
        counter
    };

    let valid = answer(n(), &ask);
    let text = valid.to_string();
    let headers = routing(&valid, Some(ALICE));
    let mut deep100 = json!(1);
    for _ in 0..100 {
        deep100 = json!([deep100]);
    }
    let k = &Ctx {
        ids,
        ask,
        hang,
        legacy_task,
        valid,
        text,
        headers,
        deep100,
    };

    framing::not_json(&mut c, k);
    framing::not_one_request(&mut c, k);
    http::over_the_body_limit(&mut c, k, &mut n);
    http::headers_that_disagree(&mut c, k, &mut n);
    eras::without_the_extension(&mut c, k, &mut n);
    eras::methods_of_the_other_era(&mut c, k, &mut n);
    params::bad_task_ids(&mut c, k, &mut n);
    owners::other_owners_and_eras(&mut c, k, &mut n);
    params::bad_input_responses(&mut c, k, &mut n);
    unchanged::stale_and_replayed_keys(&mut c, k, &mut n);
    params::bad_cursors(&mut c, k, &mut n);
    eras::refused_tool_calls(&mut c, &mut n);
    owners::notifications_from_others(&mut c, k);
    framing::duplicate_keys(&mut c, k);
    http::other_http_methods(&mut c, k);
    http::odd_headers(&mut c, k, &mut n);
    unchanged::harmless_extras(&mut c, k, &mut n);

    c
}

/// Check one reply; `Err` says how it is wrong.
pub(crate) fn check(reply: &Reply, want: &Want, before: &BTreeMap<T, Value>) -> Result<(), String> {
    let json = || -> Result<Value, String> {
        if reply.content_type.as_deref() != Some("application/json") {
            return Err(format!("content type {:?}", reply.content_type));
        }
        let v: Value =
            serde_json::from_slice(&reply.body).map_err(|e| format!("body is not JSON: {e}"))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("no jsonrpc 2.0: {v}"));
        }
        Ok(v)
    };
    let expect_status = |status: u16| {
        if reply.status.as_u16() == status {
            Ok(())
        } else {
            Err(format!(
                "HTTP {} instead of {status}",
                reply.status.as_u16()
            ))
        }
    };
    let result_with_id = |id: &Value| -> Result<Value, String> {
        expect_status(200)?;
        let v = json()?;
        if &v["id"] != id {
            return Err(format!("id {} instead of {id}", v["id"]));
        }
        v.get("result")
            .cloned()
            .ok_or_else(|| format!("not a result: {v}"))
    };
    match want {
        Want::Error { status, code, id } => {
            expect_status(*status)?;
            let v = json()?;
            if v.get("result").is_some() {
                return Err(format!("a result: {v}"));
            }
            if v["error"]["code"] != *code {
                return Err(format!("error {} instead of {code}", v["error"]));
            }
            if !v["error"]["message"].is_string() {
                return Err(format!("no message: {v}"));
            }
            if v.get("id") != id.as_ref() {
                return Err(format!("id {:?} instead of {id:?}", v.get("id")));
            }
        }
        Want::NotFound(id) => {
            expect_status(200)?;
            let v = json()?;
            let expected = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32602, "message": NOT_FOUND } });
            if v != expected {
                return Err(format!("{v} instead of the not-found body"));
            }
        }
        Want::Ack(id) => {
            let r = result_with_id(id)?;
            if r != json!({ "resultType": "complete" }) {
                return Err(format!("{r} instead of an ack"));
            }
        }
        Want::Same(t, id) => {
            let r = result_with_id(id)?;
            if r != before[t] {
                return Err(format!("{r} instead of {}", before[t]));
            }
        }
        Want::Accepted => {
            expect_status(202)?;
            if !reply.body.is_empty() {
                return Err(format!("a body: {:?}", reply.body));
            }
        }
        Want::NotAllowed => expect_status(405)?,
    }
    Ok(())
}

pub(crate) fn label(want: &Want) -> String {
    match want {
        Want::Error { status, code, .. } => format!("HTTP {status} {code}"),
        Want::NotFound(_) => "HTTP 200 -32602 task not found".into(),
        Want::Ack(_) => "HTTP 200 ack, no change".into(),
        Want::Same(..) => "HTTP 200 the unchanged task".into(),
        Want::Accepted => "HTTP 202".into(),
        Want::NotAllowed => "HTTP 405".into(),
    }
}
