//! Newline-delimited input, one line at a time, never buffering more than
//! the line limit.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What the next line of input is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// One line, without its `\n` (and without a `\r` before it).
    Text(Vec<u8>),
    /// A line longer than the limit; its bytes were read and thrown away.
    TooLong,
    /// The input ended (a last line without `\n` is returned as `Text` first).
    Eof,
}

/// Reads lines of at most `limit` bytes. Cancel safe: a `next` dropped
/// mid-line keeps what it read for the next call.
pub(crate) struct LineReader<R> {
    input: R,
    limit: usize,
    line: Vec<u8>,
    /// The current line went over the limit: skip to its end.
    discarding: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(crate) fn new(input: R, limit: usize) -> Self {
        LineReader {
            input,
            limit,
            line: Vec::new(),
            discarding: false,
        }
    }

    /// The next line; empty lines are skipped.
    pub(crate) async fn next(&mut self) -> io::Result<Line> {
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                let discarded = std::mem::take(&mut self.discarding);
                let rest = std::mem::take(&mut self.line);
                return Ok(match () {
                    () if discarded => Line::TooLong,
                    () if trim(&rest).is_empty() => Line::Eof,
                    () => Line::Text(rest),
                });
            }
            let (chunk, ends_line) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            let used = chunk.len() + usize::from(ends_line);
            if !self.discarding {
                if self.line.len() + chunk.len() > self.limit {
                    self.discarding = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            self.input.consume(used);
            if ends_line {
                if std::mem::take(&mut self.discarding) {
                    return Ok(Line::TooLong);
                }
                let line = std::mem::take(&mut self.line);
                if !trim(&line).is_empty() {
                    let mut line = line;
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    return Ok(Line::Text(line));
                }
            }
        }
    }
}

fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(4, input), limit);
        let mut out = Vec::new();
        loop {
            let line = reader.next().await.unwrap();
            let end = line == Line::Eof;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_skips_blank_lines_and_refuses_long_ones() {
        let text = |s: &str| Line::Text(s.as_bytes().to_vec());
        assert_eq!(
            lines(b"ab\r\n\n  \ncdefghij\nxyz", 5).await,
            [text("ab"), Line::TooLong, text("xyz"), Line::Eof]
        );
        assert_eq!(
            lines(b"12345\n123456", 5).await,
            [text("12345"), Line::TooLong, Line::Eof]
        );
        assert_eq!(lines(b"", 5).await, [Line::Eof]);
        assert_eq!(
            lines(b"\xff\xfe\n", 5).await,
            [Line::Text(vec![0xff, 0xfe]), Line::Eof]
        );
    }
}
