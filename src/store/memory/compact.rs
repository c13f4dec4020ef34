//! [`Done`]: a finished record kept compact, and read back exactly.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::json::JsonText;
use crate::jsonrpc::JsonRpcError;
use crate::protocol::TaskStatus;
use crate::store::{
    Era, OutcomeView, PendingInput, StatusChange, TaskOutcome, TaskRecord, TaskView,
};

/// A finished record without its (cleared) resume state, kept in the
/// shard's map itself: its scalars here, and its owner, tool name, status
/// message and outcome JSON one after the other in one shared text. A read
/// of one of a million tasks then touches the map's slot and that text,
/// and nothing else. `Done::record` gives back exactly the record stored.
#[derive(Clone, Debug)]
pub(super) struct Done {
    pub(super) created_at_ms: i64,
    pub(super) updated_at_ms: i64,
    pub(super) ttl_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    pub(super) version: u64,
    round: u32,
    pub(super) era: Era,
    pub(super) status: TaskStatus,
    cancel_requested: bool,
    outcome: Kept,
    /// Byte lengths in `text` of the owner, the tool name and the status
    /// message; the outcome's JSON is the rest.
    owner_len: Option<u32>,
    tool_len: u32,
    message_len: Option<u32>,
    text: Arc<str>,
    /// Its status changes (none for most: a task that ended at once).
    history: Box<[StatusChange]>,
}

/// A finished task's input requests: none (a static, not a map made and
/// dropped on each read).
static NO_INPUTS: BTreeMap<String, PendingInput> = BTreeMap::new();

/// Which outcome the rest of a [`Done`]'s text is.
#[derive(Clone, Copy, Debug)]
enum Kept {
    Nothing,
    Result,
    Error,
}

impl Done {
    /// The compact form of `r`, if it is finished, carries no resume state
    /// and reads back exactly.
    pub(super) fn of(r: &TaskRecord) -> Option<Done> {
        let resumable = r.arguments.is_some()
            || r.meta.is_some()
            || r.request_state.is_some()
            || !r.input_requests.is_empty()
            || !r.issued_keys.is_empty()
            || !r.input_responses.is_empty()
            || r.lease.is_some()
            || r.recovery.is_some()
            || !r.sealed.is_empty();
        if !r.status.is_terminal() || resumable {
            return None;
        }
        let error_json;
        let (outcome, json) = match &r.outcome {
            None => (Kept::Nothing, ""),
            Some(TaskOutcome::Result(text)) => (Kept::Result, text.get()),
            // `data: Some(null)` would read back as `None`.
            Some(TaskOutcome::Error(e)) if e.data == Some(serde_json::Value::Null) => return None,
            Some(TaskOutcome::Error(e)) => {
                error_json = serde_json::to_string(e).ok()?;
                (Kept::Error, error_json.as_str())
            }
        };
        let owner = r.owner.as_deref();
        let message = r.status_message.as_deref();
        let len = |s: &str| u32::try_from(s.len()).ok();
        let mut text = String::with_capacity(
            owner.map_or(0, str::len)
                + r.tool_name.len()
                + message.map_or(0, str::len)
                + json.len(),
        );
        for part in [owner, Some(r.tool_name.as_str()), message, Some(json)]
            .into_iter()
            .flatten()
        {
            text.push_str(part);
        }
        Some(Done {
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
            ttl_ms: r.ttl_ms,
            poll_interval_ms: r.poll_interval_ms,
            version: r.version,
            round: r.round,
            era: r.era,
            status: r.status,
            cancel_requested: r.cancel_requested,
            outcome,
            owner_len: match owner {
                Some(o) => Some(len(o)?),
                None => None,
            },
            tool_len: len(&r.tool_name)?,
            message_len: match message {
                Some(m) => Some(len(m)?),
                None => None,
            },
            text: Arc::from(text),
            history: r.history.as_slice().into(),
        })
    }

    /// The owner, tool name, status message and outcome JSON (the latter
    /// with its offset in `text`).
    fn parts(&self) -> (Option<&str>, &str, Option<&str>, (usize, &str)) {
        let mut rest: &str = &self.text;
        // Lengths of whole strings written by `Done::of`: char boundaries.
        let mut take = |n: u32| {
            let n = (n as usize).min(rest.len());
            let (head, tail) = rest.split_at_checked(n).unwrap_or((rest, ""));
            rest = tail;
            head
        };
        let owner = self.owner_len.map(&mut take);
        let tool = take(self.tool_len);
        let message = self.message_len.map(&mut take);
        (owner, tool, message, (self.text.len() - rest.len(), rest))
    }

    pub(super) fn owner(&self) -> Option<&str> {
        self.parts().0
    }

    pub(super) fn tool(&self) -> &str {
        self.parts().1
    }

    /// A copy for a view: the history, which a view does not show, left
    /// behind.
    pub(super) fn without_history(&self) -> Done {
        Done {
            text: Arc::clone(&self.text),
            history: Box::default(),
            ..*self
        }
    }

    /// `show` called with this record's view: the same task as
    /// [`into_record`](Done::into_record)'s, with nothing rebuilt but a
    /// stored error.
    #[inline]
    pub(super) fn view<R>(&self, id: &str, show: impl FnOnce(TaskView<'_>) -> R) -> R {
        let (owner, _, message, (_, json)) = self.parts();
        let error;
        let outcome = match self.outcome {
            Kept::Nothing => None,
            Kept::Result => Some(OutcomeView::Result(json)),
            Kept::Error => {
                error = read_error(json);
                Some(OutcomeView::Error(&error))
            }
        };
        show(TaskView {
            id,
            owner,
            era: self.era,
            status: self.status,
            status_message: message,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            input_requests: &NO_INPUTS,
            outcome,
            sealed: false,
        })
    }

    /// The full record again, from a copy taken out of the shard: its
    /// history is handed over, not copied once more.
    // Inlined into a read, as it was when the store was one file (callgrind:
    // ~100 instructions more per `tasks/get` otherwise).
    #[inline]
    pub(super) fn into_record(mut self, id: &str) -> TaskRecord {
        let history = std::mem::take(&mut self.history).into_vec();
        let (owner, tool, message, (at, json)) = self.parts();
        let outcome = match self.outcome {
            Kept::Nothing => None,
            // The result's text, shared.
            Kept::Result => Some(TaskOutcome::Result(JsonText::trusted_tail(&self.text, at))),
            Kept::Error => Some(TaskOutcome::Error(read_error(json))),
        };
        TaskRecord {
            id: id.to_owned(),
            owner: owner.map(str::to_owned),
            era: self.era,
            status: self.status,
            status_message: message.map(str::to_owned),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            version: self.version,
            tool_name: tool.to_owned(),
            arguments: None,
            meta: None,
            request_state: None,
            round: self.round,
            input_requests: Default::default(),
            issued_keys: Default::default(),
            input_responses: Default::default(),
            outcome,
            cancel_requested: self.cancel_requested,
            lease: None,
            recovery: None,
            history,
            sealed: Default::default(),
        }
    }
}

/// A stored error read back.
fn read_error(json: &str) -> JsonRpcError {
    serde_json::from_str(json).unwrap_or_else(|e| {
        // Written by `Done::of` from a value of this very type.
        JsonRpcError::internal(format!("the stored error cannot be read back: {e}"))
    })
}
