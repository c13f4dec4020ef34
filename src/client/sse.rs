//! Reading a `text/event-stream` body: bytes in, whole `message` events
//! out, parsed as the SSE specification (WHATWG HTML, "Parsing an event
//! stream") says, whatever the frames the bytes came in.

use std::collections::VecDeque;

/// An event's data was larger than the decoder's bound.
#[derive(Debug)]
pub(crate) struct TooLarge(pub(crate) usize);

/// Turns the bytes of an event stream into the data of its `message`
/// events. Bytes are kept until a line is complete, so a character or a
/// CRLF split between frames is read as if it had come whole; lines may end
/// with CRLF, LF or a lone CR.
pub(crate) struct EventDecoder {
    /// The line being read, without its end.
    line: Vec<u8>,
    /// The last line ended with a CR at the end of a frame: a LF first in
    /// the next one belongs to it.
    after_cr: bool,
    /// No line has ended yet (a byte-order mark may start the stream).
    first_line: bool,
    /// The `data` lines of the event being read, each followed by a LF.
    data: Vec<u8>,
    /// The `event` field of the event being read.
    kind: Vec<u8>,
    /// The last event id the stream set (`id:`), kept across events as
    /// the specification's "last event ID buffer" (read by the gateway's
    /// upstream client, which resumes streams).
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    last_id: Option<String>,
    /// The reconnection time the stream asked for (`retry:`), in ms.
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    retry_ms: Option<u64>,
    /// The most bytes an event's data and its current line may take.
    max: usize,
}

impl EventDecoder {
    pub(crate) fn new(max: usize) -> Self {
        EventDecoder {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: Vec::new(),
            kind: Vec::new(),
            last_id: None,
            retry_ms: None,
            max,
        }
    }

    /// The id to resume after (`Last-Event-ID`), if the stream gave one.
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    pub(crate) fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref().filter(|id| !id.is_empty())
    }

    /// How long the stream asked a client to wait before reconnecting.
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    pub(crate) fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Read `bytes`; the data of each `message` event they complete goes to
    /// `out`. An event left incomplete at the end of the stream is never
    /// dispatched, as the specification says.
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        out: &mut VecDeque<Vec<u8>>,
    ) -> Result<(), TooLarge> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\r' || b == b'\n') {
            self.take(&bytes[..end])?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(out);
        }
        self.take(bytes)
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + self.data.len() + bytes.len() > self.max {
            return Err(TooLarge(self.max));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<Vec<u8>>) {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first_line) && line.starts_with(b"\xef\xbb\xbf") {
            line.drain(..3);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            // A comment.
            Some(0) => return,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"event" => self.kind = value.to_vec(),
            // An id with a NUL is ignored, as the specification says.
            b"id" if !value.contains(&0) => {
                self.last_id = std::str::from_utf8(value).ok().map(str::to_owned);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            // Other fields are ignored by the specification.
            _ => {}
        }
        // Reuse the line's allocation.
        line.clear();
        self.line = line;
    }

    fn dispatch(&mut self, out: &mut VecDeque<Vec<u8>>) {
        let kind = std::mem::take(&mut self.kind);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        // Streamable HTTP sends JSON-RPC messages as `message` events, the
        // type of an event that names none.
        if kind.is_empty() || kind == b"message" {
            out.push_back(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `text` fed in frames cut after each offset in `cuts`.
    fn decode(text: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut decoder = EventDecoder::new(1 << 20);
        let mut out = VecDeque::new();
        let mut from = 0;
        for &at in cuts.iter().chain(&[text.len()]) {
            decoder.feed(&text[from..at], &mut out).unwrap();
            from = at;
        }
        out.into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect()
    }

    #[test]
    fn every_line_ending_and_any_cut() {
        let text = "\u{feff}: hi\r\ndata: é1\r\n\r\ndata:two\rdata:  lines\r\revent: other\ndata: x\n\nid: 3\nretry: 5\nevent: message\ndata\n\ndata: last\n";
        let want = ["é1", "two\n lines", ""];
        let bytes = text.as_bytes();
        assert_eq!(decode(bytes, &[]), want);
        // Every single cut, and every byte its own frame.
        for at in 0..=bytes.len() {
            assert_eq!(decode(bytes, &[at]), want, "cut at {at}");
        }
        let each: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(decode(bytes, &each), want);
    }

    #[test]
    fn the_last_event_id_and_retry_are_kept_for_resuming() {
        let mut decoder = EventDecoder::new(64);
        let mut out = VecDeque::new();
        assert_eq!(decoder.last_event_id(), None);
        decoder
            .feed(
                b"id: 7\nretry: 250\ndata: a\n\ndata: b\n\nretry: x\n",
                &mut out,
            )
            .unwrap();
        assert_eq!(decoder.last_event_id(), Some("7"), "kept across events");
        assert_eq!(decoder.retry_ms(), Some(250), "a bad retry is ignored");
        decoder.feed(b"id: 8\0\n\nid\n\n", &mut out).unwrap();
        assert_eq!(
            decoder.last_event_id(),
            None,
            "a NUL id ignored; an empty id resets"
        );
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn an_empty_frame_after_a_cr_keeps_it() {
        let mut decoder = EventDecoder::new(64);
        let mut out = VecDeque::new();
        for frame in [&b"data: a\r"[..], b"", b"\n", b"\r", b"", b"\n"] {
            decoder.feed(frame, &mut out).unwrap();
        }
        assert_eq!(out, [b"a".to_vec()]);
    }

    #[test]
    fn an_event_over_the_bound_is_refused() {
        let mut decoder = EventDecoder::new(16);
        let mut out = VecDeque::new();
        decoder.feed(b"data: 0123456789\n", &mut out).unwrap();
        assert!(decoder.feed(b"data: 0123456789", &mut out).is_err());
        let mut decoder = EventDecoder::new(16);
        assert!(
            decoder.feed(&[b'x'; 17], &mut out).is_err(),
            "one long line"
        );
    }
}
