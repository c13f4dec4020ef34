//! Background work: reaping expired tasks, recovering orphaned ones (their
//! runner died) by policy, and listening to the store's change feed.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tower::ServiceExt;
use tracing::{info, warn};

use super::engine::{Engine, InnerService};
use super::invoker::InnerFailed;
use super::publish::change_loop;
use super::runner::{HandlerRun, InnerFuture};
use super::transition;
use crate::config::Recovery;
use crate::store;

/// How many expired tasks one store call deletes.
const REAP_BATCH: usize = 1024;

impl Engine {
    /// Keep a clone of the inner service, type-erased, for re-running
    /// orphaned tasks (the first intercepted request registers it). Kept
    /// whatever this layer's own policy: a task carries its own, and
    /// another replica's task may ask for a re-run.
    pub(crate) fn register_invoker<S>(&self, svc: &S)
    where
        S: InnerService,
    {
        if self.invoker.set.load(Ordering::Acquire) {
            return;
        }
        let mut slot = self
            .invoker
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(tower::util::BoxCloneService::new(
                svc.clone().map_err(|_| InnerFailed),
            ));
            self.invoker.set.store(true, Ordering::Release);
        }
    }

    /// Start the background reaper once, on the runtime of the first
    /// intercepted request. It holds only a weak reference, so it ends when
    /// the last layer and service are dropped.
    pub(crate) fn ensure_background(self: &Arc<Self>) {
        self.background.get_or_init(|| {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let weak = Arc::downgrade(self);
                let period = self.cfg.reap_interval;
                handle.spawn(reap_loop(weak.clone(), period));
                if let Some(feed) = self.store.changes() {
                    self.hub.has_feed.store(true, Ordering::Release);
                    handle.spawn(change_loop(weak, feed));
                }
            }
        });
    }

    async fn reap_once(&self) {
        loop {
            match self.store.delete_expired(self.now_ms(), REAP_BATCH).await {
                Ok(ids) => {
                    for id in &ids {
                        let local = self.registry.forget(id);
                        crate::metrics::expired(local.as_ref().map(|l| l.status));
                        if let Some(local) = local {
                            // Expiry is a cancellation signal for a handler
                            // that is still running.
                            local.token.cancel();
                            info!(parent: &local.span, "task expired");
                        }
                    }
                    if ids.len() < REAP_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "reaping expired tasks failed; will retry");
                    break;
                }
            }
        }
        // Expired tasks another replica reaped (or this store hides): not
        // tracked here any more either.
        for local in self.registry.forget_expired(self.now_ms()) {
            local.token.cancel();
            info!(parent: &local.span, "task expired");
        }
    }

    /// Recover `working` tasks whose runner died (lease ran out), by each
    /// task's policy: fail them honestly, or re-run them from their stored
    /// request.
    async fn recover_orphans(self: &Arc<Self>) {
        let orphans = match self.store.orphans(self.now_ms(), 64).await {
            Ok(o) => o.into_iter().map(store::opened).collect::<Vec<_>>(),
            Err(store::Error::Unsupported(_)) => return,
            Err(e) => {
                warn!(error = %e, "cannot look for orphaned tasks; will retry");
                return;
            }
        };
        let invoker = self.invoker.get();
        for record in orphans {
            // With queued execution a queued run waits for a worker; only
            // failing a dead runner's task is the reaper's.
            if !transition::orphaned(&record, self.now_ms(), self.queued()) {
                continue;
            }
            match (invoker.clone(), self.recovery_of(&record)) {
                // Workers claim orphans to re-run as they claim queued runs.
                (_, Recovery::Rerun) if self.queued() => {}
                // Not yet able to run it here (no request has registered
                // the inner service): left for a later round or another
                // replica, never failed against its policy.
                (None, Recovery::Rerun) => {}
                (Some(svc), Recovery::Rerun) => {
                    let next = transition::orphan_rerun(&record, self.now_ms(), self.lease_terms());
                    if self
                        .store
                        .replace(next.clone(), record.version)
                        .await
                        .is_ok()
                    {
                        info!(task_id = %next.id, "re-running an orphaned task");
                        // A token of its own: a runner of the old run still
                        // alive here (its lease lapsed) stops only itself.
                        let local = self.registry.rerun(&next);
                        let request = self.resume_request(&next, &local.token);
                        let fut: InnerFuture<InnerFailed> = Box::pin(svc.clone().oneshot(request));
                        let fence = next.lease.as_ref().map_or(0, |l| l.fence);
                        self.spawn_runner(
                            svc.clone(),
                            next.id.clone(),
                            local,
                            fut,
                            HandlerRun::fenced(fence),
                        );
                    }
                }
                _ => {
                    let next = transition::orphan_failed(&record, self.now_ms());
                    if self
                        .store
                        .replace(next.clone(), record.version)
                        .await
                        .is_ok()
                    {
                        let local = self.registry.forget(&next.id);
                        self.publish(record.status, &next, local.as_ref());
                    }
                }
            }
        }
    }
}

async fn reap_loop(weak: Weak<Engine>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(engine) = weak.upgrade() else { return };
        engine.reap_once().await;
        engine.recover_orphans().await;
    }
}
