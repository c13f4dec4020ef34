#!/usr/bin/env bash
# Is `rust-version` in Cargo.toml true? (README.md, "Minimum Rust version")
#
#   bash .ci/msrv.sh          # the dependencies' rust-version (fast; CI)
#   bash .ci/msrv.sh build    # our own code on Debian's oldest rustc (CI)
#
# 1. For the build with no feature and with each feature alone, every
#    package that builds (normal and build dependencies, every target
#    platform, as Cargo.lock resolves them) and the rust-version its
#    Cargo.toml declares. It fails if the default build or a feature outside
#    SQL_FEATURES needs more than our rust-version; SQL_FEATURES (sqlx) may,
#    and their figure is printed. Std APIs newer than rust-version are
#    clippy's `incompatible_msrv` (it reads rust-version; .ci/run's clippy
#    denies warnings).
#
# 2. `build`: language features are checked by no lint, only by a compiler.
#    No rustup toolchain can be fetched here, but Debian 12 ships rustc and
#    cargo 1.85 (package rustc-web). The packages are downloaded and
#    unpacked under a temporary folder (never installed: they conflict with
#    rustup), the dependencies are resolved for that compiler
#    (`incompatible-rust-versions = "fallback"`, in a copy of the
#    repository), and the library is checked with no feature and with the
#    features but NOT_ON_DEBIAN's. Debian's newest rustc not above our
#    rust-version is used; when it is older than rust-version (1.85 < 1.88), this is
#    stricter than promised: it says that our own code needs no newer Rust
#    than that, so rust-version is set by the dependencies alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# Features allowed to need a newer Rust than rust-version (README.md says
# which one).
SQL_FEATURES="sqlite postgres"
# Features left out of the build on Debian's older rustc: the SQL ones, and
# those whose dependency needs exactly our rust-version (1.88: edition
# 2024's let chains), above Debian's 1.85: `redis` (redis 1.8) and `rmcp`
# (rmcp 3.x); the `deps` check covers their declared rust-version.
NOT_ON_DEBIAN="$SQL_FEATURES redis rmcp"

deps_check() {
    python3 - "$SQL_FEATURES" <<'EOF'
import json, subprocess, sys

sql = set(sys.argv[1].split())

def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout

def ver(v):  # "1.88" and "1.88.0" alike
    return tuple((list(int(x) for x in v.split(".")) + [0, 0])[:3])

def show(t):  # (1, 88, 0) -> "1.88"
    return f"{t[0]}.{t[1]}" + (f".{t[2]}" if t[2] else "")

ours_meta = json.loads(run("cargo", "metadata", "--format-version", "1", "--no-deps"))
pkg = next(p for p in ours_meta["packages"] if p["name"] == "mcp-task-layer")
ours = pkg.get("rust_version")
if not ours:
    sys.exit("msrv.sh: mcp-task-layer declares no rust-version")
features = sorted(f for f in pkg["features"] if f != "default")
unknown_sql = sql - set(features)
if unknown_sql:
    sys.exit(f"msrv.sh: SQL_FEATURES names no feature of Cargo.toml: {sorted(unknown_sql)}")

# Every package any feature can reach, with its declared rust-version.
full = json.loads(run("cargo", "metadata", "--format-version", "1", "--all-features"))
declared = {(p["name"], p["version"]): p.get("rust_version") for p in full["packages"]}

readme = open("README.md").read()
failed = False
print(f"rust-version of mcp-task-layer: {ours}")
if f"Rust {show(ver(ours))}" not in readme:
    print(f"  [FAIL: README.md does not say \"Rust {show(ver(ours))}\"]")
    failed = True
for feature in [None] + features:
    args = ["cargo", "tree", "-p", "mcp-task-layer", "-e", "normal,build",
            "--no-default-features", "--target", "all", "--prefix", "none", "-f", "{p}"]
    if feature:
        args += ["--features", feature]
    packages = set()
    for line in run(*args).splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] == "mcp-task-layer":
            continue
        packages.add((parts[0], parts[1].lstrip("v")))
    if not packages:
        sys.exit(f"msrv.sh: cargo tree listed no dependency for {feature or 'no feature'}")
    missing = sorted(p for p in packages if p not in declared)
    if missing:
        sys.exit(f"msrv.sh: not in cargo metadata: {missing}")
    with_rv = [(ver(declared[p]), p) for p in packages if declared[p]]
    top = max(v for v, _ in with_rv)
    who = ", ".join(f"{n} {v}" for rv, (n, v) in sorted(with_rv) if rv == top)
    label = f"--features {feature}" if feature else "no feature (default)"
    quiet = len(packages) - len(with_rv)
    line = (f"  {label}: {len(packages)} packages, highest rust-version "
            f"{show(top)} ({who}); {quiet} declare none")
    if top > ver(ours):
        if feature in sql:
            line += f"  [SQL feature: needs {show(top)}]"
            if f"Rust {show(top)}" not in readme:
                line += f"  [FAIL: README.md does not say \"Rust {show(top)}\"]"
                failed = True
        else:
            line += f"  [FAIL: above rust-version {ours}]"
            failed = True
    print(line)
if failed:
    sys.exit("msrv.sh: raise rust-version in Cargo.toml (and README.md's"
             " \"Minimum Rust version\"), or keep the dependency at an older version")
print("msrv.sh: no default or non-SQL feature dependency declares a rust-version above ours")
EOF
}

# Debian's rustc-web + cargo-web of one version, unpacked under $1; prints
# the version used.
debian_rust() {
    local root="$1" ours="$2" version minor debs pkg dep
    if ! apt-cache madison rustc-web 2>/dev/null | grep -q rustc-web; then
        apt-get update -qq >&2
    fi
    # The newest Debian version whose major.minor is not above ours.
    version=$(apt-cache madison rustc-web | awk '{print $3}' | python3 -c '
import sys
ours = tuple(int(x) for x in sys.argv[1].split(".")[:2])
best = None
for v in sys.stdin.read().split():
    mm = tuple(int(x) for x in v.split(".")[:2])
    if mm <= ours and (best is None or mm > best[0]):
        best = (mm, v)
print(best[1] if best else "")
' "$ours")
    [[ -n "$version" ]] || { echo "msrv.sh: Debian has no rustc-web at or below $ours" >&2; return 1; }
    minor=$(cut -d. -f1,2 <<<"$version")
    debs="$root/debs"
    mkdir -p "$debs"
    chmod 777 "$debs" # apt's download user (_apt) writes there
    # The toolchain at that exact version, and whichever of its direct
    # dependencies this machine lacks (libLLVM, cargo's libpcre3, ...).
    local want=("rustc-web=$version" "cargo-web=$version" "libstd-rust-web-dev=$version"
                "libstd-rust-web-$minor=$version")
    for pkg in "${want[@]}"; do
        for dep in $(apt-cache depends "$pkg" 2>/dev/null | awk '$1 == "Depends:" {print $2}' | grep -v '^<'); do
            case "$dep" in rustc-web|cargo-web|libstd-rust-web-*) continue ;; esac
            dpkg -s "$dep" >/dev/null 2>&1 || want+=("$dep")
        done
    done
    (cd "$debs" && apt-get download -qq "${want[@]}" >&2)
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$root/fs"; done
    echo "$version"
}

build_check() {
    local ours version fs libs missing
    ours=$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
print(next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "mcp-task-layer")["rust_version"])')
    tmp=$(mktemp -d /tmp/mcp-msrv.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    chmod 755 "$tmp" # apt's download user enters it
    version=$(debian_rust "$tmp" "$ours")
    fs="$tmp/fs"
    libs="$fs/usr/lib/x86_64-linux-gnu:$fs/lib/x86_64-linux-gnu"
    missing=$(LD_LIBRARY_PATH="$libs" ldd "$fs/usr/bin/rustc" "$fs/usr/bin/cargo" \
        "$fs"/usr/lib/x86_64-linux-gnu/librustc_driver-*.so | grep 'not found' || true)
    [[ -z "$missing" ]] || { echo "msrv.sh: Debian's toolchain lacks: $missing" >&2; return 1; }
    (
        export LD_LIBRARY_PATH="$libs" PATH="$fs/usr/bin:$PATH"
        export RUSTC="$fs/usr/bin/rustc" RUSTDOC="$fs/usr/bin/rustdoc"
        export CARGO_TARGET_DIR="$tmp/target" CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback
        unset RUSTFLAGS
        echo "msrv.sh: $(rustc -V), $(cargo -V), from Debian's rustc-web $version"
        # A copy of the work tree as it is (tracked and untracked files, not
        # the ignored ones such as target/).
        mkdir "$tmp/repo"
        git ls-files -z --cached --others --exclude-standard |
            tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$tmp/repo"
        cd "$tmp/repo"
        # Resolve for that compiler: rust-version lowered to it in the copy,
        # so that the fallback resolver picks dependencies it can build.
        sed -i "0,/^rust-version = .*/s//rust-version = \"$(cut -d. -f1,2 <<<"$version")\"/" Cargo.toml
        cargo generate-lockfile -q
        local features
        features=$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
skip = set(sys.argv[1].split())
p = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "mcp-task-layer")
print(",".join(sorted(f for f in p["features"] if f != "default" and f not in skip)))' "$NOT_ON_DEBIAN")
        echo "msrv.sh: cargo check --lib (no feature), then --features $features"
        cargo check -q --locked --lib --no-default-features
        cargo check -q --locked --lib --no-default-features --features "$features"
        echo "msrv.sh: the library builds on $(rustc -V | cut -d' ' -f1,2) (no feature; $features); not checked: the SQL features (sqlx 0.9 needs 1.94), redis and rmcp (their clients need 1.88)"
    )
}

case "${1:-deps}" in
    deps) deps_check ;;
    build) build_check ;;
    *) echo "usage: bash .ci/msrv.sh [deps|build]" >&2; exit 2 ;;
esac
