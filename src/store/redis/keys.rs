//! Key names of one prefix, and the list index's sortable members.

use crate::protocol::TaskStatus;
use crate::store::{Era, TaskRecord};

/// Every status, in the order `stats` asks for their counts. Each task is
/// in the index of one of them: together they index every task.
pub(super) const STATUSES: [TaskStatus; 5] = [
    TaskStatus::Working,
    TaskStatus::InputRequired,
    TaskStatus::Completed,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

/// The keys of one store (one prefix).
#[derive(Debug)]
pub(super) struct Keys {
    pub(super) prefix: String,
    /// `<prefix>:task:{` — a task's hash is this, its id, then `}`.
    pub(super) task_head: String,
    /// ZSET of expiring task ids by `expires_at_ms`.
    pub(super) expiry: String,
    /// ZSET of `working` task ids by lease end (`lease.until_ms`).
    pub(super) leases: String,
    /// The pub/sub channel of the change feed.
    pub(super) channel: String,
    /// ZSET of the list members (score 0) of the tasks stored by versions
    /// that indexed every task here (the status indexes do now): read to
    /// fill the tool indexes, emptied by deletes.
    pub(super) all: String,
    /// `<prefix>:ops:st:` — with a status appended, the ZSET of the list
    /// members of the tasks in that status.
    pub(super) status_head: String,
    /// ZSET of ended task ids by the time they ended (`updated_at_ms`).
    pub(super) ended: String,
    /// `<prefix>:ops:tool:` — with a tool name appended, the ZSET of the
    /// list members of that tool's tasks.
    pub(super) tool_head: String,
    /// Set once every task stored before the tool indexes existed is in
    /// its tool's index (`RedisStore::connect` fills them).
    pub(super) tools_indexed: String,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_owned(),
            task_head: format!("{prefix}:task:{{"),
            expiry: format!("{prefix}:expiry"),
            leases: format!("{prefix}:leases"),
            channel: format!("{prefix}:changes"),
            all: format!("{prefix}:ops:all"),
            status_head: format!("{prefix}:ops:st:"),
            ended: format!("{prefix}:ops:ended"),
            tool_head: format!("{prefix}:ops:tool:"),
            tools_indexed: format!("{prefix}:ops:tools-indexed"),
        }
    }

    /// The operator's index of the tasks in `status`.
    pub(super) fn status(&self, status: TaskStatus) -> String {
        format!("{}{}", self.status_head, status.as_str())
    }

    /// The operator's index of the tasks of tool `name`.
    pub(super) fn tool(&self, name: &str) -> String {
        format!("{}{name}", self.tool_head)
    }

    /// The hash of task `id`. The id is the key's hash tag, so a task's key
    /// has a slot of its own choosing on Redis Cluster.
    pub(super) fn task(&self, id: &str) -> String {
        format!("{}{id}}}", self.task_head)
    }

    /// The listing index of one owner (or of tasks without one) and era.
    /// `=` before an owner keeps every owner apart from `-`, the ownerless.
    pub(super) fn list(&self, owner: Option<&str>, era: Era) -> String {
        let era = match era {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        };
        match owner {
            Some(owner) => format!("{}:list:{era}:={owner}", self.prefix),
            None => format!("{}:list:{era}:-", self.prefix),
        }
    }
}

/// A list member (the list script reads the id from its 22nd byte on):
/// `created_at_ms` as 20 digits that sort as the number
/// does (the sign bit flipped), `:`, the id. Members of one index all have
/// score 0, so Redis orders them byte by byte: by creation time, then id,
/// as the SQL stores' `(created_at_ms, id)`.
pub(super) fn member(created_at_ms: i64, id: &str) -> String {
    let sortable = u64::from_ne_bytes(created_at_ms.to_ne_bytes()) ^ (1 << 63);
    format!("{sortable:020}:{id}")
}

/// The `(created_at_ms, id)` a list member was made of, if it is one.
pub(super) fn unmember(member: &str) -> Option<(i64, &str)> {
    let (sortable, id) = (member.get(..20)?, member.get(21..)?);
    let sortable: u64 = sortable.parse().ok()?;
    Some((i64::from_ne_bytes((sortable ^ (1 << 63)).to_ne_bytes()), id))
}

/// The member of a record's list index.
pub(super) fn member_of(record: &TaskRecord) -> String {
    member(record.created_at_ms, &record.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_sort_as_created_then_id() {
        // The list script reads the id from the 22nd byte on.
        let ordered = [
            member(i64::MIN, "a"),
            member(-1, "z"),
            member(0, "a"),
            member(0, "b"),
            member(1_767_225_600_000, "a"),
            member(i64::MAX, "a"),
        ];
        let mut sorted = ordered.clone();
        sorted.sort();
        assert_eq!(sorted, ordered);
        assert!(ordered
            .iter()
            .all(|m| m.as_bytes()[20] == b':' && m.len() == 22));
        for (created, id) in [(i64::MIN, "a"), (-1, "z:y"), (0, ""), (i64::MAX, "é")] {
            assert_eq!(unmember(&member(created, id)), Some((created, id)));
        }
        assert_eq!(unmember("12:a"), None);
        assert_eq!(unmember("0000000000000000000x:a"), None);
    }

    #[test]
    fn owners_and_eras_list_apart() {
        let k = Keys::new("p");
        assert_ne!(k.list(None, Era::Modern), k.list(Some("-"), Era::Modern));
        assert_ne!(
            k.list(Some("a"), Era::Modern),
            k.list(Some("a"), Era::Legacy)
        );
        assert_eq!(k.task("x"), "p:task:{x}");
    }
}
