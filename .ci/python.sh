# Sourced by the .ci scripts: the upstream MCP servers of the gateway tests.
#
# `ensure_python_mcp DIR` makes a venv DIR/python-mcp with the Python `mcp`
# SDK of tests/gateway/requirements.txt (every package pinned), unless the
# venv there already has exactly that file installed, and exports
# MCP_TASKS_PYTHON, that venv's python. tests/gateway/upstream.py runs with it:
#   "$MCP_TASKS_PYTHON" tests/gateway/upstream.py               (stdio)
#   "$MCP_TASKS_PYTHON" tests/gateway/upstream.py --http PORT   (http://127.0.0.1:PORT/mcp)
# Needs python3 (3.10 or newer) with its venv module; when `python3 -m venv`
# fails (Debian without python3-venv) it is installed with apt-get as root.
#
# `ensure_everything DIR` installs @modelcontextprotocol/server-everything
# with `npm ci` from tests/gateway/everything/package-lock.json into
# DIR/everything (unless that lock is already installed there), with Node
# $NODE_VERSION from node.sh's `ensure_node DIR`, and exports
#   MCP_TASKS_EVERYTHING       the command line that serves it over stdio
#   MCP_TASKS_EVERYTHING_HTTP  the command line that serves Streamable HTTP on
#                              http://127.0.0.1:$PORT/mcp: the port comes from
#                              the environment variable PORT (default 3001),
#                              and it listens on every interface, not only loopback
# Both are "$NODE" and the entry point's path (no spaces in DIR) and one word.
#
# Callers define `die` and `say`; both functions print progress to stderr only.

PYTHON_MCP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON_MCP_REQUIREMENTS="$PYTHON_MCP_ROOT/tests/gateway/requirements.txt"
EVERYTHING_LOCK_DIR="$PYTHON_MCP_ROOT/tests/gateway/everything"
EVERYTHING_VERSION=2026.8.31

ensure_python_mcp() {
  local cache="$1"
  local venv="$cache/python-mcp" stamp want
  [[ -f "$PYTHON_MCP_REQUIREMENTS" ]] || die "no $PYTHON_MCP_REQUIREMENTS"
  want="$(sha256sum "$PYTHON_MCP_REQUIREMENTS" | cut -d' ' -f1)"
  stamp="$venv/.requirements.sha256"
  MCP_TASKS_PYTHON="$venv/bin/python"
  if [[ "$(cat "$stamp" 2>/dev/null || true)" == "$want" ]] \
    && "$MCP_TASKS_PYTHON" -c 'import importlib.metadata as m; m.version("mcp")' 2>/dev/null; then
    export MCP_TASKS_PYTHON
    return 0
  fi
  command -v python3 >/dev/null || _python_mcp_apt python3 python3-venv
  say "creating a venv in $venv with $(python3 --version 2>&1)"
  rm -rf "$venv"
  mkdir -p "$cache"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    # Debian's python3 lacks ensurepip until python3-venv (or python3.X-venv) is in.
    local minor
    minor="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    _python_mcp_apt python3-venv "python$minor-venv"
    python3 -m venv "$venv" >&2 || die "python3 -m venv still fails"
  fi
  say "installing $PYTHON_MCP_REQUIREMENTS"
  "$MCP_TASKS_PYTHON" -m pip install --quiet --disable-pip-version-check --no-input \
    -r "$PYTHON_MCP_REQUIREMENTS" >&2 || die "pip could not install $PYTHON_MCP_REQUIREMENTS"
  local pinned got
  pinned="$(sed -n 's/^mcp==//p' "$PYTHON_MCP_REQUIREMENTS")"
  got="$("$MCP_TASKS_PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  [[ "$got" == "$pinned" ]] || die "expected mcp $pinned in $venv, got $got"
  printf '%s\n' "$want" >"$stamp"
  export MCP_TASKS_PYTHON
}

# Install Debian packages (as root, after apt-get update); the first one that
# exists is enough for the venv case, so each is tried alone.
_python_mcp_apt() {
  [[ "$(id -u)" -eq 0 ]] || die "python3 -m venv fails and installing $1 needs root"
  command -v apt-get >/dev/null || die "python3 -m venv fails and there is no apt-get to install $1"
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
  local pkg ok=0
  for pkg in "$@"; do
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null 2>&1 && ok=1
  done
  [[ "$ok" -eq 1 ]] || die "apt-get could not install any of: $*"
}

_everything_version() {
  "$NODE" -p 'require(process.argv[1]).version' "$1/package.json" 2>/dev/null || true
}

ensure_everything() {
  local cache="$1"
  declare -F ensure_node >/dev/null || source "$PYTHON_MCP_ROOT/.ci/node.sh"
  ensure_node "$cache"
  local dir="$cache/everything"
  local pkg="$dir/node_modules/@modelcontextprotocol/server-everything"
  if [[ "$(_everything_version "$pkg")" != "$EVERYTHING_VERSION" ]] \
    || ! cmp -s "$EVERYTHING_LOCK_DIR/package-lock.json" "$dir/package-lock.json"; then
    say "installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION into $dir"
    mkdir -p "$dir"
    cp "$EVERYTHING_LOCK_DIR/package.json" "$EVERYTHING_LOCK_DIR/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --loglevel=error --no-audit --no-fund) >&2
    [[ "$(_everything_version "$pkg")" == "$EVERYTHING_VERSION" ]] || die "server-everything $EVERYTHING_VERSION did not install"
  fi
  local entry="$pkg/$("$NODE" -p 'require(process.argv[1]).bin["mcp-server-everything"]' "$pkg/package.json")"
  [[ -f "$entry" ]] || die "no server-everything entry point at $entry"
  MCP_TASKS_EVERYTHING="$NODE $entry stdio"
  MCP_TASKS_EVERYTHING_HTTP="$NODE $entry streamableHttp"
  export MCP_TASKS_EVERYTHING MCP_TASKS_EVERYTHING_HTTP
}
