#!/usr/bin/env bash
# Start Arize Phoenix, a trace UI that takes OTLP, for the trace-UI test
# (tests/view/test_trace_ui_phoenix.py: headless Chromium reads the session, its forget and a
# detector's verdict in Phoenix's pages). SOURCED by scripts/run-tests.sh (and usable by hand:
# `source scripts/phoenix-up.sh`); it never `exit`s the calling shell and returns non-zero on failure.
#
# Phoenix runs from a virtualenv of its own, never the project's (~850 MB of dependencies the
# project does not need): ${UNSEE_PHOENIX_VENV:-$HOME/.cache/unsee/phoenix-venv}, made with pip
# on first use (~40 s here) and reused after; a stamp names the pinned release, so a changed pin
# (or an install that did not finish) makes it anew. A lock keeps two runs from installing at once.
# It serves on 127.0.0.1 at a free port (UI, REST, GraphQL, and OTLP/HTTP at /v1/traces) and
# OTLP/gRPC on a second free port (Phoenix has no host setting for gRPC: it listens on all
# interfaces), its storage (SQLite) and log in a temp dir; no telemetry, no external resources
# (fonts, pixels), no agent assistant.
# Exports:
#   UNSEE_TEST_PHOENIX       http://127.0.0.1:PORT: the UI; OTLP/HTTP at $UNSEE_TEST_PHOENIX/v1/traces
#   UNSEE_TEST_PHOENIX_GRPC  http://127.0.0.1:PORT of OTLP/gRPC
#   UNSEE_PHOENIX_DIR        the temp dir (phoenix.db, phoenix.log, phoenix.pid)
#   UNSEE_PHOENIX_STARTED=1 when this script started it; scripts/phoenix-down.sh stops it.

UNSEE_PHOENIX_PIN="arize-phoenix==20.26.1"

_unsee_phoenix_up() {
  local venv python dir port grpc pid i t0
  venv="${UNSEE_PHOENIX_VENV:-${HOME:-/root}/.cache/unsee/phoenix-venv}"
  python="${UNSEE_PHOENIX_PYTHON:-$(command -v python3.11 || command -v python3)}"
  t0=$(date +%s)
  mkdir -p "$(dirname "$venv")" || return 1
  (
    flock -w 900 9 || { echo "phoenix-up: another run holds $venv.lock" >&2; exit 1; }
    [ "$(cat "$venv/.unsee-phoenix" 2>/dev/null)" = "$UNSEE_PHOENIX_PIN" ] && exit 0
    echo "phoenix-up: installing $UNSEE_PHOENIX_PIN into $venv (once; reused after)" >&2
    rm -rf "$venv"
    { "$python" -m venv "$venv" \
      && "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip \
      && "$venv/bin/pip" install -q --disable-pip-version-check "$UNSEE_PHOENIX_PIN"; } >"$venv.install.log" 2>&1 || {
      echo "phoenix-up: could not install $UNSEE_PHOENIX_PIN; log: $venv.install.log" >&2
      tail -5 "$venv.install.log" >&2
      rm -rf "$venv"; exit 1; }
    echo "$UNSEE_PHOENIX_PIN" >"$venv/.unsee-phoenix"  # last: a stamp means a whole install
    echo "phoenix-up: installed in $(( $(date +%s) - t0 )) s" >&2
  ) 9>"$venv.lock" || return 1
  dir="$(mktemp -d /tmp/unsee-phoenix.XXXXXX)" || return 1
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  grpc="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  t0=$(date +%s)
  env PHOENIX_WORKING_DIR="$dir" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" PHOENIX_GRPC_PORT="$grpc" \
    PHOENIX_TELEMETRY_ENABLED=false PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
    PHOENIX_DISABLE_AGENT_ASSISTANT=true PHOENIX_LOG_MIGRATIONS=false \
    "$venv/bin/phoenix" serve >"$dir/phoenix.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/phoenix.pid"
  for i in $(seq 1 360); do  # 180 s at most: it took 10 s on a quiet machine here, 41 s on a busy one
    kill -0 "$pid" 2>/dev/null || break
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=1)" \
      >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=2)" \
      >/dev/null 2>&1; then
    echo "phoenix-up: Phoenix did not come up; log: $dir/phoenix.log" >&2
    tail -5 "$dir/phoenix.log" >&2
    kill "$pid" 2>/dev/null
    return 1
  fi
  export UNSEE_TEST_PHOENIX="http://127.0.0.1:$port"
  export UNSEE_TEST_PHOENIX_GRPC="http://127.0.0.1:$grpc"
  export UNSEE_PHOENIX_DIR="$dir"
  export UNSEE_PHOENIX_STARTED=1
  echo "phoenix-up: Arize Phoenix on $UNSEE_TEST_PHOENIX (OTLP/gRPC $UNSEE_TEST_PHOENIX_GRPC), up in $(( $(date +%s) - t0 )) s" >&2
}

_unsee_phoenix_up
_unsee_rc=$?
unset -f _unsee_phoenix_up
if (return 0 2>/dev/null); then
  return $_unsee_rc
else
  exit $_unsee_rc
fi
