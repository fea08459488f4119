#!/usr/bin/env bash
# Runs the test suite. Starts a Docker daemon for the sandbox tests when none
# is reachable (installing docker.io if root), and stops the one it started.
set -uo pipefail
cd "$(dirname "$0")/.."
# One converted copy of the local model for every test directory and run.
export UNSEE_MODEL_CACHE="${UNSEE_MODEL_CACHE:-$PWD/.unsee-cache}"
started=0
if [ -x scripts/docker-up.sh ]; then
  if source scripts/docker-up.sh; then started=${UNSEE_DOCKERD_STARTED:-0}; fi
fi
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$started" = "1" ] && [ -x scripts/docker-down.sh ]; then bash scripts/docker-down.sh; fi
exit $rc
