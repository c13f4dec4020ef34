//! The hashers of the crate's per-request maps. SipHash, the standard
//! library's default, costs about 100 instructions a key; a request in
//! flight through the gateway hashed two dozen keys (BENCHMARKS.md, the
//! gateway on one core). Both are seeded at random per process.

/// For keys the crate makes itself (task ids, upstream request ids).
pub(crate) type Own = foldhash::fast::RandomState;

/// For keys a client chooses (its request ids, tool names): the variant
/// that mixes its output once more.
pub(crate) type Chosen = foldhash::quality::RandomState;
