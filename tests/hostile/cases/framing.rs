//! Bodies that are not one JSON-RPC request: bytes that are not JSON,
//! JSON that is not one request object, and duplicate keys.

use serde_json::{json, Value};

use super::{answer, error, invalid, parse_error, Cases, Ctx, Want};
use crate::client::{accept_name, header, meta, modern, routing};
use crate::world::T;
use crate::{ALICE, BOB, UNKNOWN};

/// Bytes that are not JSON: -32700, id null, HTTP 400.
pub(super) fn not_json(c: &mut Cases, k: &Ctx<'_>) {
    let text = k.text.clone();
    let headers = k.headers.clone();
    for cut in (0..text.len()).step_by(3) {
        c.raw(
            format!("truncated at {cut}"),
            headers.clone(),
            &text.as_bytes()[..cut],
            parse_error(),
        );
    }
    let at = text.find("Mallory").unwrap();
    for bad in [
        &b"\xff"[..],
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xf8\x88\x80\x80\x80",
        b"\xe2\x82",
        b"\x80",
    ] {
        let mut bytes = text.as_bytes().to_vec();
        bytes.splice(at..at + 1, bad.iter().copied());
        c.raw(
            format!("invalid UTF-8 {bad:?}"),
            headers.clone(),
            bytes,
            parse_error(),
        );
    }
    let mut with_nul = text.clone().into_bytes();
    with_nul.insert(at, 0);
    c.raw(
        "a raw NUL in a string",
        headers.clone(),
        with_nul,
        parse_error(),
    );
    let mut with_tab = text.clone().into_bytes();
    with_tab.insert(at, b'\n');
    c.raw(
        "a raw newline in a string",
        headers.clone(),
        with_tab,
        parse_error(),
    );
    for (what, body) in [
        ("an empty body", String::new()),
        ("whitespace", " \r\n\t ".into()),
        (
            "NaN",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":NaN}}"#.into(),
        ),
        (
            "Infinity",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":-Infinity}}"#.into(),
        ),
        (
            "a number out of range",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}"#.into(),
        ),
        (
            "a trailing comma",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping",}"#.into(),
        ),
        (
            "single quotes",
            r#"{'jsonrpc':'2.0','id':1,'method':'ping'}"#.into(),
        ),
        (
            "a comment",
            r#"{"jsonrpc":"2.0","id":1,/* hi */"method":"ping"}"#.into(),
        ),
        ("trailing garbage", format!("{text}xyz")),
        ("two objects", format!("{text}{text}")),
        ("a byte-order mark", format!("\u{feff}{text}")),
        ("a lone surrogate", text.replace("Mallory", "\\ud800")),
        ("a bad escape", text.replace("Mallory", "\\x41")),
        (
            "a leading zero id",
            r#"{"jsonrpc":"2.0","id":01,"method":"ping"}"#.into(),
        ),
        (
            "a hex id",
            r#"{"jsonrpc":"2.0","id":0x10,"method":"ping"}"#.into(),
        ),
        (
            "a plus-signed id",
            r#"{"jsonrpc":"2.0","id":+1,"method":"ping"}"#.into(),
        ),
        (
            "unquoted keys",
            r#"{jsonrpc:"2.0",id:1,method:"ping"}"#.into(),
        ),
        (
            "an unterminated string",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"#.into(),
        ),
        (
            "nesting 129 deep",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"a":{}1{}}}}}"#,
                "[".repeat(129),
                "]".repeat(129)
            ),
        ),
        ("nesting 100000 deep", "[".repeat(100_000)),
        ("the word null, misspelt", "nul".into()),
    ] {
        c.raw(what, headers.clone(), body, parse_error());
    }
}

/// JSON that is not one request object: -32600, HTTP 400, the id
/// when it can be read.
pub(super) fn not_one_request(c: &mut Cases, k: &Ctx<'_>) {
    let ask = k.ask.clone();
    let valid = k.valid.clone();
    for (what, body) in [
        ("a batch", json!([valid.clone()])),
        ("an empty batch", json!([])),
        ("a batch of two", json!([valid.clone(), valid.clone()])),
        ("a nested batch", json!([[valid.clone()]])),
        ("null", Value::Null),
        ("true", json!(true)),
        ("a number", json!(7)),
        ("a string", json!("tasks/update")),
        ("a float", json!(1.5)),
    ] {
        c.json(what, &body, Some(ALICE), invalid(Value::Null));
    }
    let mut broken = |what: &str, f: &dyn Fn(&mut Value), id: Value| {
        let mut body = answer(4242, &ask);
        f(&mut body);
        let headers = routing(&answer(0, &ask), Some(ALICE));
        c.raw(
            format!("not a request: {what}"),
            headers,
            body.to_string(),
            invalid(id),
        );
    };
    for (what, v) in [
        ("jsonrpc missing", None),
        ("jsonrpc 1.0", Some(json!("1.0"))),
        ("jsonrpc a number", Some(json!(2.0))),
        ("jsonrpc padded", Some(json!("2.0 "))),
        ("jsonrpc null", Some(Value::Null)),
        ("jsonrpc an object", Some(json!({}))),
    ] {
        broken(
            what,
            &|b: &mut Value| match &v {
                Some(v) => b["jsonrpc"] = v.clone(),
                None => {
                    b.as_object_mut().unwrap().remove("jsonrpc");
                }
            },
            json!(4242),
        );
    }
    for (what, v) in [
        ("method missing", None),
        ("method null", Some(Value::Null)),
        ("method a number", Some(json!(1))),
        ("method an array", Some(json!(["tasks/update"]))),
        ("method an object", Some(json!({"name": "tasks/update"}))),
        ("method true", Some(json!(true))),
    ] {
        broken(
            what,
            &|b: &mut Value| match &v {
                Some(v) => b["method"] = v.clone(),
                None => {
                    b.as_object_mut().unwrap().remove("method");
                }
            },
            json!(4242),
        );
    }
    for (what, v) in [
        ("id null", Value::Null),
        ("id a float", json!(1.5)),
        ("id true", json!(true)),
        ("id an array", json!([1])),
        ("id an object", json!({"id": 1})),
        ("id beyond i64", json!(9_223_372_036_854_775_808u64)),
        ("id a float with exponent", json!(1e3)),
    ] {
        broken(what, &|b: &mut Value| b["id"] = v.clone(), Value::Null);
    }
    for (what, v) in [
        ("params an array", json!([{ "taskId": ask.clone() }])),
        ("params a string", json!("taskId")),
        ("params a number", json!(1)),
        ("params true", json!(true)),
        ("params null", Value::Null),
    ] {
        broken(what, &|b: &mut Value| b["params"] = v.clone(), json!(4242));
    }
    // Responses nobody waits for: HTTP 400, -32600, no id member.
    for (what, body) in [
        (
            "a response to nothing",
            json!({"jsonrpc": "2.0", "id": "srv-00000000000000000000000000000000", "result": {}}),
        ),
        (
            "an error response to nothing",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}),
        ),
        (
            "a response with result and error",
            json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}),
        ),
        (
            "a 1.0 response",
            json!({"jsonrpc": "1.0", "id": 1, "result": {}}),
        ),
        (
            "a response without id",
            json!({"jsonrpc": "2.0", "result": {}}),
        ),
        (
            "an error response with a string error",
            json!({"jsonrpc": "2.0", "id": 1, "error": "bad"}),
        ),
    ] {
        c.json(what, &body, Some(ALICE), error(400, -32600, None));
    }
}

/// Duplicate keys: the last one counts, everywhere.
pub(super) fn duplicate_keys(c: &mut Cases, k: &Ctx<'_>) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let h = |method: &str, name: Option<&str>, caller: &str| {
        let mut h = Vec::new();
        header(&mut h, "content-type", "application/json");
        header(&mut h, "authorization", format!("Bearer {caller}"));
        header(&mut h, "mcp-protocol-version", "2026-07-28");
        header(&mut h, "mcp-method", method);
        if let Some(name) = name {
            header(&mut h, "mcp-name", name);
        }
        h
    };
    let m = meta(true).to_string();
    c.raw(
        "duplicate ids",
        h("tasks/get", Some(UNKNOWN), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":1,"id":"dup","method":"tasks/get","params":{{"taskId":"{UNKNOWN}","_meta":{m}}}}}"#),
        Want::NotFound(json!("dup")),
    );
    c.raw(
        "duplicate taskIds, the last one alice's, sent by bob",
        h("tasks/cancel", Some(&hang), BOB),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{{"taskId":"{UNKNOWN}","taskId":"{hang}","_meta":{m}}}}}"#),
        Want::NotFound(json!(2)),
    );
    c.raw(
        "duplicate methods, cancel then get",
        h("tasks/get", Some(&hang), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","method":"tasks/get","params":{{"taskId":"{hang}","_meta":{m}}}}}"#),
        Want::Same(T::Hang, json!(3)),
    );
    c.raw(
        "duplicate answers, the last one not an object",
        h("tasks/update", Some(&ask), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{{"taskId":"{ask}","inputResponses":{{"name":{},"name":"x"}},"_meta":{m}}}}}"#, accept_name("M")),
        error(200, -32602, json!(4)),
    );
    c.raw(
        "duplicate _meta, the last one without the extension",
        h("tasks/cancel", Some(&hang), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{{"taskId":"{hang}","_meta":{m},"_meta":{}}}}}"#, meta(false)),
        error(400, -32021, json!(5)),
    );
    c.raw(
        "duplicate params, the last one empty",
        h("tasks/update", None, ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{{"taskId":"{ask}","inputResponses":{{"name":{}}},"_meta":{m}}},"params":{{"_meta":{m}}}}}"#, accept_name("M")),
        error(200, -32602, json!(6)),
    );
    for (what, id) in [
        ("a reused id", json!(1)),
        ("a string id", json!("x")),
        ("an empty string id", json!("")),
        ("the largest id", json!(i64::MAX)),
        ("the smallest id", json!(i64::MIN)),
    ] {
        let mut body = modern(0, "tasks/get", json!({ "taskId": UNKNOWN }));
        body["id"] = id.clone();
        c.json(
            format!("tasks/get with {what}"),
            &body,
            Some(ALICE),
            Want::NotFound(id),
        );
    }
}
