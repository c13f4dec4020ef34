//! The in-memory store: sharded, with an expiry index and an owner index.
//!
//! `id.rs` is the inline id every map and index is keyed on; `slot.rs` is
//! what a shard keeps per task, either the record or, once it is finished,
//! its compact form from `compact.rs`.

mod compact;
mod id;
mod operator;
mod slot;
#[cfg(test)]
mod tests;

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use self::compact::Done;
use self::id::Id;
use self::slot::Slot;
use super::{BoxFuture, Era, Error, ListQuery, Result, TaskRecord, TaskStore, ViewQuery};

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
    /// Drawn at random with the store: mixed into each id's shard.
    seed: u64,
    /// Whether writes keep each shard's `created` index: from the first
    /// operator call on (`operator.rs`), so that a store no operator reads
    /// spends no memory on it.
    keep_created: AtomicBool,
    /// Set once the `created` indexes hold every record.
    created_ready: OnceLock<()>,
}

/// Owner key and era → `(created_at_ms, id)` of each of its records: a
/// listing walks only the records it may show.
type OwnerIndex = HashMap<OwnerKey, BTreeSet<(i64, Id)>>;

/// Whose records, of which era.
type OwnerKey = (Option<String>, Era);

/// Index entries a listing reads per owner-shard lock, beyond what the page
/// still lacks: a few expired records then cost no second lock.
const LIST_SLACK: usize = 8;

/// Task ids are the layer's 128 random bits, never the client's choice, so
/// a fast seeded hash will do (SipHash cost ~200 instructions per id, and a
/// task's life hashes its id half a dozen times).
type Hasher64 = crate::hashing::Own;

#[derive(Debug, Default)]
struct Shard {
    tasks: HashMap<Id, Slot, Hasher64>,
    /// `(expires_at_ms, id)` for every record with a TTL.
    expiry: BTreeSet<(i64, Id)>,
    /// `(queued at, id)` for every record waiting for a worker: only
    /// queued execution writes here.
    queue: BTreeSet<(i64, Id)>,
    /// `(created_at_ms, id)` of every record once an operator has asked
    /// (`Inner::keep_created`): its listing walks it newest first.
    created: BTreeSet<(i64, Id)>,
    /// The same, by tool name: a listing of one tool walks only its own.
    tools: ToolIndex,
}

/// The operator's tool index of a shard: tool name → `(created_at_ms, id)`.
type ToolIndex = HashMap<Box<str>, BTreeSet<(i64, Id)>, Hasher64>;

/// Put position `at` of a record of `tool` in a shard's creation and tool
/// indexes; the name is copied only for a tool not indexed yet.
fn index_for_operator(
    created: &mut BTreeSet<(i64, Id)>,
    tools: &mut ToolIndex,
    tool: &str,
    at: (i64, Id),
) {
    match tools.get_mut(tool) {
        Some(set) => set.insert(at.clone()),
        None => tools.entry(Box::from(tool)).or_default().insert(at.clone()),
    };
    created.insert(at);
}

impl Shard {
    /// Take record `id` out of the map and every index of the shard.
    fn remove(&mut self, id: &Id) -> Option<Slot> {
        let slot = self.tasks.remove(id)?;
        if let Some(at) = slot.queued_at() {
            self.queue.remove(&(at, id.clone()));
        }
        if let Some(at) = slot.expires_at_ms() {
            self.expiry.remove(&(at, id.clone()));
        }
        let at = (slot.created_at_ms(), id.clone());
        if self.created.remove(&at) {
            let tool = slot.tool_name();
            if let Some(set) = self.tools.get_mut(tool) {
                set.remove(&at);
                if set.is_empty() {
                    self.tools.remove(tool);
                }
            }
        }
        Some(slot)
    }
}

/// A record removed from its shard, still in its owner index.
type Gone = (usize, OwnerKey, i64, Id);

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
        let hasher = Hasher64::default();
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
                owners: (0..SHARDS).map(|_| RwLock::default()).collect(),
                seed: hasher.hash_one(SHARDS),
                hasher,
                keep_created: AtomicBool::new(false),
                created_ready: OnceLock::new(),
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

    /// The shard of `id`, chosen from its first and last eight bytes, its
    /// length and the store's seed by one multiplication: the shard's map
    /// hashes the id in full, once (a lookup hashed it twice before). The
    /// choice spreads the load over the locks; no map's safety rests on it.
    fn shard(&self, id: &Id) -> &RwLock<Shard> {
        &self.inner.shards[id.spread(self.inner.seed) % SHARDS]
    }

    fn owner_shard_index(&self, owner: Option<&str>) -> usize {
        self.inner.hasher.hash_one(owner) as usize % SHARDS
    }

    fn owner_shard(&self, owner: Option<&str>) -> &RwLock<OwnerIndex> {
        &self.inner.owners[self.owner_shard_index(owner)]
    }

    fn create_now(&self, record: Arc<TaskRecord>) -> Result<()> {
        let owner = record.owner.clone();
        let era = record.era;
        let created = record.created_at_ms;
        let expires = record.expires_at_ms();
        let queued = slot::queued_at(&record);
        // Allocate outside the lock.
        let id = Id::new(&record.id);
        let lock = self.shard(&id);
        let slot = Slot::new(record);
        {
            let mut guard = write(lock);
            let shard = &mut *guard;
            let slot = match shard.tasks.entry(id.clone()) {
                Entry::Occupied(_) => return Err(Error::AlreadyExists),
                Entry::Vacant(v) => v.insert(slot),
            };
            if let Some(at) = expires {
                shard.expiry.insert((at, id.clone()));
            }
            if let Some(at) = queued {
                shard.queue.insert((at, id.clone()));
            }
            if self.inner.keep_created.load(Ordering::Acquire) {
                let at = (created, id.clone());
                index_for_operator(&mut shard.created, &mut shard.tools, slot.tool_name(), at);
            }
        }
        write(self.owner_shard(owner.as_deref()))
            .entry((owner, era))
            .or_default()
            .insert((created, id));
        Ok(())
    }

    fn replace_now(&self, record: Arc<TaskRecord>, expected_version: u64) -> Result<()> {
        let new_exp = record.expires_at_ms();
        let new_queued = slot::queued_at(&record);
        let id = Id::new(&record.id);
        let lock = self.shard(&id);
        // Compact a finished record before taking the lock.
        let new = match Done::of(&record) {
            Some(done) => Slot::Done(done),
            None => Slot::Full(record),
        };
        let old = {
            let mut guard = write(lock);
            let Shard {
                tasks,
                expiry,
                queue,
                ..
            } = &mut *guard;
            let slot = match tasks.get_mut(&id) {
                None => return Err(Error::NotFound),
                Some(slot) if slot.version() != expected_version => return Err(Error::Conflict),
                Some(slot) => slot,
            };
            let old_exp = slot.expires_at_ms();
            let old_queued = slot.queued_at();
            if old_queued != new_queued {
                if let Some(at) = old_queued {
                    queue.remove(&(at, id.clone()));
                }
                if let Some(at) = new_queued {
                    queue.insert((at, id.clone()));
                }
            }
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
        let mut gone: Vec<Gone> = Vec::new();
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
                    let Some((_, id)) = shard.expiry.first().cloned() else {
                        break;
                    };
                    taken += 1;
                    if let Some(slot) = shard.remove(&id) {
                        gone.push(self.gone(&slot, id));
                        freed.push(slot);
                    } else {
                        shard.expiry.pop_first();
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
        self.unindex_owners(gone)
    }

    /// What `slot` (of task `id`, just removed from its shard) leaves in
    /// the owner index.
    fn gone(&self, slot: &Slot, id: Id) -> Gone {
        let owner = slot.owner().map(str::to_owned);
        let index = self.owner_shard_index(owner.as_deref());
        (index, (owner, slot.era()), slot.created_at_ms(), id)
    }

    /// Drop removed records from the owner index, one lock per owner shard
    /// touched (not one per record); their ids.
    fn unindex_owners(&self, mut gone: Vec<Gone>) -> Vec<String> {
        gone.sort_unstable_by_key(|g| g.0);
        for batch in gone.chunk_by(|a, b| a.0 == b.0) {
            let mut owners = write(&self.inner.owners[batch[0].0]);
            for (_, key, created, id) in batch {
                if let Some(set) = owners.get_mut(key) {
                    set.remove(&(*created, id.clone()));
                    if set.is_empty() {
                        owners.remove(key);
                    }
                }
            }
        }
        gone.into_iter()
            .map(|(_, _, _, id)| id.as_str().to_owned())
            .collect()
    }

    /// The oldest `limit` queued records, across shards.
    fn runnable_now(&self, now_ms: i64, limit: usize) -> Vec<Arc<TaskRecord>> {
        let mut heads: Vec<(i64, Id)> = Vec::new();
        for lock in self.inner.shards.iter() {
            heads.extend(read(lock).queue.iter().take(limit).cloned());
        }
        heads.sort_unstable();
        heads
            .iter()
            .filter_map(|(_, id)| self.get_now(id.as_str(), now_ms))
            .filter(|r| slot::queued_at(r).is_some())
            .take(limit)
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

    /// A page of `owner`'s records of `era`, walked newest first from
    /// `after` a batch at a time until `limit` live ones are found: expired
    /// records not reaped yet are skipped, however many there are.
    fn list_now(&self, query: ListQuery<'_>) -> Vec<Arc<TaskRecord>> {
        let ListQuery {
            owner,
            era,
            after,
            limit,
            now_ms,
        } = query;
        let key = (owner.map(str::to_owned), era);
        let mut upper = after.map(|(c, id)| (c, Id::new(id)));
        let mut out = Vec::with_capacity(limit.min(64));
        while out.len() < limit {
            let want = (limit - out.len()).saturating_add(LIST_SLACK);
            let batch: Vec<(i64, Id)> = {
                let owners = read(self.owner_shard(owner));
                let Some(set) = owners.get(&key) else {
                    break;
                };
                let end = upper.clone().map_or(Bound::Unbounded, Bound::Excluded);
                set.range((Bound::Unbounded, end))
                    .rev()
                    .take(want)
                    .cloned()
                    .collect()
            };
            for (_, id) in &batch {
                if out.len() == limit {
                    break;
                }
                // The index is written apart from the record: check that
                // the record found is still the one indexed.
                match self.get_now(id.as_str(), now_ms) {
                    Some(r) if r.owner.as_deref() == owner && r.era == era => out.push(r),
                    _ => {}
                }
            }
            if batch.len() < want {
                break;
            }
            upper = batch.last().cloned();
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

    /// A finished task is shown from its compact form, with no record
    /// rebuilt.
    fn view_ready(&self, query: ViewQuery<'_>) -> Option<Result<()>> {
        let ViewQuery { id, now_ms, show } = query;
        let key = Id::new(id);
        let found = read(self.shard(&key))
            .tasks
            .get(&key)
            .filter(|slot| !slot.is_expired(now_ms))
            .map(Slot::share_for_view);
        match found {
            None => show(None),
            Some(copy) => copy.view(id, |view| show(Some(view))),
        }
        Some(Ok(()))
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

    /// Queued records only: in one process, a task's runner cannot die
    /// without the store.
    fn runnable(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(std::future::ready(Ok(self.runnable_now(now_ms, limit))))
    }

    fn list<'a>(&'a self, query: ListQuery<'a>) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(std::future::ready(Ok(self.list_now(query))))
    }

    fn operator(&self) -> Option<&dyn super::OperatorStore> {
        Some(self)
    }
}
