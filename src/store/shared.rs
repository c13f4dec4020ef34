//! A shared store (`Arc<S>`, `Arc<dyn TaskStore>`) is a store.

use std::sync::Arc;

use super::{
    BoxFuture, ClaimQuery, ListQuery, OperatorStore, Result, TaskChange, TaskRecord, TaskStore,
    ViewQuery,
};

impl<T: TaskStore + ?Sized> TaskStore for Arc<T> {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        (**self).create(record)
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        (**self).get(id, now_ms)
    }
    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
        (**self).replace(record, expected_version)
    }
    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        (**self).delete_expired(now_ms, limit)
    }
    fn create_shared(&self, record: Arc<TaskRecord>) -> BoxFuture<'_, Result<()>> {
        (**self).create_shared(record)
    }
    fn replace_shared(
        &self,
        record: Arc<TaskRecord>,
        expected_version: u64,
    ) -> BoxFuture<'_, Result<()>> {
        (**self).replace_shared(record, expected_version)
    }
    fn list<'a>(&'a self, query: ListQuery<'a>) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        (**self).list(query)
    }
    fn orphans(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        (**self).orphans(now_ms, limit)
    }
    fn runnable(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        (**self).runnable(now_ms, limit)
    }
    fn claim_runnable<'a>(
        &'a self,
        round: ClaimQuery<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        (**self).claim_runnable(round)
    }
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        (**self).changes()
    }
    fn get_ready(&self, id: &str, now_ms: i64) -> Option<Result<Option<Arc<TaskRecord>>>> {
        (**self).get_ready(id, now_ms)
    }
    fn view_ready(&self, query: ViewQuery<'_>) -> Option<Result<()>> {
        (**self).view_ready(query)
    }
    fn operator(&self) -> Option<&dyn OperatorStore> {
        (**self).operator()
    }
}
