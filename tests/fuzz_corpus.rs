//! Replays the fuzz seed corpus (`fuzz/corpus/<target>/`) through the fuzz
//! targets' own bodies (`fuzz/src/targets.rs`), on the stable toolchain and
//! without cargo-fuzz, so that CI checks every seed on every run.

#[path = "../fuzz/src/targets.rs"]
mod targets;

const TARGETS: [&str; 2] = ["jsonrpc_request", "tasks_update"];

/// Every corpus directory belongs to a target this test replays.
#[test]
fn every_corpus_has_a_target() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        assert!(
            TARGETS.contains(&name.as_ref()),
            "fuzz/corpus/{name} has no target here"
        );
    }
}

fn replay(target: &str, run: fn(&[u8])) {
    // Each target also gets the other targets' seeds: they are cheap and
    // shaped differently.
    let mut own = 0;
    for corpus in TARGETS {
        for (path, bytes) in targets::corpus(corpus) {
            eprintln!("{target} <- {}", path.display());
            run(&bytes);
            own += usize::from(corpus == target);
        }
    }
    assert!(own >= 20, "{target} has only {own} seeds");
}

#[test]
fn jsonrpc_request_corpus() {
    replay("jsonrpc_request", targets::jsonrpc_request);
}

#[test]
fn tasks_update_corpus() {
    replay("tasks_update", targets::tasks_update);
}
