//! A call's place on an upstream lane: [`Lease`] (and [`Held`], a lane
//! taken while its connection is awaited), given back when dropped.

use std::sync::{Arc, Weak};

use tokio::sync::Notify;

use super::lane::{Lane, Usage};
use super::link::Link;

/// A call's place on a lane over stdio (given back when dropped), or the
/// shared lane of an HTTP upstream.
pub(crate) struct Lease {
    lane: Option<Arc<Lane>>,
    /// The upstream's: a lane was let go.
    released: Weak<Notify>,
    /// Whether the call is a resident (parked) rather than the active one.
    parked: bool,
    /// The call ended without its answer: its handler may still run.
    unanswered: bool,
    /// A request that is no tool call, on the primary lane beside its
    /// calls: it neither is the lane's active call nor parks there, yet
    /// ending unanswered ends the connection as a call's does.
    forwarded: bool,
    /// The lane's live connection.
    pub(crate) link: Arc<Link>,
}

impl Lease {
    /// A call's place: on `lane` over stdio (none over HTTP, where one
    /// lane carries every call), as its active call, or, `forwarded`, as a
    /// request that is no tool call, beside the primary lane's calls;
    /// either way, ending unanswered ends its connection once no call is
    /// on it.
    pub(super) fn new(
        lane: Option<Arc<Lane>>,
        released: Weak<Notify>,
        link: Arc<Link>,
        forwarded: bool,
    ) -> Self {
        Lease {
            lane,
            released,
            parked: false,
            unanswered: false,
            forwarded,
            link,
        }
    }

    /// The call ends without its answer (cancelled, its caller gone): the
    /// upstream's handler may go on and ask, so the connection takes no
    /// other call and ends (its process restarts) once no call is on it.
    pub(crate) fn unanswered(&mut self) {
        self.unanswered = true;
        self.link.taint();
    }

    /// The call waits for answers: it stops being the lane's active call
    /// and stays as a resident.
    pub(crate) fn park(&mut self) {
        let Some(lane) = &self.lane else { return };
        if self.parked || self.forwarded {
            return;
        }
        self.parked = true;
        {
            let mut usage = lane.usage();
            usage.active = false;
            usage.residents += 1;
        }
        wake(&self.released);
    }

    /// The call goes on: it waits until the lane has no active call, then
    /// is it (another call's question could not be told from its own).
    pub(crate) async fn resume(&mut self) {
        let (Some(lane), Some(released)) = (&self.lane, self.released.upgrade()) else {
            self.parked = false;
            return;
        };
        if !self.parked {
            return;
        }
        loop {
            let freed = released.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut usage = lane.usage();
                if !usage.active {
                    usage.active = true;
                    usage.residents = usage.residents.saturating_sub(1);
                    self.parked = false;
                    return;
                }
            }
            freed.await;
        }
    }
}

/// A lane was given back or parked: calls waiting for one look again.
fn wake(released: &Weak<Notify>) {
    if let Some(released) = released.upgrade() {
        released.notify_waiters();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(lane) = &self.lane {
            let end = {
                let mut usage = lane.usage();
                if self.unanswered {
                    usage.tainted = Some(self.link.serial);
                }
                if !self.forwarded {
                    give_back(&mut usage, self.parked);
                }
                usage.is_empty() && usage.tainted == Some(self.link.serial)
            };
            if end {
                // A new process for the next call: the old one's handler
                // may still ask.
                self.link
                    .close("a call on it ended unanswered; its handler may still run".to_owned());
            }
            wake(&self.released);
        }
    }
}

/// A lane's use ends: as its active call, or as a resident (`parked`).
fn give_back(usage: &mut Usage, parked: bool) {
    if parked {
        usage.residents = usage.residents.saturating_sub(1);
    } else {
        usage.active = false;
    }
    if usage.is_empty() {
        usage.idle_since = std::time::Instant::now();
    }
}

/// A lane taken as active while its connection is awaited: given back
/// when dropped, unless it became a [`Lease`].
pub(super) struct Held {
    pub(super) lane: Option<Arc<Lane>>,
    pub(super) released: Weak<Notify>,
}

impl Held {
    pub(super) fn lease(mut self, link: Arc<Link>) -> Lease {
        Lease::new(self.lane.take(), Weak::clone(&self.released), link, false)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take() {
            give_back(&mut lane.usage(), false);
            wake(&self.released);
        }
    }
}
