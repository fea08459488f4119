#!/usr/bin/env bash
# Runs the test suite. Starts a Docker daemon for the sandbox tests when none
# is reachable (installing docker.io if root), builds the sandbox images, and
# stops the daemon it started. Docker tests then must pass (UNSEE_REQUIRE_DOCKER=1
# turns a missing daemon into failures, not skips); in CI (CI=true) a daemon
# that cannot be had fails the run before pytest starts.
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
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$started" = "1" ]; then bash scripts/docker-down.sh; fi
exit $rc
