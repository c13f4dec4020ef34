//! [`Params`]: a request's `params`, read from the message that arrived
//! until a caller asks for a `Value`.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::facts::{Member, ReadFacts};
use crate::names::{
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_2025_11_25, PROTOCOL_2026_07_28,
    TASKS_EXTENSION,
};

/// The `params` of a [`JsonRpcRequest`](super::JsonRpcRequest).
///
/// A request decoded from bytes keeps the message it arrived in (shared,
/// not copied) and what the layer routes on (`_meta`'s protocol version and
/// capabilities, `taskId`, `name`, `uri`, whether `task` is an object), read
/// in the same pass that decoded the message. A `Value` of the params is
/// built only when someone asks for one ([`as_value`](Self::as_value),
/// [`as_object`](Self::as_object), [`get`](Self::get); once, then kept), so
/// a `tasks/get`, or a passed-through call whose inner service reads typed
/// params ([`deserialize`](Self::deserialize)), never builds the tree.
///
/// Params built in-process hold their `Value` (`From<Value>`,
/// `From<Map<String, Value>>`). Two params are equal when their values are.
#[derive(Clone)]
pub struct Params {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Value(Value),
    /// Boxed: a request moves through several futures, and this is five
    /// times the size of a `Value`.
    Message(Box<FromMessage>),
}

/// Aligned to 256 bytes, its size (224 without), so that its box is a
/// block of a power-of-two size. Rust allocates a box by size and
/// alignment; mimalloc (the allocator of `mcp-tasks` and the example
/// server) serves an aligned request of another size, once its page's
/// free list is empty (every time, at one allocation and one free of that
/// size a request), by over-allocating in a larger size class, whose
/// blocks never refill that list: ~150 instructions instead of ~55 a
/// request (BENCHMARKS.md, issue 32's ninth pass). Other allocators lose
/// only the rounding.
#[derive(Clone)]
#[repr(align(256))]
struct FromMessage {
    /// The whole JSON-RPC message, valid JSON with exactly one `params`,
    /// an object.
    message: Bytes,
    facts: Facts,
    parsed: OnceLock<Value>,
    /// Where the params' text is in `message`, when the decoding pass
    /// found it (the scan does)...
    known_text: Option<Range<usize>>,
    /// ...or else found on first use.
    text: OnceLock<Range<usize>>,
}

/// A string member of `params`, as the layer reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StrParam<'a> {
    Absent,
    Str(&'a str),
    /// Present, but not a string.
    Other,
}

impl<'a> StrParam<'a> {
    /// The string, when the member is one.
    pub(crate) fn as_str(self) -> Option<&'a str> {
        match self {
            StrParam::Str(s) => Some(s),
            StrParam::Absent | StrParam::Other => None,
        }
    }
}

impl Params {
    /// The params of `message`, whose one pass read `facts` (borrowed from
    /// `message`).
    /// `text` is where the params lie in `message`, when known.
    pub(crate) fn from_message(
        message: &Bytes,
        facts: ReadFacts<'_>,
        text: Option<Range<usize>>,
    ) -> Self {
        let base = message.as_ref();
        Params {
            repr: Repr::Message(Box::new(FromMessage {
                facts: Facts {
                    version: facts.version.map(|v| Text::version(v, base)),
                    tasks_declared: facts.tasks_declared,
                    task_is_object: facts.task_is_object,
                    task_id: facts.task_id.locate(base),
                    name: facts.name.locate(base),
                    uri: facts.uri.locate(base),
                },
                message: message.clone(),
                parsed: OnceLock::new(),
                // Not `OnceLock::from`: setting a cell costs its
                // synchronisation, on every request.
                known_text: text,
                text: OnceLock::new(),
            })),
        }
    }

    /// The params as a `Value`, parsed on first use.
    pub fn as_value(&self) -> &Value {
        match &self.repr {
            Repr::Value(value) => value,
            Repr::Message(m) => m
                .parsed
                .get_or_init(|| params_in(&m.message).unwrap_or(Value::Null)),
        }
    }

    /// The params as a `Value`, taken out.
    pub fn into_value(self) -> Value {
        match self.repr {
            Repr::Value(value) => value,
            Repr::Message(mut m) => m
                .parsed
                .take()
                .unwrap_or_else(|| params_in(&m.message).unwrap_or(Value::Null)),
        }
    }

    /// The params object, if the params are one (decoded requests always
    /// are).
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        self.as_value().as_object()
    }

    /// One member of the params object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    /// The JSON text the params arrived as, if they did (as sent:
    /// whitespace included).
    pub fn text(&self) -> Option<&str> {
        let Repr::Message(m) = &self.repr else {
            return None;
        };
        let (message, text) = (&m.message, &m.text);
        let range = m.known_text.as_ref().unwrap_or_else(|| {
            text.get_or_init(|| {
                #[derive(Deserialize)]
                struct Only<'a> {
                    #[serde(borrow)]
                    params: &'a RawValue,
                }
                serde_json::from_slice::<Only<'_>>(message)
                    .ok()
                    .and_then(|only| offset_in(only.params.get(), message))
                    .unwrap_or(0..0)
            })
        });
        std::str::from_utf8(message.get(range.clone())?).ok()
    }

    /// The params as `T`, read straight from the message when they arrived
    /// in one and no `Value` was built yet.
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match &self.repr {
            Repr::Message(m) if m.parsed.get().is_none() => params_in(&m.message),
            _ => T::deserialize(self.as_value()),
        }
    }

    /// `_meta`'s `io.modelcontextprotocol/protocolVersion`, if a string.
    pub(crate) fn protocol_version(&self) -> Option<&str> {
        self.era_facts().0
    }

    /// `_meta`'s protocol version (if a string), and whether its client
    /// capabilities hold the tasks extension as an object (counted only
    /// with a version): what the request's era is read from, in one look.
    pub(crate) fn era_facts(&self) -> (Option<&str>, bool) {
        match &self.repr {
            Repr::Message(m) => (
                m.facts.version.as_ref().map(|v| v.get(&m.message)),
                m.facts.tasks_declared,
            ),
            Repr::Value(value) => {
                let Some(meta) = value_meta(value) else {
                    return (None, false);
                };
                let version = meta.get(META_PROTOCOL_VERSION).and_then(Value::as_str);
                let declared = version.is_some()
                    && meta
                        .get(META_CLIENT_CAPABILITIES)
                        .and_then(|c| c.get("extensions"))
                        .and_then(|e| e.get(TASKS_EXTENSION))
                        .is_some_and(Value::is_object);
                (version, declared)
            }
        }
    }

    /// A member the layer reads as a string.
    pub(crate) fn str_param(&self, key: &str) -> StrParam<'_> {
        if let Repr::Message(m) = &self.repr {
            let (message, facts) = (&m.message, &m.facts);
            let Some(member) = facts.member(key) else {
                // Not a member the facts keep: read the tree.
                return value_str_param(self.as_value(), key);
            };
            return match member {
                Member::Absent => StrParam::Absent,
                Member::Str(text) => StrParam::Str(text.get(message)),
                Member::Object | Member::Other => StrParam::Other,
            };
        }
        value_str_param(self.as_value(), key)
    }

    /// [`str_param`](Self::str_param)'s string as its UTF-8 bytes, if it
    /// is one: without the UTF-8 check a `&str` of the message costs, for
    /// a caller that compares it.
    #[cfg(feature = "axum")]
    pub(crate) fn str_param_bytes(&self, key: &str) -> Option<&[u8]> {
        if let Repr::Message(m) = &self.repr {
            if let Some(Member::Str(text)) = m.facts.member(key) {
                return Some(text.bytes(&m.message));
            }
        }
        self.str_param(key).as_str().map(str::as_bytes)
    }

    /// Whether member `key` is an object (`task` is the one the layer asks
    /// about; any other reads the tree).
    pub(crate) fn is_object_param(&self, key: &str) -> bool {
        match &self.repr {
            Repr::Message(m) if key == "task" => m.facts.task_is_object,
            _ => self.get(key).is_some_and(Value::is_object),
        }
    }
}

/// The `params` member of `message` as `T`, the other members skipped (a
/// `Value` of a message decoded before always parses).
fn params_in<T: serde::de::DeserializeOwned>(message: &[u8]) -> Result<T, serde_json::Error> {
    #[derive(Deserialize)]
    struct Only<T> {
        params: T,
    }
    serde_json::from_slice::<Only<T>>(message).map(|only| only.params)
}

/// Where `part`, borrowed from `whole`, lies in it.
fn offset_in(part: &str, whole: &[u8]) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

fn value_meta(value: &Value) -> Option<&Map<String, Value>> {
    value.get("_meta")?.as_object()
}

fn value_str_param<'a>(value: &'a Value, key: &str) -> StrParam<'a> {
    match value.get(key) {
        None => StrParam::Absent,
        Some(Value::String(s)) => StrParam::Str(s),
        Some(_) => StrParam::Other,
    }
}

impl From<Value> for Params {
    fn from(value: Value) -> Self {
        Params {
            repr: Repr::Value(value),
        }
    }
}

impl From<Map<String, Value>> for Params {
    fn from(map: Map<String, Value>) -> Self {
        Params::from(Value::Object(map))
    }
}

/// `null`, as `Value::default()`.
impl Default for Params {
    fn default() -> Self {
        Params::from(Value::Null)
    }
}

/// `params["key"]`, as on a `Value`: `Null` for a missing member.
impl std::ops::Index<&str> for Params {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        &self.as_value()[key]
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        self.as_value() == other.as_value()
    }
}

impl PartialEq<Value> for Params {
    fn eq(&self, other: &Value) -> bool {
        self.as_value() == other
    }
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.repr, self.text()) {
            (Repr::Message(_), Some(text)) => f.debug_tuple("Params").field(&text).finish(),
            _ => fmt::Debug::fmt(self.as_value(), f),
        }
    }
}

impl Serialize for Params {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Through the value, so that every serializer (not only
        // serde_json's) sees a map.
        self.as_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Params::from)
    }
}

/// What the layer routes on, with each string as a place in the message
/// (or a copy, for a string with escapes).
#[derive(Clone)]
struct Facts {
    version: Option<Text>,
    tasks_declared: bool,
    task_is_object: bool,
    task_id: Member<Text>,
    name: Member<Text>,
    uri: Member<Text>,
}

impl Facts {
    /// The member the facts keep under `key`, if they keep it.
    fn member(&self, key: &str) -> Option<&Member<Text>> {
        match key {
            "taskId" => Some(&self.task_id),
            "name" => Some(&self.name),
            "uri" => Some(&self.uri),
            _ => None,
        }
    }
}

/// A string of the message.
#[derive(Clone)]
enum Text {
    At(Range<usize>),
    Unescaped(Box<str>),
    /// A protocol version this crate names (read on every look at the
    /// era: no UTF-8 check of the message each time).
    Known(&'static str),
}

impl Text {
    fn version(s: Cow<'_, str>, message: &[u8]) -> Self {
        match [PROTOCOL_2026_07_28, PROTOCOL_2025_11_25]
            .into_iter()
            .find(|known| *known == s)
        {
            Some(known) => Text::Known(known),
            None => Text::locate(s, message),
        }
    }

    fn locate(s: Cow<'_, str>, message: &[u8]) -> Self {
        match s {
            Cow::Borrowed(b) => {
                offset_in(b, message).map_or_else(|| Text::Unescaped(b.into()), Text::At)
            }
            Cow::Owned(o) => Text::Unescaped(o.into_boxed_str()),
        }
    }

    /// [`get`](Self::get)'s bytes, not checked again as UTF-8.
    #[cfg(feature = "axum")]
    fn bytes<'a>(&'a self, message: &'a [u8]) -> &'a [u8] {
        match self {
            Text::At(range) => message.get(range.clone()).unwrap_or_default(),
            Text::Unescaped(s) => s.as_bytes(),
            Text::Known(s) => s.as_bytes(),
        }
    }

    fn get<'a>(&'a self, message: &'a [u8]) -> &'a str {
        match self {
            // A string serde_json borrowed from the message: valid UTF-8.
            Text::At(range) => message
                .get(range.clone())
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            Text::Unescaped(s) => s,
            Text::Known(s) => s,
        }
    }
}

impl Member<Cow<'_, str>> {
    fn locate(self, message: &[u8]) -> Member<Text> {
        match self {
            Member::Absent => Member::Absent,
            Member::Str(s) => Member::Str(Text::locate(s, message)),
            Member::Object => Member::Object,
            Member::Other => Member::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde::Deserialize;
    use serde_json::{json, Value};

    use crate::jsonrpc::{JsonRpcRequest, StrParam};

    fn decoded(text: &str) -> JsonRpcRequest {
        JsonRpcRequest::decode_plain(&Bytes::copy_from_slice(text.as_bytes())).unwrap()
    }

    /// The boxed part of params read from a message is a block of a
    /// power-of-two size, its alignment no larger (mimalloc's fast path).
    #[test]
    fn from_message_boxes_a_power_of_two() {
        let size = std::mem::size_of::<super::FromMessage>();
        assert!(size.is_power_of_two(), "{size}");
        assert_eq!(std::mem::align_of::<super::FromMessage>(), size);
    }

    /// Params read from the message give what a `Value` of them gives, by
    /// every way in, and the text as sent.
    #[test]
    fn params_kept_in_the_message_read_as_their_value() {
        let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"name":"gr\u0065et", "arguments":{"n":[1,2.5,null]},"_meta":{}} }"#;
        let request = decoded(text);
        let params = request.params.as_ref().unwrap();
        assert_eq!(
            params.text(),
            Some(r#"{"name":"gr\u0065et", "arguments":{"n":[1,2.5,null]},"_meta":{}}"#)
        );
        #[derive(Deserialize, PartialEq, Debug)]
        struct Call {
            name: String,
            arguments: Value,
        }
        let expected = Call {
            name: "greet".into(),
            arguments: json!({"n": [1, 2.5, null]}),
        };
        // Typed, before and after a `Value` exists.
        assert_eq!(params.deserialize::<Call>().unwrap(), expected);
        assert_eq!(request.str_param("name"), StrParam::Str("greet"));
        let value = json!({"name": "greet", "arguments": {"n": [1, 2.5, null]}, "_meta": {}});
        assert_eq!(params.as_value(), &value);
        assert_eq!(params.deserialize::<Call>().unwrap(), expected);
        assert_eq!(params["arguments"]["n"][1], 2.5);
        assert_eq!(params.get("missing"), None);
        assert_eq!(request.params_object().unwrap().len(), 3);
        assert_eq!(*params, value);
        assert_eq!(params.clone().into_value(), value);
        // A fresh copy, never parsed, gives the same value when taken out.
        assert_eq!(decoded(text).params.unwrap().into_value(), value);
        assert!(format!("{params:?}").contains("arguments"));
    }

    /// Params built in-process hold their value and have no text.
    #[test]
    fn params_built_in_process_hold_their_value() {
        let request = JsonRpcRequest::new(1, "tasks/get", json!({"taskId": "t"}));
        let params = request.params.as_ref().unwrap();
        assert_eq!(params.text(), None);
        assert_eq!(request.str_param("taskId"), StrParam::Str("t"));
        assert_eq!(request.era_facts(), (None, false));
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t"}})
        );
    }
}
