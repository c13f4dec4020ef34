//! The ceiling of `benches/stdio_pipes.py`: reads lines on stdin and
//! answers each with a fixed line of `--bytes` bytes (newline included),
//! no JSON work at all, flushing whenever no more input is buffered (as
//! the stdio transport does). What `StdioTransport` reaches against it,
//! with the same client in the same run, is the share of the pipes'
//! capacity the crate's stdio path leaves.
//!
//! ```sh
//! cargo build --release -p mcp-task-layer-benches --example line_echo
//! ```

use std::io::{BufRead, BufReader, BufWriter, Write};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let bytes: usize = args
        .iter()
        .position(|a| a == "--bytes")
        .and_then(|i| args.get(i + 1))
        .map_or(400, |v| v.parse().expect("a number"));
    let mut answer = vec![b' '; bytes.saturating_sub(1)];
    answer.push(b'\n');
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut output = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return output.flush();
        }
        output.write_all(&answer)?;
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}
