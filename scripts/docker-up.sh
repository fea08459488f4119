#!/usr/bin/env bash
# Make a Docker daemon reachable for the sandbox tests and build the sandbox
# images. SOURCED by scripts/run-tests.sh: it never `exit`s the calling shell;
# it returns non-zero on failure.
#
# If a daemon is already reachable (DOCKER_HOST or the default socket) it is
# used as is. Otherwise, when running as root, it installs docker.io (only if
# dockerd is missing) and starts a private dockerd:
#   - its own socket, data-root, exec-root and pidfile under one temp dir
#     (exported as UNSEE_DOCKERD_DIR, and DOCKER_HOST points at its socket);
#   - --bridge=none --iptables=false --ip6tables=false: no container network
#     (every sandbox container runs with network_mode=none anyway);
#   - --live-restore.
# It sets UNSEE_DOCKERD_STARTED=1 when it started one; scripts/docker-down.sh
# stops that daemon and removes its temp dir.
#
# Images: unsee-sandbox:busybox (~0.3 s) and unsee-sandbox:latest (Debian +
# python3: debootstrap ~60-80 s on a fresh machine, then ~4 s from the cached
# rootfs under ~/.cache/unsee/sandbox) are both built; the tests use both.

_unsee_docker_reachable() {
  if command -v docker >/dev/null 2>&1; then
    timeout 10 docker info >/dev/null 2>&1
  else
    "$_unsee_py" -c 'import docker,sys; docker.from_env(timeout=5).ping()' >/dev/null 2>&1
  fi
}

_unsee_docker_up() {
  local repo
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  _unsee_py="${UNSEE_PYTHON:-$repo/.venv/bin/python}"
  [ -x "$_unsee_py" ] || _unsee_py="$(command -v python3)"

  if ! _unsee_docker_reachable; then
    if [ "$(id -u)" != "0" ]; then
      echo "docker-up: no Docker daemon reachable and not root; Docker tests will be skipped" >&2
      return 1
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "docker-up: installing docker.io" >&2
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io; } >&2 || {
        echo "docker-up: could not install docker.io" >&2; return 1; }
    fi
    local dir
    dir="$(mktemp -d /tmp/unsee-dockerd.XXXXXX)" || return 1
    mkdir -p "$dir/data" "$dir/exec"
    dockerd --bridge=none --iptables=false --ip6tables=false --live-restore \
      --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
      -H "unix://$dir/docker.sock" >"$dir/dockerd.log" 2>&1 &
    echo $! >"$dir/dockerd.launcher.pid"
    export UNSEE_DOCKERD_DIR="$dir"
    export DOCKER_HOST="unix://$dir/docker.sock"
    echo "$dir" >"${TMPDIR:-/tmp}/unsee-dockerd.current"
    local i
    for i in $(seq 1 150); do
      _unsee_docker_reachable && break
      sleep 0.2
    done
    if ! _unsee_docker_reachable; then
      echo "docker-up: dockerd did not come up; log: $dir/dockerd.log" >&2
      tail -5 "$dir/dockerd.log" >&2
      return 1
    fi
    export UNSEE_DOCKERD_STARTED=1
    echo "docker-up: dockerd started (DOCKER_HOST=$DOCKER_HOST)" >&2
  fi

  # Images (build-image installs busybox-static / debootstrap itself when root and missing):
  # the busybox one for the conformance tests, the Debian+python3 one for the tests and the
  # demo that run python3 in the sandbox (~60-80 s on a fresh machine, then the cached rootfs).
  "$_unsee_py" -m unsee.sandbox.cli build-image --flavor busybox >&2 || {
    echo "docker-up: building the busybox sandbox image failed" >&2; return 1; }
  "$_unsee_py" -m unsee.sandbox.cli build-image --flavor python >&2 || {
    echo "docker-up: building the python sandbox image failed" >&2; return 1; }
  return 0
}

_unsee_docker_up
_unsee_rc=$?
unset -f _unsee_docker_up _unsee_docker_reachable
unset _unsee_py
if (return 0 2>/dev/null); then
  return $_unsee_rc
else
  exit $_unsee_rc
fi
