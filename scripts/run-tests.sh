#!/usr/bin/env bash
# Runs the test suite. Starts a Docker daemon for the sandbox tests when none
# is reachable (installing docker.io if root), builds the sandbox images, and
# stops the daemon it started. Headless Chromium (Debian's package) is installed for the
# page tests of `unsee view` when missing. Docker tests then must pass (UNSEE_REQUIRE_DOCKER=1
# turns a missing daemon into failures, not skips); in CI (CI=true) a daemon
# that cannot be had fails the run before pytest starts. The same for PostgreSQL:
# a private cluster from Debian's package (scripts/postgres-up.sh), stopped after, and for the
# OCI registry the sandbox snapshots of several machines go to (scripts/registry-up.sh), and for
# Arize Phoenix, the trace UI the browser test reads (scripts/phoenix-up.sh: its own venv, cached).
#
# With no arguments, the record, forget and erasure suites then run a second time
# with unsee's stores on PostgreSQL (UNSEE_TEST_STORE=postgres: a database per home),
# less the Docker tests: their sandbox paths ran in the first pass, and the local-sandbox
# twins of the same tests (route conformance, B7 == B5 with sandbox files) cover the records
# on PostgreSQL (saves ~2 of CI's 45 minutes). The agent-shape suites of tests/forget (hand-written
# graphs, nested agents, state tools and flows, run inputs, async and MCP tools) stay out of that
# pass too: they test how a shape is recorded and replayed, through the same store calls the rest
# of tests/forget makes on PostgreSQL there (saves ~3 more).
set -uo pipefail
cd "$(dirname "$0")/.."
# One converted copy of the local model for every test directory and run.
export UNSEE_MODEL_CACHE="${UNSEE_MODEL_CACHE:-$PWD/.unsee-cache}"
started=0
if source scripts/docker-up.sh; then
  started=${UNSEE_DOCKERD_STARTED:-0}
  export UNSEE_REQUIRE_DOCKER=1
elif [ "${CI:-}" = "true" ]; then
  echo "run-tests: no Docker daemon and no sandbox images; CI runs the Docker tests, so this is a failure" >&2
  exit 1
else
  echo "run-tests: no Docker daemon: the docker tests will be skipped" >&2
fi
pg=0
if [ -n "${UNSEE_TEST_PG_URL:-}" ] || source scripts/postgres-up.sh; then
  pg=1
  export UNSEE_REQUIRE_POSTGRES=1
elif [ "${CI:-}" = "true" ]; then
  echo "run-tests: no PostgreSQL server; CI runs the PostgreSQL tests, so this is a failure" >&2
  [ "$started" = "1" ] && bash scripts/docker-down.sh
  exit 1
else
  echo "run-tests: no PostgreSQL server: the postgres tests will be skipped" >&2
fi
# A private OCI registry (Debian's docker-registry) for the sandbox snapshots of several machines.
reg=0
if source scripts/registry-up.sh; then
  reg=1
  export UNSEE_REQUIRE_REGISTRY=1
elif [ "${CI:-}" = "true" ]; then
  echo "run-tests: no OCI registry; CI runs the registry tests, so this is a failure" >&2
  bash scripts/postgres-down.sh
  [ "$started" = "1" ] && bash scripts/docker-down.sh
  exit 1
else
  echo "run-tests: no OCI registry: the registry tests will be skipped" >&2
fi
# Arize Phoenix (a trace UI taking OTLP, from its own cached venv) for tests/view/test_trace_ui_phoenix.py.
phx=0
if source scripts/phoenix-up.sh; then
  phx=1
  export UNSEE_REQUIRE_PHOENIX=1
elif [ "${CI:-}" = "true" ]; then
  echo "run-tests: no Arize Phoenix; CI runs the trace-UI test, so this is a failure" >&2
  [ "$reg" = "1" ] && bash scripts/registry-down.sh
  bash scripts/postgres-down.sh
  [ "$started" = "1" ] && bash scripts/docker-down.sh
  exit 1
else
  echo "run-tests: no Arize Phoenix: the phoenix tests will be skipped" >&2
fi
# Headless Chromium for the page tests (tests/view): Debian's package, installed when missing (root).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "run-tests: installing chromium (Debian) for the page tests" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2 \
    || echo "run-tests: could not install chromium: the page tests will fail" >&2
fi
# With no arguments: the suite on two workers (a module whole to one of them), then the
# modules that must run alone (tests/conftest.py: SERIAL_MODULES); the slowest tests printed
# (CI's log says where the time goes). With arguments: pytest with them, as they are.
pytest_all() {  # pytest_all MARKS [pytest arguments]: both parts (MARKS "": every test); the first failure's status
  local sel=${1:+($1) and }; shift
  .venv/bin/python -m pytest -n 2 --dist loadgroup -m "${sel}not serial" "$@"
  local a=$?
  .venv/bin/python -m pytest -m "${sel}serial" "$@"
  local b=$?
  [ $b -eq 5 ] && b=0  # (no serial test in that selection)
  [ $a -ne 0 ] && return $a
  return $b
}
full=0
rc=0
if [ $# -eq 0 ]; then
  full=1
  pytest_all "" --durations=30 || rc=$?
else
  .venv/bin/python -m pytest "$@" || rc=$?
fi
if [ "$full" = "1" ] && [ "$pg" = "1" ]; then
  echo "run-tests: the record, forget and erasure suites again, stores on PostgreSQL" >&2
  shapes=()
  for f in any_graph nested_runs state_flow state_tools run_inputs async_replay mcp_tools; do
    shapes+=(--ignore "tests/forget/test_$f.py")
  done
  (export UNSEE_TEST_STORE=postgres
   pytest_all "not model and not gpu and not postgres and not docker" -q \
     --durations=15 "${shapes[@]}" tests/middleware tests/forget tests/erasure)
  rc2=$?
  [ $rc -eq 0 ] && rc=$rc2
fi
bash scripts/postgres-down.sh
[ "$reg" = "1" ] && bash scripts/registry-down.sh
[ "$phx" = "1" ] && bash scripts/phoenix-down.sh
if [ "$started" = "1" ]; then bash scripts/docker-down.sh; fi
exit $rc
