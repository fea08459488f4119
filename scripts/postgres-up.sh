#!/usr/bin/env bash
# Start a private PostgreSQL cluster for the tests. SOURCED by scripts/run-tests.sh
# (and usable by hand: `source scripts/postgres-up.sh`); it never `exit`s the calling
# shell and returns non-zero on failure.
#
# Installs Debian's `postgresql` package when no server binaries are found (root only),
# makes a cluster in a temp dir (initdb, as the `postgres` user when run as root:
# initdb refuses root), and starts it listening on a unix socket in that dir only
# (listen_addresses='': no TCP port to clash with anything). Exports:
#   UNSEE_TEST_PG_URL  a libpq URL of the cluster's `postgres` database (superuser)
#   UNSEE_PG_DIR       the temp dir (data/, run/ with the socket, log)
#   UNSEE_PG_CTL       a script running pg_ctl on this cluster, with its options
#                      (`$UNSEE_PG_CTL start|stop|restart [pg_ctl args]`; tests stop and restart it)
#   UNSEE_PG_STARTED=1 when this script started it; scripts/postgres-down.sh stops it.

_unsee_pg_up() {
  local bin dir as=()
  _unsee_pg_bin() {  # the newest server's bin dir (the client package alone has no initdb)
    local f; f="$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1)"; [ -n "$f" ] && dirname "$f"
  }
  bin="$(_unsee_pg_bin)"
  if [ -z "$bin" ]; then
    if [ "$(id -u)" != "0" ]; then
      echo "postgres-up: no PostgreSQL server installed and not root; PostgreSQL tests will be skipped" >&2
      return 1
    fi
    echo "postgres-up: installing postgresql" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2 || {
      echo "postgres-up: could not install postgresql" >&2; return 1; }
    bin="$(_unsee_pg_bin)"
    [ -n "$bin" ] || { echo "postgres-up: postgresql installed, but no initdb found" >&2; return 1; }
  fi
  dir="$(mktemp -d /tmp/unsee-pg.XXXXXX)" || return 1
  chmod 755 "$dir"
  mkdir -p "$dir/run"
  if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres || return 1
    chown -R postgres "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 || {
    echo "postgres-up: initdb failed (see $dir/initdb.log)" >&2; return 1; }
  # fsync off: a test cluster is thrown away, and a private one on a 2-core VM is slow enough
  cat >"$dir/pg_ctl.sh" <<CTL
#!/usr/bin/env bash
exec ${as[*]} $bin/pg_ctl -D $dir/data -l $dir/server.log -w -t 60 \
  -o "-k $dir/run -c listen_addresses='' -c fsync=off -c max_connections=400" "\$@"
CTL
  chmod 755 "$dir/pg_ctl.sh"
  export UNSEE_PG_CTL="$dir/pg_ctl.sh"
  "$UNSEE_PG_CTL" start >/dev/null || {
    echo "postgres-up: the server did not start (see $dir/server.log)" >&2; return 1; }
  export UNSEE_PG_DIR="$dir"
  export UNSEE_TEST_PG_URL="postgresql://postgres@/postgres?host=$dir/run"
  export UNSEE_PG_STARTED=1
  echo "postgres-up: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on $dir/run" >&2
}

_unsee_pg_up
