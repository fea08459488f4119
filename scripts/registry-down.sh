#!/usr/bin/env bash
# Stop the private registry scripts/registry-up.sh started, and remove its dir.
[ "${UNSEE_REGISTRY_STARTED:-0}" = "1" ] && [ -n "${UNSEE_REGISTRY_DIR:-}" ] || exit 0
case "$UNSEE_REGISTRY_DIR" in /tmp/unsee-registry.*) ;; *) exit 0 ;; esac
pid="$(cat "$UNSEE_REGISTRY_DIR/registry.pid" 2>/dev/null)"
[ -n "$pid" ] && kill "$pid" 2>/dev/null
rm -rf "$UNSEE_REGISTRY_DIR"
exit 0
