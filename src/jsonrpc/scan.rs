//! The common request read by hand, byte by byte: [`scan`], the first try
//! of [`JsonRpcRequest::decode_plain`](super::JsonRpcRequest).
//!
//! It reads what serde's pass in `plain.rs` and `facts.rs` reads (the
//! method, the id, and from `params` what the layer routes on) without
//! serde's visitors, and it gives up (`None`) on anything it does not
//! read as certainly as serde_json would: an escape in a string it keeps
//! or in a key, a `\u` escape of a surrogate, a number with an exponent or
//! more than 18 digits, nesting deeper than [`MAX_DEPTH`], a repeated or
//! unknown top-level member. Then the serde pass decides, so what it
//! accepts is exactly what that pass accepts, read the same way (unit test
//! `the_scan_agrees_with_serde` in `plain.rs`).

use std::borrow::Cow;
use std::ops::Range;

use super::facts::{Member, MetaFacts, ReadFacts, Routed};
use super::special::special_at;
use super::RequestId;
use crate::names::{
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_2026_07_28, TASKS_EXTENSION,
};

/// Objects and arrays nested deeper than this are left to serde (whose
/// limit, 128, is far above).
const MAX_DEPTH: usize = 32;

/// The `_meta` values a 2026-07-28 client writes, compact, as the SDKs
/// serialize them, and whether each declares the tasks extension: read by
/// one comparison ([`Scanner::meta`]); any other text is scanned.
const CANONICAL_META: [(&[u8], bool); 2] = [
    (
        br#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#,
        true,
    ),
    (
        br#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
        false,
    ),
];
/// How deep [`CANONICAL_META`]'s objects nest below `_meta`'s own depth.
const CANONICAL_META_DEPTH: usize = 3;

/// What [`scan`] read of a request.
pub(super) struct Scanned<'a> {
    pub(super) method: &'a str,
    pub(super) id: Option<RequestId>,
    /// The params' facts, and where the params' text lies in the message.
    pub(super) params: Option<(ReadFacts<'a>, Range<usize>)>,
}

/// Read `bytes` as exactly `{"jsonrpc":"2.0","method":…}` with optionally
/// an `id` (a string or an integer) and an object `params`, in any order,
/// each once; `None` when it is anything else or when the scan is not sure
/// (see the module docs).
pub(super) fn scan(bytes: &[u8]) -> Option<Scanned<'_>> {
    // Valid UTF-8 once for the whole message: every string cut from it at
    // a quote is then valid too.
    let text = std::str::from_utf8(bytes).ok()?;
    if let Some(scanned) = scan_compact(text) {
        return Some(scanned);
    }
    let mut s = Scanner::new(text);
    let (mut jsonrpc, mut method, mut id, mut params) = (None, None, None, None);
    s.object(
        1,
        &["jsonrpc", "id", "method", "params"],
        |s, key, depth| {
            match key {
                "jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(s.plain_str()?),
                "method" if method.is_none() => method = Some(s.plain_str()?),
                "id" if id.is_none() => id = Some(s.id()?),
                "params" if params.is_none() => {
                    let start = s.pos;
                    let facts = s.facts(depth)?;
                    params = Some((facts, start..s.pos));
                }
                _ => return None,
            }
            Some(())
        },
    )?;
    if !s.at_end() || jsonrpc? != "2.0" {
        return None;
    }
    Some(Scanned {
        method: method?,
        id,
        params,
    })
}

/// [`scan`] of a request whose members come in the order the SDKs write
/// them, compact: `{"jsonrpc":"2.0","id":N,"method":"…"}` with
/// `,"params":{…}` before the end, `N` an integer. Its member names are
/// compared in place instead of looked up one by one; `None` for anything
/// else, which [`scan`] then reads member by member (with the same
/// result for what this reads).
fn scan_compact(text: &str) -> Option<Scanned<'_>> {
    let mut s = Scanner::new(text);
    s.literal(br#"{"jsonrpc":"2.0","id":"#)?;
    let id = s.number()??;
    s.literal(br#","method":"#)?;
    let method = s.plain_str()?;
    let params = match s.next()? {
        b'}' => None,
        b',' => {
            s.literal(br#""params":"#)?;
            let start = s.pos;
            // At the depth `scan` reads it: a member of the top object.
            let facts = match s.task_params() {
                Some(facts) => facts,
                None => {
                    s.pos = start;
                    s.facts(2)?
                }
            };
            let params = (facts, start..s.pos);
            s.expect(b'}')?;
            Some(params)
        }
        _ => return None,
    };
    if !s.at_end() {
        return None;
    }
    Some(Scanned {
        method,
        id: Some(RequestId::Number(id)),
        params,
    })
}

/// Read `bytes` as exactly `{"jsonrpc":"2.0","id":N,"result":…}` (any
/// order, each once, `N` a non-negative integer): an answer to one of the
/// gateway's requests, as `(N, where the result's text lies)`. `None` for
/// anything else or when the scan is not sure (see the module docs): the
/// caller then reads the message with serde.
#[cfg(feature = "gateway")]
pub(crate) fn answer(bytes: &[u8]) -> Option<(u64, Range<usize>)> {
    let mut s = Scanner::new(std::str::from_utf8(bytes).ok()?);
    let (mut jsonrpc, mut id, mut result) = (None, None, None);
    s.object(1, &["jsonrpc", "id", "result"], |s, key, depth| {
        match key {
            "jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(s.plain_str()?),
            "id" if id.is_none() => id = Some(u64::try_from(s.number()??).ok()?),
            "result" if result.is_none() => {
                let start = s.pos;
                s.skip(depth)?;
                result = Some(start..s.pos);
            }
            _ => return None,
        }
        Some(())
    })?;
    if !s.at_end() || jsonrpc? != "2.0" {
        return None;
    }
    Some((id?, result?))
}

/// Hand each member of the object `text` to `member(key, value's text)`,
/// in the order written; `None` (after some members, maybe) when it is not
/// an object or the scan is not sure, as for [`answer`]: keys with escapes
/// included. The values are checked as a `Value` parse checks them.
#[cfg(feature = "gateway")]
pub(crate) fn members<'a>(text: &'a str, mut member: impl FnMut(&'a str, &'a str)) -> Option<()> {
    let mut s = Scanner::new(text);
    s.object(1, &[], |s, key, depth| {
        let start = s.pos;
        s.skip(depth)?;
        member(key, s.text.get(start..s.pos)?);
        Some(())
    })?;
    s.at_end().then_some(())
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    /// A scan of `text` from its start.
    fn new(text: &'a str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    /// Whether only whitespace is left.
    fn at_end(&mut self) -> bool {
        self.ws();
        self.pos == self.bytes.len()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.next()? == b).then_some(())
    }

    /// An object at `depth`, each member's value read by `member(self,
    /// key, depth of the value)`, which leaves the position after it.
    ///
    /// A key equal to one of `known` (which need no escaping) is compared
    /// whole instead of scanned: the long `_meta` names are most of a
    /// request's bytes, and a known name of another length costs one
    /// comparison of a byte.
    fn object(
        &mut self,
        depth: usize,
        known: &[&'static str],
        mut member: impl FnMut(&mut Self, &'a str, usize) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        self.expect(b'{')?;
        self.items(b'}', |s| {
            let key = match s.known_key(known) {
                Some(key) => key,
                None => s.plain_str()?,
            };
            s.ws();
            s.expect(b':')?;
            s.ws();
            member(s, key, depth + 1)
        })
    }

    /// An array at `depth`, its values checked.
    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.expect(b'[')?;
        self.items(b']', |s| s.skip(depth + 1))
    }

    /// The comma-separated items of an object or array, read by `item`,
    /// after its opening byte and up to `close`.
    fn items(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.peek()? == close {
            self.pos += 1;
            return Some(());
        }
        loop {
            self.ws();
            item(self)?;
            self.ws();
            match self.next()? {
                b',' => {}
                b if b == close => return Some(()),
                _ => return None,
            }
        }
    }

    /// One of `known` (strings without quotes, backslashes or control
    /// characters) if the string here is exactly it: what [`plain_str`]
    /// would read there, found by one comparison.
    ///
    /// [`plain_str`]: Self::plain_str
    fn known_key(&mut self, known: &[&'static str]) -> Option<&'a str> {
        let rest = self.bytes.get(self.pos..)?;
        let (&b'"', rest) = rest.split_first()? else {
            return None;
        };
        let key = known
            .iter()
            .find(|key| rest.get(key.len()) == Some(&b'"') && rest.starts_with(key.as_bytes()))?;
        self.pos += key.len() + 2;
        Some(key)
    }

    /// A string without escapes, borrowed.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        let end = special_at(self.bytes, start)?;
        if self.bytes.get(end) != Some(&b'"') {
            return None;
        }
        self.pos = end + 1;
        self.text.get(start..end)
    }

    /// Any string, its escapes checked (a surrogate gives up).
    fn skip_str(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            self.pos = special_at(self.bytes, self.pos)?;
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        let hex = self.bytes.get(self.pos..self.pos + 4)?;
                        let mut unit = 0u32;
                        for &h in hex {
                            unit = unit * 16 + char::from(h).to_digit(16)?;
                        }
                        if (0xD800..=0xDFFF).contains(&unit) {
                            return None;
                        }
                        self.pos += 4;
                    }
                    _ => return None,
                },
                // A control character.
                _ => return None,
            }
        }
    }

    /// A number of at most 18 digits before and 17 after the point, no
    /// exponent; its value when it is an integer.
    fn number(&mut self) -> Option<Option<i64>> {
        let negative = self.peek()? == b'-';
        if negative {
            self.pos += 1;
        }
        let mut value: i64 = 0;
        match self.next()? {
            b'0' => {}
            d @ b'1'..=b'9' => {
                value = i64::from(d - b'0');
                let mut digits = 1;
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    digits += 1;
                    if digits > 18 {
                        return None;
                    }
                    value = value * 10 + i64::from(d - b'0');
                    self.pos += 1;
                }
            }
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let start = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if !(1..=17).contains(&(self.pos - start)) {
                return None;
            }
            integer = false;
        }
        match self.peek() {
            Some(b'e' | b'E' | b'0'..=b'9') => None,
            // serde_json reads `-0` as a float.
            _ if negative && value == 0 => Some(None),
            _ => Some(integer.then_some(if negative { -value } else { value })),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos + word.len();
        (self.bytes.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    /// Any value, checked as a `Value` parse would check it.
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_str(),
            b'{' => self.object(depth, &[], |s, _, depth| s.skip(depth)),
            b'[' => self.array(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => None,
        }
    }

    /// The `id`: a string without escapes, or an integer that fits `i64`.
    fn id(&mut self) -> Option<RequestId> {
        if self.peek()? == b'"' {
            return self.plain_str().map(|s| RequestId::String(s.to_owned()));
        }
        self.number()?.map(RequestId::Number)
    }

    /// A member's value as a [`Member`]; a string with escapes gives up.
    fn member(&mut self, depth: usize) -> Option<Member<Cow<'a, str>>> {
        match self.peek()? {
            b'"' => self.plain_str().map(|s| Member::Str(Cow::Borrowed(s))),
            b'{' => self.skip(depth).map(|()| Member::Object),
            _ => self.skip(depth).map(|()| Member::Other),
        }
    }

    /// Whether the value at `path` is an object (the last copy of a
    /// repeated member counts, as in a `Value`).
    fn object_at(&mut self, path: &[&'static str], depth: usize) -> Option<bool> {
        let Some((first, rest)) = path.split_first() else {
            return Some(matches!(self.member(depth)?, Member::Object));
        };
        if self.peek()? != b'{' {
            return self.skip(depth).map(|()| false);
        }
        let mut found = false;
        self.object(depth, &[*first], |s, key, depth| {
            if key == *first {
                found = s.object_at(rest, depth)?;
                Some(())
            } else {
                s.skip(depth)
            }
        })?;
        Some(found)
    }

    /// `_meta`: its protocol version and whether its capabilities name the
    /// tasks extension; `None` when it is not an object.
    fn meta(&mut self, depth: usize) -> Option<MetaFacts<'a>> {
        if self.peek()? != b'{' {
            return self.skip(depth).map(|()| None);
        }
        // The `_meta` a 2026-07-28 client writes on nearly every request,
        // compact: its facts are known, and one comparison passes it (the
        // scan below reads the same facts of these bytes, in ~1k
        // instructions). Not deeper than the scan itself reads.
        if depth + CANONICAL_META_DEPTH <= MAX_DEPTH {
            let rest = self.bytes.get(self.pos..)?;
            for (text, facts) in CANONICAL_META {
                if rest.starts_with(text) {
                    self.pos += text.len();
                    return Some(Some((Some(Cow::Borrowed(PROTOCOL_2026_07_28)), facts)));
                }
            }
        }
        let (mut version, mut declared) = (None, false);
        self.object(
            depth,
            &[META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES],
            |s, key, depth| {
                match key {
                    META_PROTOCOL_VERSION => {
                        version = match s.member(depth)? {
                            Member::Str(v) => Some(v),
                            _ => None,
                        };
                    }
                    META_CLIENT_CAPABILITIES => {
                        declared = s.object_at(&["extensions", TASKS_EXTENSION], depth)?;
                    }
                    _ => s.skip(depth)?,
                }
                Some(())
            },
        )?;
        Some(Some((version, declared)))
    }

    /// The params object, read as `facts.rs` reads it.
    /// The params of a `tasks/*` request as the SDKs write them, compact:
    /// `{"taskId":"…","_meta":…}`, the id a string without escapes and the
    /// `_meta` one of [`CANONICAL_META`], read without looking member names
    /// up; `None` for anything else (the caller then reads the params with
    /// [`facts`](Self::facts), which reads these the same).
    fn task_params(&mut self) -> Option<ReadFacts<'a>> {
        self.literal(br#"{"taskId":"#)?;
        let task_id = self.plain_str()?;
        self.literal(br#","_meta":"#)?;
        let rest = self.bytes.get(self.pos..)?;
        // `_meta` at depth 3 (params 2): within `meta`'s depth bound.
        let (text, declared) = CANONICAL_META
            .into_iter()
            .find(|(text, _)| rest.starts_with(text))?;
        self.pos += text.len();
        self.expect(b'}')?;
        let mut facts = ReadFacts::default();
        facts.set(&Routed::TaskId, Member::Str(Cow::Borrowed(task_id)));
        facts.set_meta(Some((Some(Cow::Borrowed(PROTOCOL_2026_07_28)), declared)));
        Some(facts)
    }

    fn facts(&mut self, depth: usize) -> Option<ReadFacts<'a>> {
        let mut facts = ReadFacts::default();
        let known = &["taskId", "_meta", "name", "arguments", "uri", "task"];
        self.object(depth, known, |s, key, depth| {
            match ReadFacts::routed(key) {
                Routed::Meta => facts.set_meta(s.meta(depth)?),
                Routed::Other => s.skip(depth)?,
                routed => facts.set(&routed, s.member(depth)?),
            }
            Some(())
        })?;
        Some(facts)
    }
}

#[cfg(test)]
mod tests {
    /// The upstream's answers the gateway reads by hand: exactly what serde
    /// reads as `{jsonrpc, id, result}`, the result's text as written.
    #[cfg(feature = "gateway")]
    #[test]
    fn answers_are_read_by_hand_only_when_sure() {
        use super::answer;
        let text = |b: &str| answer(b.as_bytes()).map(|(id, r)| (id, b[r].to_owned()));
        let result = r#"{"content":[{"type":"text","text":"a\"b\u00e9"}],"isError":false}"#;
        let line = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#);
        assert_eq!(text(&line), Some((7, result.to_owned())));
        let reordered = format!(r#" {{ "result" : {result} , "id" : 0 , "jsonrpc" : "2.0" }} "#);
        assert_eq!(text(&reordered), Some((0, result.to_owned())));
        for other in [
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"7","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}} x"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"a":"\ud800"}}"#,
            r#"{"jsonrpc":"1.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"a":}}"#,
        ] {
            assert_eq!(text(other), None, "{other}");
        }
    }

    /// An object's members by hand: keys and values' text in order; keys
    /// with escapes and anything not an object are left to serde.
    #[cfg(feature = "gateway")]
    #[test]
    fn members_are_read_by_hand_only_when_sure() {
        use super::members;
        let read = |t: &str| {
            let mut out = Vec::new();
            members(t, |k, v| out.push(format!("{k}={v}"))).map(|()| out)
        };
        assert_eq!(
            read(r#"{"name":"echo", "arguments" : {"text":"hi","n":[1,{}]},"_meta":null}"#),
            Some(vec![
                r#"name="echo""#.to_owned(),
                r#"arguments={"text":"hi","n":[1,{}]}"#.to_owned(),
                "_meta=null".to_owned(),
            ])
        );
        assert_eq!(read("{}"), Some(vec![]));
        for other in [
            r#"{"na\u006de":1}"#,
            "[1]",
            r#"{"a":1"#,
            r#"{"a":1} 2"#,
            r#"{"a":01}"#,
        ] {
            assert_eq!(read(other), None, "{other}");
        }
    }
}
