#!/usr/bin/env bash
# Stop the Phoenix scripts/phoenix-up.sh started, and remove its temp dir (its database and log).
# The virtualenv stays (reused by the next run).
[ "${UNSEE_PHOENIX_STARTED:-0}" = "1" ] && [ -n "${UNSEE_PHOENIX_DIR:-}" ] || exit 0
case "$UNSEE_PHOENIX_DIR" in /tmp/unsee-phoenix.*) ;; *) exit 0 ;; esac
pid="$(cat "$UNSEE_PHOENIX_DIR/phoenix.pid" 2>/dev/null)"
if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
fi
rm -rf "$UNSEE_PHOENIX_DIR"
exit 0
