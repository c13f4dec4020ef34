//! The in-memory store: sharded, with an expiry index and an owner index.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

use super::{BoxFuture, Era, Error, Result, TaskOutcome, TaskRecord, TaskStore};
use crate::json::JsonText;
use crate::jsonrpc::JsonRpcError;
use crate::protocol::TaskStatus;

const SHARDS: usize = 64;
/// Expired records removed per write lock of a shard while reaping.
const REAP_PER_LOCK: usize = 64;

/// A shard's task map is shrunk after reaping only above this capacity.
const SHRINK_ABOVE: usize = 1024;

/// The default store: tasks in this process's memory.
///
/// Records live in 64 shards, each behind its own lock, so reads on two cores
/// rarely meet; a read is one hash, one shared lock and one `Arc` clone
/// whatever the number of live tasks. Each shard keeps its records ordered by
/// expiry, so [`delete_expired`](TaskStore::delete_expired) touches only the
/// expired ones, holding one shard's lock at a time for at most 64 of them. An owner index makes
/// [`list`](TaskStore::list) proportional to the page, not to the store.
///
/// A task id is stored once and shared by the shard's map and both indexes;
/// index lookups compare its first 16 bytes inline. A finished task (one
/// whose resume state the layer has cleared) is kept compact, its outcome as
/// JSON text: about a quarter of the memory of the full record. Reading it
/// rebuilds the record, which costs about a microsecond more than reading a
/// running task.
///
/// [`create_shared`](TaskStore::create_shared) and
/// [`replace_shared`](TaskStore::replace_shared) keep the caller's `Arc`
/// itself for a running task (no copy).
///
/// Cloning a `MemoryStore` shares the same tasks.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shards: Box<[RwLock<Shard>]>,
    owners: Box<[RwLock<OwnerIndex>]>,
    hasher: Hasher64,
}

/// Owner key → `(created_at_ms, id)` of each of its records.
type OwnerIndex = HashMap<Option<String>, BTreeSet<(i64, Id)>>;

/// Task ids are the layer's 128 random bits, never the client's choice, so
/// a fast seeded hash will do (SipHash cost ~200 instructions per id, and a
/// task's life hashes its id half a dozen times).
type Hasher64 = foldhash::fast::RandomState;

#[derive(Debug, Default)]
struct Shard {
    tasks: HashMap<Id, Slot, Hasher64>,
    /// `(expires_at_ms, id)` for every record with a TTL.
    expiry: BTreeSet<(i64, Id)>,
}

/// A short string kept inline: a task id (the layer's are 32 bytes), a tool
/// or owner name. Longer ones are allocated once and shared by every copy.
///
/// Reading one inline touches no other memory: with a million tasks, every
/// pointer a read follows is a likely cache miss, and a shard's map compares
/// the id it finds with the one asked for. Ids hash, compare and order by
/// their bytes (UTF-8 orders like the strings), so that none of this
/// re-validates the text; a lookup builds an `Id` of the id asked for (on
/// the stack, for ids up to 32 bytes).
#[derive(Clone)]
enum Id {
    Inline(u8, [u8; INLINE]),
    Shared(Arc<str>),
}

const INLINE: usize = 32;

impl Id {
    fn new(id: &str) -> Self {
        match u8::try_from(id.len()) {
            Ok(len) if id.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..id.len()].copy_from_slice(id.as_bytes());
                Id::Inline(len, bytes)
            }
            _ => Id::Shared(Arc::from(id)),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Id::Inline(len, bytes) => &bytes[..usize::from(*len)],
            Id::Shared(s) => s.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Copied from a `&str` whole: the prefix is always UTF-8.
            Id::Inline(..) => std::str::from_utf8(self.bytes()).unwrap_or(""),
            Id::Shared(s) => s,
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Id {}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        self.bytes().cmp(other.bytes())
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A stored record: as the layer wrote it, or compact once finished.
#[derive(Debug)]
enum Slot {
    Full(Arc<TaskRecord>),
    Done(Done),
}

/// A finished record without its (cleared) resume state, kept in the
/// shard's map itself: its scalars here, and its owner, tool name, status
/// message and outcome JSON one after the other in one shared text. A read
/// of one of a million tasks then touches the map's slot and that text,
/// and nothing else. `Done::record` gives back exactly the record stored.
#[derive(Clone, Debug)]
struct Done {
    created_at_ms: i64,
    updated_at_ms: i64,
    ttl_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    version: u64,
    round: u32,
    era: Era,
    status: TaskStatus,
    cancel_requested: bool,
    outcome: Kept,
    /// Byte lengths in `text` of the owner, the tool name and the status
    /// message; the outcome's JSON is the rest.
    owner_len: Option<u32>,
    tool_len: u32,
    message_len: Option<u32>,
    text: Arc<str>,
}

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
    fn of(r: &TaskRecord) -> Option<Done> {
        let resumable = r.arguments.is_some()
            || r.meta.is_some()
            || r.request_state.is_some()
            || !r.input_requests.is_empty()
            || !r.issued_keys.is_empty()
            || !r.input_responses.is_empty()
            || r.lease.is_some();
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

    fn owner(&self) -> Option<&str> {
        self.parts().0
    }

    /// The full record again.
    fn record(&self, id: &str) -> TaskRecord {
        let (owner, tool, message, (at, json)) = self.parts();
        let outcome = match self.outcome {
            Kept::Nothing => None,
            // The result's text, shared.
            Kept::Result => Some(TaskOutcome::Result(JsonText::trusted_tail(&self.text, at))),
            Kept::Error => Some(TaskOutcome::Error(
                serde_json::from_str(json).unwrap_or_else(|e| {
                    // Written by `Done::of` from a value of this very type.
                    JsonRpcError::internal(format!("the stored error cannot be read back: {e}"))
                }),
            )),
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
        }
    }
}

impl Slot {
    fn new(record: Arc<TaskRecord>) -> Self {
        match Done::of(&record) {
            Some(done) => Slot::Done(done),
            None => Slot::Full(record),
        }
    }

    fn version(&self) -> u64 {
        match self {
            Slot::Full(r) => r.version,
            Slot::Done(d) => d.version,
        }
    }

    fn created_at_ms(&self) -> i64 {
        match self {
            Slot::Full(r) => r.created_at_ms,
            Slot::Done(d) => d.created_at_ms,
        }
    }

    fn owner(&self) -> Option<&str> {
        match self {
            Slot::Full(r) => r.owner.as_deref(),
            Slot::Done(d) => d.owner(),
        }
    }

    fn expires_at_ms(&self) -> Option<i64> {
        let (created, ttl) = match self {
            Slot::Full(r) => (r.created_at_ms, r.ttl_ms),
            Slot::Done(d) => (d.created_at_ms, d.ttl_ms),
        };
        ttl.map(|ttl| created.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
    }

    fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms().is_some_and(|at| at <= now_ms)
    }

    /// What a read hands out; rebuilt outside the shard lock for a compact
    /// record.
    fn share(&self) -> Shared {
        match self {
            Slot::Full(r) => Shared::Full(Arc::clone(r)),
            Slot::Done(d) => Shared::Done(d.clone()),
        }
    }
}

/// A record taken out of a shard under its lock.
enum Shared {
    Full(Arc<TaskRecord>),
    Done(Done),
}

impl Shared {
    fn into_record(self, id: &str) -> Arc<TaskRecord> {
        match self {
            Shared::Full(r) => r,
            Shared::Done(d) => Arc::new(d.record(id)),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
                owners: (0..SHARDS).map(|_| RwLock::default()).collect(),
                hasher: Hasher64::default(),
            }),
        }
    }

    /// Number of records held, expired ones not yet reaped included.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| read(s).tasks.len()).sum()
    }

    /// Whether the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, id: &Id) -> &RwLock<Shard> {
        let h = self.inner.hasher.hash_one(id) as usize;
        &self.inner.shards[h % SHARDS]
    }

    fn owner_shard_index(&self, owner: Option<&str>) -> usize {
        self.inner.hasher.hash_one(owner) as usize % SHARDS
    }

    fn owner_shard(&self, owner: Option<&str>) -> &RwLock<OwnerIndex> {
        &self.inner.owners[self.owner_shard_index(owner)]
    }

    fn create_now(&self, record: Arc<TaskRecord>) -> Result<()> {
        let owner = record.owner.clone();
        let created = record.created_at_ms;
        let expires = record.expires_at_ms();
        // Allocate outside the lock.
        let id = Id::new(&record.id);
        let lock = self.shard(&id);
        let slot = Slot::new(record);
        {
            let mut guard = write(lock);
            let shard = &mut *guard;
            match shard.tasks.entry(id.clone()) {
                Entry::Occupied(_) => return Err(Error::AlreadyExists),
                Entry::Vacant(v) => v.insert(slot),
            };
            if let Some(at) = expires {
                shard.expiry.insert((at, id.clone()));
            }
        }
        write(self.owner_shard(owner.as_deref()))
            .entry(owner)
            .or_default()
            .insert((created, id));
        Ok(())
    }

    fn replace_now(&self, record: Arc<TaskRecord>, expected_version: u64) -> Result<()> {
        let new_exp = record.expires_at_ms();
        let id = Id::new(&record.id);
        let lock = self.shard(&id);
        // Compact a finished record before taking the lock.
        let new = match Done::of(&record) {
            Some(done) => Slot::Done(done),
            None => Slot::Full(record),
        };
        let old = {
            let mut guard = write(lock);
            let Shard { tasks, expiry } = &mut *guard;
            let slot = match tasks.get_mut(&id) {
                None => return Err(Error::NotFound),
                Some(slot) if slot.version() != expected_version => return Err(Error::Conflict),
                Some(slot) => slot,
            };
            let old_exp = slot.expires_at_ms();
            if old_exp != new_exp {
                if let Some(at) = old_exp {
                    expiry.remove(&(at, id.clone()));
                }
                if let Some(at) = new_exp {
                    expiry.insert((at, id));
                }
            }
            std::mem::replace(slot, new)
        };
        // Free the old version outside the lock.
        drop(old);
        Ok(())
    }

    fn delete_expired_now(&self, now_ms: i64, limit: usize) -> Vec<String> {
        let mut gone: Vec<(usize, Option<String>, i64, Id)> = Vec::new();
        // Freed after the shard locks are released.
        let mut freed: Vec<Slot> = Vec::new();
        for lock in self.inner.shards.iter() {
            loop {
                if gone.len() >= limit {
                    break;
                }
                // Cheap check under the shared lock first: most shards have
                // nothing to reap most of the time.
                let due = read(lock)
                    .expiry
                    .first()
                    .is_some_and(|(at, _)| *at <= now_ms);
                if !due {
                    break;
                }
                // A bounded batch per write lock, so that reads of this shard
                // wait for a few records' worth of work, never for a sweep.
                let mut shard = write(lock);
                let mut taken = 0;
                while gone.len() < limit && taken < REAP_PER_LOCK {
                    match shard.expiry.first() {
                        Some((at, _)) if *at <= now_ms => {}
                        _ => break,
                    }
                    let Some((_, id)) = shard.expiry.pop_first() else {
                        break;
                    };
                    taken += 1;
                    if let Some(slot) = shard.tasks.remove(&id) {
                        let owner = slot.owner().map(str::to_owned);
                        let index = self.owner_shard_index(owner.as_deref());
                        gone.push((index, owner, slot.created_at_ms(), id));
                        freed.push(slot);
                    }
                }
                // Give back the table a burst of tasks grew once most of it
                // has expired: a map keeps its peak capacity otherwise. The
                // rehash touches the remaining quarter, and happens only
                // after three quarters were reaped, so it costs O(reaped).
                let (len, capacity) = (shard.tasks.len(), shard.tasks.capacity());
                if capacity > SHRINK_ABOVE && len < capacity / 4 {
                    shard.tasks.shrink_to(len * 2);
                }
                drop(shard);
                // Free the records outside the lock.
                freed.clear();
                if taken < REAP_PER_LOCK {
                    break;
                }
            }
        }
        // One lock per owner shard touched, not one per record.
        gone.sort_unstable_by_key(|g| g.0);
        for batch in gone.chunk_by(|a, b| a.0 == b.0) {
            let mut owners = write(&self.inner.owners[batch[0].0]);
            for (_, owner, created, id) in batch {
                if let Some(set) = owners.get_mut(owner) {
                    set.remove(&(*created, id.clone()));
                    if set.is_empty() {
                        owners.remove(owner);
                    }
                }
            }
        }
        gone.into_iter()
            .map(|(_, _, _, id)| id.as_str().to_owned())
            .collect()
    }

    fn get_now(&self, id: &str, now_ms: i64) -> Option<Arc<TaskRecord>> {
        let key = Id::new(id);
        let found = read(self.shard(&key))
            .tasks
            .get(&key)
            .filter(|slot| !slot.is_expired(now_ms))
            .map(Slot::share)?;
        Some(found.into_record(id))
    }

    fn list_now(
        &self,
        owner: Option<&str>,
        after: Option<(i64, &str)>,
        limit: usize,
        now_ms: i64,
    ) -> Vec<Arc<TaskRecord>> {
        let key = owner.map(str::to_owned);
        let ids: Vec<Id> = {
            let owners = read(self.owner_shard(owner));
            let Some(set) = owners.get(&key) else {
                return Vec::new();
            };
            let upper = after.map(|(c, id)| (c, Id::new(id)));
            // Newest first: walk the (created, id) set backwards from `after`.
            let iter: Box<dyn Iterator<Item = &(i64, Id)>> = match &upper {
                Some(bound) => Box::new(set.range(..bound.clone()).rev()),
                None => Box::new(set.iter().rev()),
            };
            // Take a little more than a page: some may have just expired.
            iter.take(limit.saturating_mul(2).max(limit + 8))
                .map(|(_, id)| id.clone())
                .collect()
        };
        let mut out = Vec::with_capacity(limit.min(ids.len()));
        for id in ids {
            if out.len() == limit {
                break;
            }
            if let Some(r) = self.get_now(id.as_str(), now_ms) {
                out.push(r);
            }
        }
        out
    }
}

impl TaskStore for MemoryStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(self.create_now(Arc::new(record))))
    }

    fn create_shared(&self, record: Arc<TaskRecord>) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(self.create_now(record)))
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        Box::pin(std::future::ready(Ok(self.get_now(id, now_ms))))
    }

    fn get_ready(&self, id: &str, now_ms: i64) -> Option<Result<Option<Arc<TaskRecord>>>> {
        Some(Ok(self.get_now(id, now_ms)))
    }

    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(
            self.replace_now(Arc::new(record), expected_version),
        ))
    }

    fn replace_shared(
        &self,
        record: Arc<TaskRecord>,
        expected_version: u64,
    ) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(
            self.replace_now(record, expected_version),
        ))
    }

    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(std::future::ready(Ok(
            self.delete_expired_now(now_ms, limit)
        )))
    }

    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        after: Option<(i64, &'a str)>,
        limit: usize,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(std::future::ready(Ok(
            self.list_now(owner, after, limit, now_ms)
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::store::conformance;

    fn finished(id: &str, outcome: Option<TaskOutcome>) -> TaskRecord {
        let mut r = TaskRecord::new(id, Era::Modern, "tool", Value::Null, 1_000, Some(60_000))
            .with_owner(Some("alice".into()));
        r.status = TaskStatus::Completed;
        r.status_message = Some("done".into());
        r.poll_interval_ms = Some(250);
        r.version = 3;
        r.round = 2;
        r.cancel_requested = true;
        r.outcome = outcome;
        r
    }

    #[tokio::test]
    async fn passes_the_conformance_suite() {
        conformance::run(|| async { MemoryStore::new() }).await;
    }

    #[tokio::test]
    async fn shared_writes_keep_the_callers_record_and_compare_versions() {
        let store = MemoryStore::new();
        let first = Arc::new(TaskRecord::new(
            "s",
            Era::Modern,
            "t",
            json!({"a": 1}),
            1,
            None,
        ));
        store.create_shared(Arc::clone(&first)).await.unwrap();
        assert!(matches!(
            store.create_shared(Arc::clone(&first)).await,
            Err(Error::AlreadyExists)
        ));
        let got = store.get("s", 2).await.unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&got, &first),
            "a running task is kept, not copied"
        );
        let next = Arc::new(first.next_version(5));
        assert!(matches!(
            store.replace_shared(Arc::clone(&next), 7).await,
            Err(Error::Conflict)
        ));
        store.replace_shared(Arc::clone(&next), 1).await.unwrap();
        assert_eq!(*store.get("s", 6).await.unwrap().unwrap(), *next);
        let mut other = (*next).clone();
        other.id = "absent".into();
        assert!(matches!(
            store.replace_shared(Arc::new(other), 2).await,
            Err(Error::NotFound)
        ));
    }

    #[tokio::test]
    async fn finished_records_are_compact_and_read_back_exactly() {
        let result = json!({
            "content": [{"type": "text", "text": "hé \u{1F600}"}],
            "n": -1, "u": u64::MAX, "f": 0.1, "z": -0.0, "big": 1e300, "null": null,
            "nested": {"a": [true, false, {}], "b": ""}
        });
        let outcomes = [
            Some(TaskOutcome::Result(JsonText::from_value(&result))),
            Some(TaskOutcome::Error(
                JsonRpcError::new(-32050, "boom").with_data(json!({"x": [1, 2.5]})),
            )),
            Some(TaskOutcome::Error(JsonRpcError::new(-32603, "no data"))),
            None,
        ];
        let store = MemoryStore::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let id = format!("task-{i}");
            let mut done = finished(&id, outcome);
            done.version = 2;
            // Texts of every length, multi-byte ones, and absent ones.
            match i {
                1 => done.owner = None,
                2 => done.status_message = None,
                3 => {
                    done.owner = Some("ü".repeat(40));
                    done.tool_name = String::new();
                    done.status_message = Some("é\u{1F600}".into());
                }
                _ => {}
            }
            let mut working = done.clone();
            working.status = TaskStatus::Working;
            working.outcome = None;
            working.version = 1;
            store.create(working).await.unwrap();
            store.replace(done.clone(), 1).await.unwrap();
            {
                let shard = read(store.shard(&Id::new(&id)));
                assert!(matches!(
                    shard.tasks.get(&Id::new(&id)),
                    Some(Slot::Done(_))
                ));
            }
            let got = store.get(&id, 1_000).await.unwrap().unwrap();
            assert_eq!(*got, done);
            let listed = store
                .list(done.owner.as_deref(), None, 10, 1_000)
                .await
                .unwrap();
            assert!(listed.iter().any(|r| **r == done));
        }
    }

    #[tokio::test]
    async fn records_that_cannot_be_compacted_stay_whole() {
        let store = MemoryStore::new();
        // Resume state left in place, or an error whose `data` is `null`
        // (its JSON would read back without `data`).
        let mut kept = finished("args", None);
        kept.arguments = Some(JsonText::from_value(&json!({"a": 1})));
        kept.version = 1;
        let mut null_data = finished(
            "null-data",
            Some(TaskOutcome::Error(
                JsonRpcError::new(1, "x").with_data(Value::Null),
            )),
        );
        null_data.version = 1;
        for r in [kept, null_data] {
            store.create(r.clone()).await.unwrap();
            assert!(matches!(
                read(store.shard(&Id::new(&r.id)))
                    .tasks
                    .get(&Id::new(&r.id)),
                Some(Slot::Full(_))
            ));
            assert_eq!(*store.get(&r.id, 1_000).await.unwrap().unwrap(), r);
        }
    }

    #[test]
    fn ids_order_like_their_strings() {
        let ids = [
            "",
            "a",
            "a\0",
            "a\0b",
            "ab",
            "abcdefghijklmnop",
            "abcdefghijklmnop\0",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "abcdefghijklmnoq",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef\0",
            "0123456789abcdef0123456789abcdefg",
            "0123456789abcdef0123456789abcdeg",
            "b",
            "é",
            "zz",
        ];
        for x in ids {
            for y in ids {
                assert_eq!(Id::new(x).cmp(&Id::new(y)), x.cmp(y), "{x:?} vs {y:?}");
                assert_eq!(Id::new(x) == Id::new(y), x == y);
                assert_eq!(Id::new(x).as_str(), x);
            }
        }
    }

    #[tokio::test]
    async fn reaping_expired_compact_records_cleans_every_index() {
        let store = MemoryStore::new();
        for i in 0..100 {
            let mut r = finished(&format!("t{i}"), None);
            r.ttl_ms = Some(if i % 2 == 0 { 10 } else { 60_000 });
            store.create(r).await.unwrap();
        }
        let mut gone = store.delete_expired(1_010, 7).await.unwrap();
        gone.extend(store.delete_expired(1_010, 1_000).await.unwrap());
        assert_eq!(gone.len(), 50);
        assert_eq!(store.len(), 50);
        let listed = store.list(Some("alice"), None, 1_000, 1_010).await.unwrap();
        assert_eq!(listed.len(), 50);
        let total: usize = store
            .inner
            .shards
            .iter()
            .map(|s| read(s).expiry.len())
            .sum();
        assert_eq!(total, 50);
    }

    #[tokio::test]
    async fn reaping_takes_every_expired_record_in_bounded_batches() {
        // About 150 per shard: more than one batch per lock.
        let store = MemoryStore::new();
        for i in 0..10_000 {
            let r = TaskRecord::new(format!("x{i}"), Era::Modern, "t", Value::Null, 0, Some(1));
            store.create(r).await.unwrap();
        }
        store
            .create(TaskRecord::new(
                "alive",
                Era::Modern,
                "t",
                Value::Null,
                0,
                None,
            ))
            .await
            .unwrap();
        assert_eq!(store.delete_expired(5, 9_000).await.unwrap().len(), 9_000);
        assert_eq!(
            store.delete_expired(5, usize::MAX).await.unwrap().len(),
            1_000
        );
        assert_eq!(store.len(), 1);
        assert_eq!(store.list(None, None, 10, 5).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn reaping_most_of_a_burst_gives_the_maps_memory_back() {
        let capacity = |store: &MemoryStore| -> usize {
            store
                .inner
                .shards
                .iter()
                .map(|s| read(s).tasks.capacity())
                .sum()
        };
        let store = MemoryStore::new();
        for i in 0..200_000 {
            let r = TaskRecord::new(format!("b{i}"), Era::Modern, "t", Value::Null, 0, Some(1));
            store.create(r).await.unwrap();
        }
        for i in 0..1_000 {
            let r = TaskRecord::new(format!("k{i}"), Era::Modern, "t", Value::Null, 0, None);
            store.create(r).await.unwrap();
        }
        let peak = capacity(&store);
        assert!(peak >= 201_000);
        store.delete_expired(5, usize::MAX).await.unwrap();
        assert_eq!(store.len(), 1_000);
        let after = capacity(&store);
        assert!(
            after <= SHARDS * SHRINK_ABOVE && after * 3 < peak,
            "capacity {after} after reaping, {peak} at the peak"
        );
        for i in 0..1_000 {
            assert!(store.get(&format!("k{i}"), 5).await.unwrap().is_some());
        }
    }
}
