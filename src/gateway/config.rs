//! How the gateway treats the upstream's tools, how long it waits, and how
//! much it holds.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::config::TaskPolicy;
use crate::upstream::{Keepalive, Processes};

/// How the gateway treats the upstream's tools, and how long it waits.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub(super) policies: HashMap<String, TaskPolicy>,
    pub(super) default_policy: TaskPolicy,
    pub(super) rerun: HashSet<String>,
    pub(super) connect_wait: Duration,
    pub(super) park: ParkLimits,
    pub(super) keepalive: Keepalive,
    pub(super) processes: Processes,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            policies: HashMap::new(),
            default_policy: TaskPolicy::Auto {
                within: Duration::from_secs(1),
            },
            rerun: HashSet::new(),
            connect_wait: Duration::from_secs(10),
            park: ParkLimits {
                ttl: Duration::from_secs(86_400),
                max: 10_000,
                per_owner: 1_000,
            },
            keepalive: Keepalive {
                every: Duration::from_secs(15),
                wait: Duration::from_secs(10),
            },
            processes: Processes {
                most: 16,
                starting: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            },
        }
    }
}

impl ProxyConfig {
    /// The policy of one tool (default: the default policy).
    pub fn with_tool_policy(mut self, tool: impl Into<String>, policy: TaskPolicy) -> Self {
        self.policies.insert(tool.into(), policy);
        self
    }

    /// The policy of tools without one of their own (default `Auto` within
    /// one second).
    pub fn with_default_policy(mut self, policy: TaskPolicy) -> Self {
        self.default_policy = policy;
        self
    }

    /// Mark `tool` safe to run again from the top: a task whose upstream
    /// call was lost (the gateway restarted) runs it again instead of
    /// failing.
    pub fn with_rerun(mut self, tool: impl Into<String>) -> Self {
        self.rerun.insert(tool.into());
        self
    }

    /// How long a request waits for the upstream to be up (default 10 s)
    /// before it fails.
    pub fn with_connect_wait(mut self, wait: Duration) -> Self {
        self.connect_wait = wait;
        self
    }

    /// How long a call waits for the answers to its upstream's questions
    /// (default 24 h, the layer's longest task TTL) before it is
    /// cancelled upstream, and how many may wait at once (default 10,000).
    /// A question relayed on a 2025-11-25 client's own stream waits as long
    /// at most; then the upstream is told the client did not answer.
    pub fn with_parked_calls(mut self, ttl: Duration, max: usize) -> Self {
        self.park.ttl = ttl;
        self.park.max = max;
        self
    }

    /// How many calls of one owner may wait for answers at once (default
    /// 1,000): one client cannot take every slot of
    /// [`with_parked_calls`](Self::with_parked_calls). Clients without an
    /// identity (no bearer token, or stdio) count as one owner.
    pub fn with_parked_calls_per_owner(mut self, max: usize) -> Self {
        self.park.per_owner = max;
        self
    }

    /// Ping a quiet upstream every `every` (default 15 s); one that does
    /// not answer within `wait` (default 10 s) is given up: every call in
    /// flight on it fails, and it is reconnected.
    pub fn with_keepalive(mut self, every: Duration, wait: Duration) -> Self {
        self.keepalive = Keepalive { every, wait };
        self
    }

    /// An upstream over stdio runs each tool call in a process of its own
    /// (its questions carry nothing that says which call asked): at most
    /// `n` at once (default 16), started as calls need them and kept. A
    /// call waiting for answers keeps its process.
    pub fn with_upstream_processes(mut self, n: usize) -> Self {
        self.processes.most = n.max(1);
        self
    }

    /// How many of those start at once (default: the host's CPUs). A
    /// process takes its own CPU time to start (an interpreter loads its
    /// modules): a burst of calls that started every process at once would
    /// bring none up within the connect wait on a small host. A call
    /// waits for the first process free instead; restarts wait their turn
    /// too.
    pub fn with_upstream_starts(mut self, n: usize) -> Self {
        self.processes.starting = n.max(1);
        self
    }

    pub(super) fn policy(&self, tool: &str) -> TaskPolicy {
        self.policies
            .get(tool)
            .copied()
            .unwrap_or(self.default_policy)
    }
}

/// How long a parked call waits, and how many may wait.
#[derive(Clone, Copy, Debug)]
pub(super) struct ParkLimits {
    /// How long one waits for its answers.
    pub(super) ttl: Duration,
    /// How many wait at once.
    pub(super) max: usize,
    /// How many of one owner wait at once.
    pub(super) per_owner: usize,
}
