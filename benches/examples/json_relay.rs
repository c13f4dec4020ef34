//! The floor of any MCP proxy over stdio (`benches/gateway_paired.py`,
//! `JSON_RELAY=1`): `line_relay`'s two blocking threads, plus the least a
//! process in the middle of many clients must do with each message. It
//! parses every line (serde_json), gives each request an id of its own and
//! puts the client's id back on the answer, and writes the message again.
//! No policies, no tasks, no cancels, no questions: what is left between
//! this and the gateway is the gateway's own work.
//!
//! ```sh
//! cargo build --release -p mcp-task-layer-benches --example json_relay
//! target/release/examples/json_relay -- COMMAND [ARGS...]
//! ```

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

type Ids = Arc<Mutex<HashMap<u64, Value>>>;

/// Copy messages `from` → `to`, each parsed and written again; `rewrite`
/// changes a message on the way.
fn relay(
    from: impl std::io::Read,
    mut to: impl Write,
    mut rewrite: impl FnMut(&mut Value),
) -> std::io::Result<()> {
    let mut from = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        if from.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        rewrite(&mut message);
        out.clear();
        serde_json::to_writer(&mut out, &message)?;
        out.push(b'\n');
        to.write_all(&out)?;
        to.flush()?;
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let (program, rest) = args
        .split_first()
        .expect("usage: json_relay -- COMMAND [ARGS...]");
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let child_in = child.stdin.take().expect("piped");
    let child_out = child.stdout.take().expect("piped");
    let ids: Ids = Arc::default();
    let sent = Arc::clone(&ids);
    let mut next = 0u64;
    let up = std::thread::spawn(move || {
        relay(std::io::stdin().lock(), child_in, |m| {
            // A request of the client's: an id of the proxy's own.
            if m.get("method").is_some() {
                if let Some(id) = m.get_mut("id") {
                    next += 1;
                    let theirs = std::mem::replace(id, Value::from(next));
                    sent.lock().unwrap().insert(next, theirs);
                }
            }
        })
    });
    relay(child_out, std::io::stdout().lock(), |m| {
        // An answer: the client's id back.
        if m.get("method").is_none() {
            let ours = m.get("id").and_then(Value::as_u64);
            if let Some(theirs) = ours.and_then(|id| ids.lock().unwrap().remove(&id)) {
                m["id"] = theirs;
            }
        }
    })?;
    let _ = up.join();
    child.wait().map(drop)
}
