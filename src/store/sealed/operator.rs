//! The operator API through a [`SealedStore`]: the store underneath
//! finds, counts and purges; the records it finds are opened here.

use super::SealedStore;
use crate::store::operator::{OperatorStore, TaskQuery, TaskStats};
use crate::store::{BoxFuture, EndedCounts, EndedQuery, Error, Found, Purged, Result, TaskStore};

impl<S: TaskStore> SealedStore<S> {
    fn inner_operator(&self) -> Result<&dyn OperatorStore> {
        self.inner
            .operator()
            .ok_or(Error::Unsupported("the operator API"))
    }
}

/// A search never matches a sealed task: the store underneath holds its
/// arguments sealed, and searching them would mean opening every record.
impl<S: TaskStore> OperatorStore for SealedStore<S> {
    fn find<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Found>> {
        Box::pin(async move {
            let mut found = self.inner_operator()?.find(query, now_ms).await?;
            found.tasks = self.open_all(std::mem::take(&mut found.tasks));
            Ok(found)
        })
    }

    fn stats(&self, now_ms: i64) -> BoxFuture<'_, Result<TaskStats>> {
        Box::pin(async move { self.inner_operator()?.stats(now_ms).await })
    }

    fn purge<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Purged>> {
        Box::pin(async move { self.inner_operator()?.purge(query, now_ms).await })
    }

    fn ended(&self, query: EndedQuery) -> BoxFuture<'_, Result<EndedCounts>> {
        Box::pin(async move { self.inner_operator()?.ended(query).await })
    }

    fn as_stored(&self) -> Option<&dyn TaskStore> {
        Some(&self.inner)
    }

    fn searches_arguments(&self) -> bool {
        false
    }
}
