#!/usr/bin/env bash
# Sets up what the test suite needs, where this machine allows it, and says
# in one line what it could not (the tests that need it then say so too):
#   - bubblewrap (sandboxed requests), acl (setfacl/getfacl), util-linux's
#     `script` and `setpriv`, gcc, prometheus (the scrape test), redis-server (the relay fleet's store; the
#     tests start their own servers on free ports): Debian packages,
#     installed with apt-get as root or through passwordless sudo;
#   - the reference server (@openai/codex, pinned below) from npm into
#     .cache/, found by the tests through .cache/reference-bin
#     (CODEX_REFERENCE_BIN overrides it; EXEC_SERVER_SKIP_REFERENCE=1 skips it);
#   - every npm package the code and tests use, cached now (deno.lock and
#     deno.test.lock), so
#     that no test downloads anything while it runs.
# `deno task test` runs it before the tests; `.ci/run` runs `deno task test`.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache

reference_version="${CODEX_REFERENCE_VERSION:-0.171.0}"
missing=()
apt_updated=0

# apt-get as root, or through passwordless sudo (CI runners); empty when neither.
as_root=""
if [ "$(id -u)" -eq 0 ]; then
  as_root="env"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root="sudo -n"
fi

# Installs Debian package $2 when command $1 is missing (root or sudo, and apt-get).
need() {
  local command=$1 package=$2
  command -v "$command" >/dev/null 2>&1 && return 0
  if [ -z "$as_root" ] || ! command -v apt-get >/dev/null 2>&1; then
    missing+=("$package (needs root or passwordless sudo, and apt-get)")
    return 1
  fi
  echo "test setup: installing Debian's $package" >&2
  if [ "$apt_updated" -eq 0 ]; then
    $as_root apt-get update -qq >&2 || true
    apt_updated=1
  fi
  if ! $as_root DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >&2; then
    missing+=("$package (apt-get install failed)")
    return 1
  fi
}

need bwrap bubblewrap
need setfacl acl
need script bsdutils
need setpriv util-linux
need gcc gcc
need redis-server redis-server
need prometheus prometheus

# The reference exec-server, for the side-by-side tests.
if [ -n "${CODEX_REFERENCE_BIN:-}" ]; then
  printf '%s\n' "$CODEX_REFERENCE_BIN" >.cache/reference-bin
elif [ -n "${EXEC_SERVER_SKIP_REFERENCE:-}" ]; then
  rm -f .cache/reference-bin
  missing+=("the reference server (EXEC_SERVER_SKIP_REFERENCE is set)")
else
  prefix="$(pwd)/.cache/codex-${reference_version}"
  bin="$prefix/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
  if [ ! -x "$bin" ]; then
    echo "test setup: installing the reference server @openai/codex@${reference_version} into .cache/" >&2
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
      "@openai/codex@${reference_version}" >&2 || true
  fi
  if [ -x "$bin" ]; then
    printf '%s\n' "$bin" >.cache/reference-bin
  else
    rm -f .cache/reference-bin
    missing+=("the reference server @openai/codex@${reference_version} (npm install failed)")
  fi
fi

# The package's dependencies (deno.json/deno.lock) and the tests' own
# (deno.test.json/deno.test.lock: the conformance suite, server-everything, …).
if ! deno install --frozen >&2 || ! deno install --frozen --config deno.test.json >&2; then
  echo "test setup: caching the pinned npm packages failed (deno install --frozen)" >&2
  exit 1
fi

if [ "${#missing[@]}" -eq 0 ]; then
  echo "test setup: bubblewrap, acl, script, setpriv, gcc, redis-server and the reference server (codex ${reference_version}) are here; nothing is skipped" >&2
else
  msg=$(printf '%s; ' "${missing[@]}")
  echo "test setup: NOT available, the tests that need them say so and are skipped: ${msg%; }" >&2
fi
