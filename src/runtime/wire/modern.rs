//! The 2026-07-28 wire form of a task: `DetailedTask`, written field by
//! field with the stored result text copied in as it is.

use serde_json::Value;

use super::timestamp::{rfc3339_digits, write_rfc3339, write_stamp};

/// What comes before a task's creation stamp's digits.
const CREATED: &[u8; 14] = b",\"createdAt\":\"";
/// What comes between the two stamps' digits.
const UPDATED: &[u8; 19] = b"\",\"lastUpdatedAt\":\"";
/// Both stamps with their names: `,"createdAt":"…","lastUpdatedAt":"…"`.
const STAMPS: usize = CREATED.len() + 24 + UPDATED.len() + 24 + 1;

/// `,"createdAt":"…","lastUpdatedAt":"…"`: both stamps written into one
/// buffer and checked as UTF-8 once (safe code checks every `&str` made
/// of bytes; two short checks cost more than one long one).
fn write_stamps(out: &mut String, created_ms: i64, updated_ms: i64) {
    let created = rfc3339_digits(created_ms);
    // A task unchanged since it was made: formatted once.
    let updated = if updated_ms == created_ms {
        created
    } else {
        rfc3339_digits(updated_ms)
    };
    if let (Some(c), Some(u)) = (&created, &updated) {
        let mut buf = [b'"'; STAMPS];
        let parts: [&[u8]; 4] = [CREATED, c, UPDATED, u];
        let mut at = 0;
        for part in parts {
            if let Some(slot) = buf.get_mut(at..at + part.len()) {
                slot.copy_from_slice(part);
            }
            at += part.len();
        }
        if let Ok(text) = std::str::from_utf8(&buf) {
            out.push_str(text);
            return;
        }
    }
    out.push_str(",\"createdAt\":");
    write_stamp(out, created_ms, created.as_ref());
    out.push_str(",\"lastUpdatedAt\":");
    if updated_ms == created_ms {
        write_stamp(out, created_ms, created.as_ref());
    } else {
        write_rfc3339(out, updated_ms);
    }
}
use crate::json::{write_json_str, write_u64};
use crate::jsonrpc::JsonRpcError;
use crate::protocol::TaskStatus;
use crate::store::{OutcomeView, TaskRecord, TaskView};

/// The 2026-07-28 body of a record (`DetailedTask`), with `resultType`
/// when given, written field by field: the stored result text is copied in
/// as it is. The same JSON as serializing [`detailed`] (a test
/// holds them together).
pub(crate) fn detailed_json(r: &TaskRecord, result_type: Option<&str>) -> String {
    detailed_json_of(&r.view(), result_type)
}

/// [`detailed_json`] of a view.
pub(crate) fn detailed_json_of(r: &TaskView<'_>, result_type: Option<&str>) -> String {
    let mut out = String::with_capacity(detailed_capacity(r));
    write_detailed(&mut out, r, result_type);
    out
}

/// Room for [`write_detailed`]'s text of `r`, for everything but input
/// requests and errors: one allocation.
pub(crate) fn detailed_capacity(r: &TaskView<'_>) -> usize {
    256 + match r.outcome {
        Some(OutcomeView::Result(text)) => text.len(),
        _ => 0,
    } + r.id.len()
        + r.status_message.map_or(0, str::len)
}

/// [`detailed_json_of`], appended to `out`.
pub(crate) fn write_detailed(out: &mut String, r: &TaskView<'_>, result_type: Option<&str>) {
    out.push('{');
    match result_type {
        // The common ones, quoted already.
        Some("complete") => out.push_str("\"resultType\":\"complete\","),
        Some("task") => out.push_str("\"resultType\":\"task\","),
        Some(rt) => {
            out.push_str("\"resultType\":");
            write_json_str(out, rt);
            out.push(',');
        }
        None => {}
    }
    out.push_str("\"taskId\":");
    write_json_str(out, r.id);
    out.push_str(",\"status\":");
    out.push_str(quoted_status(r.status));
    if let Some(msg) = r.status_message {
        out.push_str(",\"statusMessage\":");
        write_json_str(out, msg);
    }
    write_stamps(out, r.created_at_ms, r.updated_at_ms);
    out.push_str(",\"ttlMs\":");
    match r.ttl_ms {
        Some(ttl) => write_u64(out, ttl),
        None => out.push_str("null"),
    }
    if let Some(p) = r.poll_interval_ms {
        out.push_str(",\"pollIntervalMs\":");
        write_u64(out, p);
    }
    match (r.status, r.outcome) {
        (TaskStatus::InputRequired, _) => {
            out.push_str(",\"inputRequests\":{");
            for (i, (key, pending)) in r.input_requests.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_str(out, key);
                out.push(':');
                // Strings and JSON values only: cannot fail.
                out.push_str(&serde_json::to_string(&pending.request).unwrap_or_default());
            }
            out.push('}');
        }
        (TaskStatus::Completed, Some(OutcomeView::Result(result))) => {
            out.push_str(",\"result\":");
            out.push_str(result);
        }
        (TaskStatus::Completed, _) => out.push_str(",\"result\":{}"),
        (TaskStatus::Failed, outcome) => {
            let fallback;
            let error = match outcome {
                Some(OutcomeView::Error(e)) => e,
                _ => {
                    fallback = JsonRpcError::internal("the task failed");
                    &fallback
                }
            };
            out.push_str(",\"error\":");
            out.push_str(&serde_json::to_string(error).unwrap_or_default());
        }
        _ => {}
    }
    out.push('}');
}

/// `status.as_str()` as a JSON string (none needs escaping).
fn quoted_status(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "\"working\"",
        TaskStatus::InputRequired => "\"input_required\"",
        TaskStatus::Completed => "\"completed\"",
        TaskStatus::Failed => "\"failed\"",
        TaskStatus::Cancelled => "\"cancelled\"",
    }
}

/// The 2026-07-28 body of a record as a value, with `resultType` when
/// given: [`detailed_json`] parsed.
pub(crate) fn detailed_value(r: &TaskRecord, result_type: Option<&str>) -> Value {
    serde_json::from_str(&detailed_json(r, result_type)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map};

    use super::*;
    use crate::json::JsonText;
    use crate::protocol::{DetailedTask, InputRequest};
    use crate::store::{Era, PendingInput, TaskOutcome};

    #[test]
    fn quoted_statuses_are_the_names_quoted() {
        use crate::protocol::TaskStatus::*;
        for status in [Working, InputRequired, Completed, Failed, Cancelled] {
            let mut quoted = String::new();
            write_json_str(&mut quoted, status.as_str());
            assert_eq!(quoted_status(status), quoted);
        }
    }

    /// The 2026-07-28 view of a record, as the typed model.
    fn detailed(r: &TaskRecord) -> DetailedTask {
        let metadata = super::super::metadata_of(&r.view());
        match r.status {
            TaskStatus::Working => DetailedTask::working(metadata),
            TaskStatus::InputRequired => DetailedTask::input_required(
                metadata,
                r.input_requests
                    .iter()
                    .map(|(k, p)| (k.clone(), p.request.clone()))
                    .collect(),
            ),
            TaskStatus::Completed => match &r.outcome {
                Some(TaskOutcome::Result(result)) => {
                    DetailedTask::completed(metadata, result.to_object())
                }
                _ => DetailedTask::completed(metadata, Map::new()),
            },
            TaskStatus::Failed => match &r.outcome {
                Some(TaskOutcome::Error(e)) => DetailedTask::failed(metadata, e.clone()),
                _ => DetailedTask::failed(metadata, JsonRpcError::internal("the task failed")),
            },
            TaskStatus::Cancelled => DetailedTask::cancelled(metadata),
        }
    }

    #[test]
    fn the_hand_built_body_is_the_typed_one() {
        let mut r = TaskRecord::new(
            "t1",
            Era::Modern,
            "tool",
            json!({}),
            1_767_225_600_123,
            Some(60_000),
        );
        r.poll_interval_ms = Some(500);
        let mut cases = Vec::new();
        cases.push(r.clone());
        let mut ir = r.clone();
        ir.status = TaskStatus::InputRequired;
        ir.status_message = Some("waiting".into());
        ir.input_requests.insert(
            "k".into(),
            PendingInput {
                inner_key: "k".into(),
                request: InputRequest::new(
                    "elicitation/create",
                    json!({"message": "?"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
            },
        );
        cases.push(ir);
        let mut done = r.clone();
        done.status = TaskStatus::Completed;
        done.outcome = Some(TaskOutcome::Result(JsonText::from_value(
            &json!({"content": [{"type": "text", "text": "a \"q\" \u{7}"}], "isError": true}),
        )));
        cases.push(done);
        let mut failed = r.clone();
        failed.status = TaskStatus::Failed;
        failed.outcome = Some(TaskOutcome::Error(
            JsonRpcError::new(-32050, "x").with_data(json!({"a": 1})),
        ));
        cases.push(failed);
        let mut cancelled = r.clone();
        cancelled.status = TaskStatus::Cancelled;
        cancelled.ttl_ms = None;
        cases.push(cancelled);
        // Timestamps: changed since creation, and (equal or not) beyond the
        // digit-by-digit years.
        let mut changed = r.clone();
        changed.updated_at_ms += 1_234;
        let mut far = r.clone();
        far.created_at_ms = 253_402_300_800_000; // year 10000
        far.updated_at_ms = far.created_at_ms;
        let mut farther = far.clone();
        farther.updated_at_ms += 1;
        // One stamp written from its digits, the other by `time`.
        let mut mixed = r.clone();
        mixed.updated_at_ms = far.created_at_ms;
        cases.extend([changed, far, farther, mixed]);
        for r in cases {
            let typed = serde_json::to_value(detailed(&r)).unwrap_or_default();
            assert_eq!(detailed_value(&r, None), typed, "{:?}", r.status);
        }
    }
}
