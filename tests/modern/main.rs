//! The 2026-07-28 tasks extension on the wire, one test per requirement of
//! `docs/requirements.md` (R-numbers in the names).

#[path = "../common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{accept, err, meta, ok, Client};
use mcp_task_layer::{TaskLayer, TaskPolicy, TaskStatus};
use serde_json::{json, Value};

fn layer() -> TaskLayer {
    common::layer()
}

const TASK_FIELDS_FORBIDDEN_ON_CREATE: [&str; 7] = [
    "task",
    "result",
    "error",
    "inputRequests",
    "requestState",
    "ttl",
    "pollInterval",
];

mod discovery;
mod lifetime;
mod outcomes;
mod rounds;
