#!/usr/bin/env bash
# Start a private OCI registry for the tests: Debian's `docker-registry` (the CNCF
# distribution registry, 2.8). SOURCED by scripts/run-tests.sh (and usable by hand:
# `source scripts/registry-up.sh`); it never `exit`s the calling shell and returns
# non-zero on failure.
#
# Installs the package when the binary is missing (root only), writes a config with
# deletes enabled, no blob-descriptor cache (after a garbage-collect a cached descriptor makes
# the registry accept a push it then cannot serve) and the storage under a temp dir, and serves it on 127.0.0.1 at a
# free port (loopback: a dockerd pushes to it with no insecure-registry setting).
# Exports:
#   UNSEE_TEST_REGISTRY   host:port of the registry (tests give it as Unsee(registry=...))
#   UNSEE_REGISTRY_DIR    the temp dir (config.yml, storage/, registry.log, registry.pid)
#   UNSEE_REGISTRY_CONFIG its config.yml: `docker-registry garbage-collect` reads it (erasure
#                         runs it, see docs/deployment.md)
#   UNSEE_REGISTRY_STARTED=1 when this script started it; scripts/registry-down.sh stops it.

_unsee_registry_up() {
  local dir port i
  if ! command -v docker-registry >/dev/null 2>&1; then
    if [ "$(id -u)" != "0" ]; then
      echo "registry-up: docker-registry is not installed and not root; registry tests will be skipped" >&2
      return 1
    fi
    echo "registry-up: installing docker-registry" >&2
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry; }; } >&2 || {
      echo "registry-up: could not install docker-registry" >&2; return 1; }
  fi
  dir="$(mktemp -d /tmp/unsee-registry.XXXXXX)" || return 1
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  mkdir -p "$dir/storage"
  cat >"$dir/config.yml" <<CFG
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CFG
  docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  for i in $(seq 1 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/', timeout=1)" \
      >/dev/null 2>&1 && break
    sleep 0.1
  done
  if ! python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/', timeout=2)" \
      >/dev/null 2>&1; then
    echo "registry-up: the registry did not come up; log: $dir/registry.log" >&2
    tail -5 "$dir/registry.log" >&2
    kill "$(cat "$dir/registry.pid")" 2>/dev/null
    return 1
  fi
  export UNSEE_TEST_REGISTRY="127.0.0.1:$port"
  export UNSEE_REGISTRY_DIR="$dir"
  export UNSEE_REGISTRY_CONFIG="$dir/config.yml"
  export UNSEE_REGISTRY_STARTED=1
  echo "registry-up: docker-registry on $UNSEE_TEST_REGISTRY (storage $dir/storage)" >&2
}

_unsee_registry_up
_unsee_rc=$?
unset -f _unsee_registry_up
if (return 0 2>/dev/null); then
  return $_unsee_rc
else
  exit $_unsee_rc
fi
