//! The crate features a test was built with: the examples it starts are
//! built with the same, so that cargo reuses the library it has just
//! compiled (no second build where `--all-features` built both).

/// This build's features, comma-separated (`--features` of `cargo build`).
pub fn this_build() -> String {
    let all = [
        ("axum", cfg!(feature = "axum")),
        ("http-client", cfg!(feature = "http-client")),
        ("metrics", cfg!(feature = "metrics")),
        ("sqlite", cfg!(feature = "sqlite")),
        ("postgres", cfg!(feature = "postgres")),
        ("stdio", cfg!(feature = "stdio")),
        ("seal", cfg!(feature = "seal")),
        ("rmcp", cfg!(feature = "rmcp")),
        ("gateway", cfg!(feature = "gateway")),
        ("redis", cfg!(feature = "redis")),
    ];
    let on: Vec<&str> = all.iter().filter(|(_, on)| *on).map(|(f, _)| *f).collect();
    on.join(",")
}
