#!/usr/bin/env bash
# Stop the dockerd that scripts/docker-up.sh started and remove its temp dir.
# Finds it through UNSEE_DOCKERD_DIR (exported by docker-up.sh) or the state
# file it left in ${TMPDIR:-/tmp}/unsee-dockerd.current. Does nothing for a
# daemon it did not start.
set -u
state="${TMPDIR:-/tmp}/unsee-dockerd.current"
dir="${UNSEE_DOCKERD_DIR:-}"
if [ -z "$dir" ] && [ -f "$state" ]; then dir="$(cat "$state")"; fi
case "$dir" in
  /tmp/unsee-dockerd.*) ;;
  *) echo "docker-down: no dockerd started by docker-up.sh" >&2; exit 0 ;;
esac
[ -d "$dir" ] || { rm -f "$state"; exit 0; }
sock="unix://$dir/docker.sock"
# --live-restore keeps containers running after the daemon stops: remove them first.
if command -v docker >/dev/null 2>&1 && [ -S "$dir/docker.sock" ]; then
  ids="$(DOCKER_HOST=$sock timeout 20 docker ps -aq 2>/dev/null)"
  [ -n "$ids" ] && DOCKER_HOST=$sock timeout 60 docker rm -f $ids >/dev/null 2>&1
fi
pid=""
[ -f "$dir/dockerd.pid" ] && pid="$(cat "$dir/dockerd.pid")"
[ -z "$pid" ] && [ -f "$dir/dockerd.launcher.pid" ] && pid="$(cat "$dir/dockerd.launcher.pid")"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
fi
# Leftover mounts (overlay layers, netns) under the temp dir, deepest first.
grep -o " $dir[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
rm -rf "$dir"
[ -f "$state" ] && [ "$(cat "$state")" = "$dir" ] && rm -f "$state"
echo "docker-down: stopped dockerd and removed $dir" >&2
exit 0
