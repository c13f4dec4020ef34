//! [`Hold`]: when a worker's next claim round waits for more of its slots
//! to free, and how many claims it holds ahead of them (issue 33).

use std::time::Duration;

use tokio::time::Instant;

/// Whether the next claim round starts for the first slot that frees or
/// waits for half the worker's slots.
///
/// It waits (at most as long as the last round took, at most
/// [`HOLD_MAX`]) only while all of these hold:
///
/// - the last round filled the slots that were free (a backlog, most
///   likely: a round that takes exactly what was left arms it too, and
///   costs at most one wait);
/// - the worker's recent runs are short against a round: their mean time
///   in a slot (from the claim to the handler's answer, whose write goes on
///   outside the slot: `Slot`) is below [`SHORT_RUN_ROUNDS`] times the last
///   round's. A no-op run is well below a round, a 10 ms or a 100 ms run is
///   not, and such a run's slot never waits for a round;
/// - fewer than half the slots are free (so some run is held).
///
/// Without the wait a backlog of short runs is claimed in rounds of one or
/// two slots and the rest by turns: 4.7–5.3 rows a round for 16 slots on
/// PostgreSQL (`fleet7`, `fleet9` in BENCHMARKS.md), and every round is a
/// transaction and a flush whatever its size. `fleet9` held every round
/// after one that found more than it took: drains 10–15% faster, but a
/// slot-bound run of 100 ms jobs 3–4% slower and a 10 ms half-load tail
/// doubled; the run-length condition is what keeps those out.
#[derive(Debug, Default)]
pub(super) struct Hold {
    /// The last round filled the slots that were free.
    backlog: bool,
    /// When the round out started.
    started: Option<Instant>,
    /// How long the last round took.
    took: Duration,
    /// The mean time in a slot of the recent runs (none ended yet: `None`).
    run: Option<Duration>,
    /// The deadline of a round held back now.
    until: Option<Instant>,
}

/// The longest a round is held back, whatever the last one took.
const HOLD_MAX: Duration = Duration::from_millis(20);

/// Runs shorter than this many claim rounds are short enough for a held
/// round to pay: a slot that waits a round loses at most a third of a run
/// that long (a run's own time plus the round's), where the rounds it
/// saves are what bounds a queue of such runs.
const SHORT_RUN_ROUNDS: u32 = 2;

/// Runs shorter than this many claim rounds (and not short enough to hold
/// rounds for) are worth claims held ahead for them (`Ready`): a freed
/// slot waits one to two rounds for its next run, 3–6% or more of such a
/// run (10 ms runs behind 1–2 ms rounds: 10–20%, which is what held claims
/// won on Redis, BENCHMARKS.md). A longer run's slot waits for a smaller
/// share of it, and a claim held for it would wait up to a run that
/// another worker might have started.
const AHEAD_RUN_ROUNDS: u32 = 32;

impl Hold {
    /// How many claims beyond its free slots a worker of `concurrency`
    /// slots holds for them now: half its slots while the last round filled
    /// what it asked for and the recent runs are neither short enough to
    /// hold rounds for nor [`AHEAD_RUN_ROUNDS`] rounds long; none
    /// otherwise. `fixed` (the worker's setting) replaces the half, and
    /// holds whatever the runs' length.
    pub(super) fn ahead(&self, concurrency: usize, fixed: Option<usize>) -> usize {
        if !self.backlog {
            return 0;
        }
        if let Some(n) = fixed {
            return n;
        }
        match self.run {
            Some(run)
                if run >= self.took * SHORT_RUN_ROUNDS && run < self.took * AHEAD_RUN_ROUNDS =>
            {
                concurrency / 2
            }
            _ => 0,
        }
    }

    /// Whether a round for `free` of `concurrency` slots may start now; if
    /// not, [`expired`](Self::expired) tells when it may.
    pub(super) fn ready(&mut self, free: usize, concurrency: usize) -> bool {
        let short = self
            .run
            .is_some_and(|run| run < self.took * SHORT_RUN_ROUNDS);
        if !self.backlog || !short || free * 2 >= concurrency {
            self.until = None;
            return true;
        }
        let now = Instant::now();
        let until = *self.until.get_or_insert(now + self.took.min(HOLD_MAX));
        if now >= until {
            self.until = None;
            return true;
        }
        false
    }

    /// Claims held ahead waited a heartbeat period for a slot: the slots
    /// free slower than a backlog of such runs would free them, so nothing
    /// more is held ahead until a round finds a backlog again.
    pub(super) fn stalled(&mut self) {
        self.backlog = false;
    }

    /// A round is held back now.
    pub(super) fn is_holding(&self) -> bool {
        self.until.is_some()
    }

    /// Ready when the held round's wait is over.
    pub(super) async fn expired(&self) {
        if let Some(until) = self.until {
            tokio::time::sleep_until(until).await;
        }
    }

    /// A round starts now.
    pub(super) fn started(&mut self) {
        self.started = Some(Instant::now());
        self.until = None;
    }

    /// The round out ended; `more`: it filled the free slots.
    pub(super) fn ended(&mut self, more: bool) {
        self.backlog = more;
        if let Some(started) = self.started.take() {
            self.took = started.elapsed();
        }
    }

    /// A run that held a slot since `since` ended (a mean over the last
    /// few: each weighs a quarter).
    pub(super) fn run_ended(&mut self, since: Instant) {
        let took = since.elapsed();
        self.run = Some(self.run.map_or(took, |mean| (mean * 3 + took) / 4));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn only_short_runs_behind_a_backlog_hold_a_round() {
        let mut hold = Hold::default();
        hold.started();
        tokio::time::advance(Duration::from_millis(4)).await;
        hold.ended(true);
        // No run has ended yet: nothing known of their length.
        assert!(hold.ready(1, 16));
        let since = Instant::now();
        tokio::time::advance(Duration::from_millis(100)).await;
        hold.run_ended(since);
        // A 100 ms run does not wait for a 4 ms round.
        assert!(hold.ready(1, 16));
        let mut hold = Hold {
            run: Some(Duration::from_millis(3)),
            ..hold
        };
        assert!(!hold.ready(1, 16), "short runs behind a backlog wait");
        assert!(hold.is_holding());
        assert!(hold.ready(8, 16), "half the slots free: no wait");
        assert!(hold.ready(16, 16), "nothing running: no wait");
        assert!(!hold.ready(2, 16));
        tokio::time::advance(Duration::from_millis(4)).await;
        assert!(hold.ready(2, 16), "at most as long as the last round");
        hold.ended(false);
        assert!(hold.ready(1, 16), "no backlog: no wait");
    }

    #[tokio::test(start_paused = true)]
    async fn claims_are_held_ahead_for_runs_a_few_rounds_long_behind_a_backlog() {
        let round = |ms: u64| {
            let mut hold = Hold::default();
            hold.started();
            hold.ended(true);
            hold.took = Duration::from_millis(ms);
            hold
        };
        let mut hold = round(2);
        assert_eq!(hold.ahead(16, None), 0, "no run ended yet");
        hold.run = Some(Duration::from_millis(10));
        assert_eq!(hold.ahead(16, None), 8, "a 10 ms run, 2 ms rounds");
        assert_eq!(hold.ahead(16, Some(3)), 3);
        hold.run = Some(Duration::from_millis(3));
        assert_eq!(
            hold.ahead(16, None),
            0,
            "short: its rounds are held instead"
        );
        hold.run = Some(Duration::from_millis(100));
        assert_eq!(hold.ahead(16, None), 0, "long against a round");
        assert_eq!(
            hold.ahead(16, Some(3)),
            3,
            "a setting holds whatever the length"
        );
        hold.ended(false);
        hold.run = Some(Duration::from_millis(10));
        assert_eq!(hold.ahead(16, None), 0, "no backlog");
        assert_eq!(
            hold.ahead(16, Some(3)),
            0,
            "no backlog, whatever the setting"
        );
    }
}
