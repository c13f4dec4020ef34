//! Sealing and opening a record's private fields: each one on its own, as
//! `KEY_ID:HEX(nonce ‖ ciphertext ‖ tag)`, with the task id, the field name
//! and the key id as associated data.

use std::collections::BTreeMap;

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::XNonce;
use serde::de::DeserializeOwned;
use serde::Serialize;
use zeroize::Zeroizing;

use super::keyring::SealKeyRing;
use crate::hex::{decode_hex, push_hex};
use crate::json::JsonText;
use crate::store::{Error, TaskRecord};

/// Bytes in an XChaCha20-Poly1305 nonce: random, so no counter has to be
/// shared between replicas.
const NONCE_BYTES: usize = 24;

/// Domain of the associated data: a sealed value of another format or
/// purpose never opens as one of ours.
const AAD_DOMAIN: &[u8] = b"mcp-task-layer/seal/v1";

/// The names of the sealed fields, as written in `TaskRecord::sealed`.
pub(super) const ARGUMENTS: &str = "arguments";
pub(super) const META: &str = "meta";
pub(super) const REQUEST_STATE: &str = "request_state";
pub(super) const INPUT_REQUESTS: &str = "input_requests";
pub(super) const INPUT_RESPONSES: &str = "input_responses";
pub(super) const OUTCOME: &str = "outcome";
pub(super) const STATUS_MESSAGE: &str = "status_message";

/// Why a sealed field did not open. Names the field and the key id, never
/// any content.
#[derive(Debug)]
pub(super) struct Unopened {
    pub(super) field: String,
    pub(super) why: String,
}

/// `record` with its private fields moved, sealed, into `record.sealed`.
pub(super) fn seal(ring: &SealKeyRing, mut r: TaskRecord) -> Result<TaskRecord, Error> {
    if !r.sealed.is_empty() {
        return Err(Error::Encode(
            "the record carries sealed fields already".into(),
        ));
    }
    let mut sealed = BTreeMap::new();
    let id = r.id.clone();
    let mut put = |field: &str, plain: &[u8]| -> Result<(), Error> {
        sealed.insert(field.to_owned(), seal_bytes(ring, &id, field, plain)?);
        Ok(())
    };
    if let Some(text) = r.arguments.take() {
        put(ARGUMENTS, text.get().as_bytes())?;
    }
    if let Some(text) = r.meta.take() {
        put(META, text.get().as_bytes())?;
    }
    if let Some(state) = r.request_state.take() {
        put(REQUEST_STATE, Zeroizing::new(state).as_bytes())?;
    }
    if let Some(message) = r.status_message.take() {
        put(STATUS_MESSAGE, Zeroizing::new(message).as_bytes())?;
    }
    if !r.input_requests.is_empty() {
        put(
            INPUT_REQUESTS,
            &to_json(&std::mem::take(&mut r.input_requests))?,
        )?;
    }
    if !r.input_responses.is_empty() {
        put(
            INPUT_RESPONSES,
            &to_json(&std::mem::take(&mut r.input_responses))?,
        )?;
    }
    if let Some(outcome) = r.outcome.take() {
        put(OUTCOME, &to_json(&outcome)?)?;
    }
    r.sealed = sealed;
    Ok(r)
}

/// Open every sealed field of `r` back into its place. On an error, `r`'s
/// private fields are partly opened: only its clear ones may be used.
pub(super) fn open(ring: &SealKeyRing, r: &mut TaskRecord) -> Result<(), Unopened> {
    let sealed = std::mem::take(&mut r.sealed);
    for (field, value) in &sealed {
        let plain = open_bytes(ring, &r.id, field, value).map_err(|why| Unopened {
            field: field.clone(),
            why,
        })?;
        let bad_json = |e: serde_json::Error| Unopened {
            field: field.clone(),
            why: format!("it opened but does not read back: {e}"),
        };
        match field.as_str() {
            ARGUMENTS => r.arguments = Some(json_text(&plain).map_err(bad_json)?),
            META => r.meta = Some(json_text(&plain).map_err(bad_json)?),
            REQUEST_STATE => r.request_state = Some(utf8(field, &plain)?),
            STATUS_MESSAGE => r.status_message = Some(utf8(field, &plain)?),
            INPUT_REQUESTS => r.input_requests = from_json(&plain).map_err(bad_json)?,
            INPUT_RESPONSES => r.input_responses = from_json(&plain).map_err(bad_json)?,
            OUTCOME => r.outcome = Some(from_json(&plain).map_err(bad_json)?),
            _ => {
                return Err(Unopened {
                    field: field.clone(),
                    why: "no such sealed field".into(),
                })
            }
        }
    }
    Ok(())
}

fn to_json<T: Serialize>(value: &T) -> Result<Zeroizing<Vec<u8>>, Error> {
    serde_json::to_vec(value)
        .map(Zeroizing::new)
        .map_err(|e| Error::Encode(Box::new(e)))
}

fn from_json<T: DeserializeOwned>(plain: &[u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(plain)
}

/// JSON text exactly as it was sealed (checked: a key holder could have
/// sealed anything).
fn json_text(plain: &[u8]) -> Result<JsonText, serde_json::Error> {
    serde_json::from_slice::<serde::de::IgnoredAny>(plain)?;
    let text = std::str::from_utf8(plain).map_err(serde::de::Error::custom)?;
    Ok(JsonText::from_written(text.to_owned()))
}

fn utf8(field: &str, plain: &[u8]) -> Result<String, Unopened> {
    String::from_utf8(plain.to_vec()).map_err(|_| Unopened {
        field: field.to_owned(),
        why: "it opened but is not UTF-8".into(),
    })
}

/// What binds a sealed value to its place: the task, the field, the key.
fn aad(task_id: &str, field: &str, key_id: &str) -> Vec<u8> {
    let mut aad =
        Vec::with_capacity(AAD_DOMAIN.len() + task_id.len() + field.len() + key_id.len() + 3);
    for part in [
        AAD_DOMAIN,
        task_id.as_bytes(),
        field.as_bytes(),
        key_id.as_bytes(),
    ] {
        aad.extend_from_slice(part);
        // Ids and field names hold no NUL: the parts cannot run together.
        aad.push(0);
    }
    aad
}

/// One value sealed with the newest key.
fn seal_bytes(
    ring: &SealKeyRing,
    task_id: &str,
    field: &str,
    plain: &[u8],
) -> Result<String, Error> {
    let (key_id, cipher) = ring.newest();
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce)
        .map_err(|e| Error::Encode(format!("no random nonce: {e}").into()))?;
    let aad = aad(task_id, field, key_id);
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plain,
                aad: &aad,
            },
        )
        .map_err(|_| Error::Encode("the value could not be sealed".into()))?;
    let mut out = String::with_capacity(key_id.len() + 1 + 2 * (NONCE_BYTES + sealed.len()));
    out.push_str(key_id);
    out.push(':');
    push_hex(&mut out, &nonce);
    push_hex(&mut out, &sealed);
    Ok(out)
}

/// One sealed value opened with the key it names.
fn open_bytes(
    ring: &SealKeyRing,
    task_id: &str,
    field: &str,
    value: &str,
) -> Result<Zeroizing<Vec<u8>>, String> {
    let (key_id, hex) = value
        .split_once(':')
        .ok_or_else(|| "it is not a sealed value".to_owned())?;
    let cipher = ring.get(key_id).ok_or_else(|| {
        format!("it was sealed with key {key_id:?}, which is not in the key ring")
    })?;
    let bytes = decode_hex(hex).ok_or_else(|| "it is not a sealed value".to_owned())?;
    if bytes.len() < NONCE_BYTES {
        return Err("it is too short to be a sealed value".into());
    }
    let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
    cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: sealed,
                aad: &aad(task_id, field, key_id),
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| {
            format!(
                "it does not authenticate under key {key_id:?} (altered, or copied from another task or field)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::InputRequest;
    use crate::store::{Era, PendingInput, TaskOutcome};
    use serde_json::json;

    fn ring() -> SealKeyRing {
        SealKeyRing::single("k1", [1; 32]).unwrap()
    }

    fn full() -> TaskRecord {
        let mut r = TaskRecord::new(
            "t1",
            Era::Modern,
            "tool",
            json!({"pin": "pin-4711"}),
            5,
            None,
        );
        r.meta = Some(JsonText::from_value(&json!({"m": "meta-secret"})));
        r.request_state = Some("state-secret".into());
        r.status_message = Some("step-secret".into());
        let request: InputRequest = serde_json::from_value(
            json!({"method": "elicitation/create", "params": {"message": "PIN?"}}),
        )
        .unwrap();
        r.input_requests.insert(
            "k".into(),
            PendingInput {
                inner_key: "k".into(),
                request,
            },
        );
        r.input_responses
            .insert("k".into(), json!({"content": {"pin": "resp-1234"}}));
        r.outcome = Some(TaskOutcome::Result(JsonText::from_value(
            &json!({"s": "result-secret"}),
        )));
        r
    }

    #[test]
    fn every_private_field_round_trips_and_none_stays_in_clear() {
        let r = full();
        let sealed = seal(&ring(), r.clone()).unwrap();
        assert_eq!(sealed.sealed.len(), 7);
        let text = serde_json::to_string(&sealed).unwrap();
        for secret in [
            "pin-4711",
            "meta-secret",
            "state-secret",
            "step-secret",
            "PIN?",
            "resp-1234",
            "result-secret",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let mut opened = sealed;
        open(&ring(), &mut opened).unwrap();
        assert_eq!(opened, r);
    }

    #[test]
    fn a_value_moved_to_another_task_or_field_does_not_open() {
        let sealed = seal(&ring(), full()).unwrap();
        let mut other = sealed.clone();
        other.id = "t2".into();
        let e = open(&ring(), &mut other).unwrap_err();
        assert!(e.why.contains("does not authenticate"), "{e:?}");
        let mut swapped = sealed.clone();
        let meta = swapped.sealed["meta"].clone();
        swapped.sealed.insert("arguments".into(), meta);
        assert_eq!(open(&ring(), &mut swapped).unwrap_err().field, "arguments");
    }
}
