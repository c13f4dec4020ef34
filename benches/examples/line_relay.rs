//! The floor of the gateway's latency over stdio (`benches/gateway_lat.py`):
//! a process that only relays lines, stdin to a child's stdin and the
//! child's stdout to stdout, one blocking thread each way, no parsing, a
//! flush after every line. Whatever a process in the middle adds, a
//! gateway adds at least this: two more pipe hops, each a write and a
//! wake-up of another process.
//!
//! ```sh
//! cargo build --release -p mcp-task-layer-benches --example line_relay
//! target/release/examples/line_relay -- COMMAND [ARGS...]
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn relay(from: impl std::io::Read, mut to: impl Write) -> std::io::Result<()> {
    let mut from = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::new();
    loop {
        line.clear();
        if from.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        to.write_all(&line)?;
        to.flush()?;
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let (program, rest) = args
        .split_first()
        .expect("usage: line_relay -- COMMAND [ARGS...]");
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let child_in = child.stdin.take().expect("piped");
    let child_out = child.stdout.take().expect("piped");
    let up = std::thread::spawn(move || relay(std::io::stdin().lock(), child_in));
    relay(child_out, std::io::stdout().lock())?;
    let _ = up.join();
    child.wait().map(drop)
}
