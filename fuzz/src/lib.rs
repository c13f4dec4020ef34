//! Fuzz targets of `mcp-task-layer`. The bodies live in `targets.rs`, which
//! `tests/fuzz_corpus.rs` of the main crate includes too, so that CI replays
//! the seed corpus without cargo-fuzz.

pub mod targets;
