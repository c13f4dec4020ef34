//! The one pass that reads what the layer routes on from a message's
//! `params` ([`ReadFacts`]), in the deserializer that decodes the message,
//! checking everything else as a `Value` parse would.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::names::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, TASKS_EXTENSION};

/// The params object of a message, as the one pass of
/// [`JsonRpcRequest::decode_plain`](super::JsonRpcRequest) reads it:
/// strings still borrowed from the message.
#[derive(Default)]
pub(crate) struct ReadFacts<'de> {
    pub(super) version: Option<Cow<'de, str>>,
    pub(super) tasks_declared: bool,
    pub(super) task_is_object: bool,
    pub(super) task_id: Member<Cow<'de, str>>,
    pub(super) name: Member<Cow<'de, str>>,
    pub(super) uri: Member<Cow<'de, str>>,
}

/// What a member of the params object is to [`ReadFacts`], by its key.
pub(super) enum Routed {
    Meta,
    TaskId,
    Name,
    Uri,
    Task,
    Other,
}

impl<'de> ReadFacts<'de> {
    /// What member `key` of the params is to the facts.
    pub(super) fn routed(key: &str) -> Routed {
        match key {
            "_meta" => Routed::Meta,
            "taskId" => Routed::TaskId,
            "name" => Routed::Name,
            "uri" => Routed::Uri,
            "task" => Routed::Task,
            _ => Routed::Other,
        }
    }

    /// Keep what `_meta` said (`None`: it is not an object). A repeated
    /// member counts as its last copy, as in a `Value`.
    pub(super) fn set_meta(&mut self, meta: MetaFacts<'de>) {
        let (version, declared) = meta.unwrap_or_default();
        // Declaring counts only in the 2026-07-28 era, as in `RequestEra`.
        self.tasks_declared = declared && version.is_some();
        self.version = version;
    }

    /// Keep what a routed member other than `_meta` is.
    pub(super) fn set(&mut self, routed: &Routed, member: Member<Cow<'de, str>>) {
        match routed {
            Routed::TaskId => self.task_id = member,
            Routed::Name => self.name = member,
            Routed::Uri => self.uri = member,
            Routed::Task => self.task_is_object = matches!(member, Member::Object),
            Routed::Meta | Routed::Other => {}
        }
    }
}

/// Reads the params object into [`ReadFacts`], as a `serde(deserialize_with)`
/// function: a `null` or any other non-object fails (then the message is
/// decoded through a `Value`, which gives the precise error).
pub(crate) fn read_facts<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ReadFacts<'de>>, D::Error> {
    deserializer.deserialize_map(FactsSeed).map(Some)
}

/// What one member's value is, as far as the layer cares.
#[derive(Clone, Default)]
pub(super) enum Member<S> {
    #[default]
    Absent,
    Str(S),
    Object,
    Other,
}

/// A map key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Scalars a visitor answers with one value. Strings are read in full, and
/// numbers parsed, as a `Value` would (so the message is valid for one).
macro_rules! scalars {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// Skips any value, checking it as a `Value` parse would (`IgnoredAny`
/// does not: it accepts lone surrogates and numbers out of range). The
/// nesting limit is serde_json's, counted in the message's deserializer,
/// as for a `Value` of the whole message.
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(());
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<Key<'de>>()?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// Reads any value as a [`Member`], skipping what it does not keep.
struct MemberSeed;

impl<'de> DeserializeSeed<'de> for MemberSeed {
    type Value = Member<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MemberSeed {
    type Value = Member<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(Member::Other);
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Member::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Member::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|()| Member::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip.visit_map(map).map(|()| Member::Object)
    }
}

/// Reads whether the value at `path` (object members, one per step) is an
/// object, skipping the rest. A repeated member counts as its last copy,
/// as in a `Value`.
struct ObjectAt<'p>(&'p [&'p str]);

impl<'de> DeserializeSeed<'de> for ObjectAt<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ObjectAt<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(false);
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Skip.visit_seq(seq).map(|()| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let Some((first, rest)) = self.0.split_first() else {
            return Skip.visit_map(map).map(|()| true);
        };
        let mut found = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == *first {
                found = map.next_value_seed(ObjectAt(rest))?;
            } else {
                map.next_value_seed(Skip)?;
            }
        }
        Ok(found)
    }
}

/// `_meta`: its protocol version and whether its capabilities name the
/// tasks extension; `None` when `_meta` is not an object (then it says
/// nothing).
struct MetaSeed;

/// `_meta`'s protocol version and whether it declares the tasks
/// extension; `None` when `_meta` is not an object.
pub(super) type MetaFacts<'de> = Option<(Option<Cow<'de, str>>, bool)>;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = MetaFacts<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = MetaFacts<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(None);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut version = None;
        let mut declared = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                META_PROTOCOL_VERSION => {
                    version = match map.next_value_seed(MemberSeed)? {
                        Member::Str(s) => Some(s),
                        _ => None,
                    };
                }
                META_CLIENT_CAPABILITIES => {
                    declared = map.next_value_seed(ObjectAt(&["extensions", TASKS_EXTENSION]))?;
                }
                _ => map.next_value_seed(Skip)?,
            }
        }
        Ok(Some((version, declared)))
    }
}

/// The params object, read once into [`ReadFacts`].
struct FactsSeed;

impl<'de> Visitor<'de> for FactsSeed {
    type Value = ReadFacts<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut facts = ReadFacts::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match ReadFacts::routed(&key.0) {
                Routed::Meta => facts.set_meta(map.next_value_seed(MetaSeed)?),
                Routed::Other => map.next_value_seed(Skip)?,
                routed => facts.set(&routed, map.next_value_seed(MemberSeed)?),
            }
        }
        Ok(facts)
    }
}
