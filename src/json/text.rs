//! [`JsonText`]: a JSON value kept as its text.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{compact, parse_trusted, write_json};

/// A JSON value kept as its compact text, shared by every copy: a task's
/// result is serialized once, when the handler answers, and every read of
/// the task copies the text out instead of building a `Value` again.
///
/// It serializes and deserializes as the JSON it holds (deserializing needs
/// `serde_json`'s deserializer). Two texts are equal when they are the same
/// text or parse to the same value.
#[derive(Clone)]
pub struct JsonText {
    text: Arc<str>,
    /// Where the JSON starts in `text` (a store may keep it after other
    /// text of the same record).
    start: u32,
}

impl JsonText {
    /// The text of `value`, compact (byte for byte what `serde_json` writes).
    pub fn from_value(value: &Value) -> Self {
        let mut out = String::with_capacity(256);
        write_json(&mut out, value);
        JsonText::whole(Arc::from(out))
    }

    /// Text written by this crate's JSON writer.
    pub(crate) fn from_written(text: String) -> Self {
        JsonText::whole(Arc::from(text))
    }

    fn whole(text: Arc<str>) -> Self {
        JsonText { text, start: 0 }
    }

    /// The JSON at `start` of `text`, which some `JsonText` wrote there:
    /// shares `text`, copies nothing.
    pub(crate) fn trusted_tail(text: &Arc<str>, start: usize) -> Self {
        match u32::try_from(start) {
            Ok(at) if text.is_char_boundary(start) => JsonText {
                text: Arc::clone(text),
                start: at,
            },
            _ => JsonText::whole(Arc::from(text.get(start..).unwrap_or("null"))),
        }
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.text.get(self.start as usize..).unwrap_or("null")
    }

    /// The text parsed into a `Value`.
    pub fn to_value(&self) -> Value {
        parse_trusted(self.get())
    }

    /// The text parsed into an object (empty if it holds something else; a
    /// task's result is always an object).
    pub(crate) fn to_object(&self) -> Map<String, Value> {
        match self.to_value() {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }
}

/// Kept without line breaks (see [`JsonRpcResponse::raw_result`](crate::JsonRpcResponse::raw_result)).
impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> Self {
        JsonText::whole(Arc::from(compact(raw).get()))
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        JsonText::from_value(&value)
    }
}

impl From<Map<String, Value>> for JsonText {
    fn from(map: Map<String, Value>) -> Self {
        JsonText::from_value(&Value::Object(map))
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.to_value() == other.to_value()
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Valid by construction; checked again since serde needs a `RawValue`.
        let raw: &RawValue = serde_json::from_str(self.get()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(JsonText::from)
    }
}
