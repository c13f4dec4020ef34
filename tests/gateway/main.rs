//! `mcp_task_layer::gateway` in front of MCP servers no one here wrote as a
//! task server: tests/gateway/upstream.py (the Python `mcp` SDK, no task
//! support) and `@modelcontextprotocol/server-everything` (npm), both
//! launched over stdio by the gateway itself. Requirement numbers are
//! docs/requirements.md's.
//!
//! The upstreams come from `MCP_TASKS_PYTHON` and `MCP_TASKS_EVERYTHING`
//! (`.ci/python.sh`); without them a test prints a note and passes, except
//! under `CI=true`.
#![cfg(feature = "gateway")]

mod cancels;
#[path = "../common/mod.rs"]
mod common;
mod everything;
mod fake;
mod framing;
mod harness;
mod http;
mod lanes;
mod listen;
mod parked;
mod progress;
mod python;
mod stdio;
