//! The in-memory store: sharded, with an expiry index and an owner index.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError, RwLock};

use super::{BoxFuture, Error, Result, TaskRecord, TaskStore};

const SHARDS: usize = 64;

/// The default store: tasks in this process's memory.
///
/// Records live in 64 shards, each behind its own lock, so reads on two cores
/// rarely meet; a read is one hash, one shared lock and one `Arc` clone
/// whatever the number of live tasks. Each shard keeps its records ordered by
/// expiry, so [`delete_expired`](TaskStore::delete_expired) touches only the
/// expired ones and holds one shard's lock at a time. An owner index makes
/// [`list`](TaskStore::list) proportional to the page, not to the store.
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
    hasher: RandomState,
}

/// Owner key → `(created_at_ms, id)` of each of its records.
type OwnerIndex = HashMap<Option<String>, BTreeSet<(i64, String)>>;

#[derive(Debug, Default)]
struct Shard {
    tasks: HashMap<String, Arc<TaskRecord>>,
    /// `(expires_at_ms, id)` for every record with a TTL.
    expiry: BTreeSet<(i64, String)>,
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
                hasher: RandomState::new(),
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

    fn shard(&self, id: &str) -> &RwLock<Shard> {
        let h = self.inner.hasher.hash_one(id) as usize;
        &self.inner.shards[h % SHARDS]
    }

    fn owner_shard(&self, owner: Option<&str>) -> &RwLock<OwnerIndex> {
        let h = self.inner.hasher.hash_one(owner) as usize;
        &self.inner.owners[h % SHARDS]
    }

    fn create_now(&self, record: TaskRecord) -> Result<()> {
        let owner = record.owner.clone();
        let created = record.created_at_ms;
        let id = record.id.clone();
        {
            let mut shard = write(self.shard(&record.id));
            if shard.tasks.contains_key(&record.id) {
                return Err(Error::AlreadyExists);
            }
            if let Some(at) = record.expires_at_ms() {
                shard.expiry.insert((at, record.id.clone()));
            }
            shard.tasks.insert(record.id.clone(), Arc::new(record));
        }
        write(self.owner_shard(owner.as_deref()))
            .entry(owner)
            .or_default()
            .insert((created, id));
        Ok(())
    }

    fn replace_now(&self, record: TaskRecord, expected_version: u64) -> Result<()> {
        let mut shard = write(self.shard(&record.id));
        let Some(current) = shard.tasks.get(&record.id) else {
            return Err(Error::NotFound);
        };
        if current.version != expected_version {
            return Err(Error::Conflict);
        }
        let (old_exp, new_exp) = (current.expires_at_ms(), record.expires_at_ms());
        if old_exp != new_exp {
            if let Some(at) = old_exp {
                shard.expiry.remove(&(at, record.id.clone()));
            }
            if let Some(at) = new_exp {
                shard.expiry.insert((at, record.id.clone()));
            }
        }
        shard.tasks.insert(record.id.clone(), Arc::new(record));
        Ok(())
    }

    fn delete_expired_now(&self, now_ms: i64, limit: usize) -> Vec<String> {
        let mut gone = Vec::new();
        for lock in self.inner.shards.iter() {
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
                continue;
            }
            let mut shard = write(lock);
            while gone.len() < limit {
                match shard.expiry.first() {
                    Some((at, _)) if *at <= now_ms => {}
                    _ => break,
                }
                let Some((_, id)) = shard.expiry.pop_first() else {
                    break;
                };
                if let Some(record) = shard.tasks.remove(&id) {
                    gone.push((record.owner.clone(), record.created_at_ms, id));
                }
            }
        }
        for (owner, created, id) in &gone {
            let mut owners = write(self.owner_shard(owner.as_deref()));
            if let Some(set) = owners.get_mut(owner) {
                set.remove(&(*created, id.clone()));
                if set.is_empty() {
                    owners.remove(owner);
                }
            }
        }
        gone.into_iter().map(|(_, _, id)| id).collect()
    }

    fn list_now(
        &self,
        owner: Option<&str>,
        after: Option<(i64, &str)>,
        limit: usize,
        now_ms: i64,
    ) -> Vec<Arc<TaskRecord>> {
        let key = owner.map(str::to_owned);
        let ids: Vec<String> = {
            let owners = read(self.owner_shard(owner));
            let Some(set) = owners.get(&key) else {
                return Vec::new();
            };
            let upper = after.map(|(c, id)| (c, id.to_owned()));
            // Newest first: walk the (created, id) set backwards from `after`.
            let iter: Box<dyn Iterator<Item = &(i64, String)>> = match &upper {
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
            if let Some(r) = read(self.shard(&id)).tasks.get(&id) {
                if !r.is_expired(now_ms) {
                    out.push(Arc::clone(r));
                }
            }
        }
        out
    }
}

impl TaskStore for MemoryStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(self.create_now(record)))
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        let found = read(self.shard(id))
            .tasks
            .get(id)
            .filter(|r| !r.is_expired(now_ms))
            .cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
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
