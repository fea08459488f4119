#!/usr/bin/env bash
# Stop the private PostgreSQL cluster scripts/postgres-up.sh started, and remove its dir.
[ "${UNSEE_PG_STARTED:-0}" = "1" ] && [ -n "${UNSEE_PG_DIR:-}" ] || exit 0
"$UNSEE_PG_CTL" stop -m immediate >/dev/null 2>&1 || true
rm -rf "$UNSEE_PG_DIR"
