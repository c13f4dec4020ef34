//! The model checked under bounds that finish in a debug build on two cores
//! within CI's budget; each prints its explored state count and time
//! (`cargo test --lib model_check -- --nocapture`).

use std::time::Instant;

use stateright::{Checker, Model};

use super::{Bounds, Protocol, CANCEL, FENCED, NO_DROP, ONE_RUN, TERMINAL};

/// Check `bounds` exhaustively (BFS on two threads): print the trace of any
/// property broken and fail, assert that every `sometimes` property was
/// reached, and that at least `min_states` distinct states were explored.
fn check(name: &str, bounds: Bounds, min_states: usize) {
    let started = Instant::now();
    let checker = Protocol { b: bounds }
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    let unique = checker.unique_state_count();
    println!(
        "model_check {name}: {unique} distinct states ({} with repeats), depth {}, {:.1} s",
        checker.state_count(),
        checker.max_depth(),
        elapsed.as_secs_f64()
    );
    for property in [TERMINAL, ONE_RUN, NO_DROP, FENCED, CANCEL] {
        if let Some(path) = checker.discovery(property) {
            let how = path.last_state().ghost.violation.clone();
            let actions = path.into_actions();
            panic!("{name}: \"{property}\" broken ({how:?}) by {actions:#?}");
        }
    }
    checker.assert_properties();
    assert!(
        checker.is_done(),
        "{name}: the bound was not explored to its end"
    );
    assert!(
        unique >= min_states,
        "{name}: only {unique} states explored (at least {min_states} expected)"
    );
}

/// The bound: queued or inline execution, orphans re-run or failed; the
/// clock runs to 3 (a lease of 1 runs out at 2, the task expires at 3);
/// the callers are `a` on front `f1`, `b` on `f2`, then (with 3) `a` again
/// on `f2`; one cancel.
fn bounds(queued: bool, rerun: bool, callers: usize) -> Bounds {
    Bounds {
        queued,
        rerun,
        t_max: 3,
        lease_ms: 1,
        ttl_ms: 3,
        callers: [(0, "a", 1), (1, "b", 2), (1, "a", 3)][..callers].to_vec(),
        cancel: true,
        state_only: false,
        status_messages: false,
    }
}

// Bounds run by every `cargo test` (debug: about 10 to 15 s each on two
// cores; the counts below are what they explore).

#[test]
fn queued_runs_with_rerun_keep_every_property() {
    check("queued, rerun", bounds(true, true, 2), 100_000);
}

#[test]
fn queued_runs_with_fail_keep_every_property() {
    check("queued, fail", bounds(true, false, 2), 50_000);
}

#[test]
fn inline_runs_with_rerun_keep_every_property() {
    check("inline, rerun", bounds(false, true, 3), 100_000);
}

#[test]
fn inline_runs_with_fail_keep_every_property() {
    check("inline, fail", bounds(false, false, 3), 50_000);
}

#[test]
fn request_state_rounds_keep_every_property() {
    let b = Bounds {
        state_only: true,
        ..bounds(false, true, 2)
    };
    check("inline, rerun, requestState", b, 100_000);
}

#[test]
fn status_messages_keep_every_property() {
    let b = Bounds {
        status_messages: true,
        ..bounds(false, true, 2)
    };
    check("inline, rerun, status messages", b, 100_000);
}

// Deeper bounds, by hand: `cargo test --release --lib model_check -- \
// --ignored --nocapture` (ARCHITECTURE.md gives their counts and times).

/// Every actor and every kind of write at once, the clock to 4.
fn deep(queued: bool) -> Bounds {
    Bounds {
        t_max: 4,
        ttl_ms: 4,
        state_only: true,
        status_messages: true,
        ..bounds(queued, true, 3)
    }
}

#[test]
#[ignore = "minutes in a release build"]
fn deep_queued() {
    check("deep, queued, rerun", deep(true), 1_000_000);
}

#[test]
#[ignore = "minutes in a release build"]
fn deep_inline() {
    check("deep, inline, rerun", deep(false), 1_000_000);
}
