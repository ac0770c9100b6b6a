#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback, for the shared Optuna study and the shared call cache
# (needs the Debian package postgresql; `make setup-cluster` installs it).
#   scripts/local_postgres.sh start   # prints the URL: postgresql://postgres@127.0.0.1:55432/promptlottery
#   scripts/local_postgres.sh stop    # stops the server and removes its data dir
# Data in $LOCAL_PG_DIR (default /tmp/promptlottery-pg), port $LOCAL_PG_PORT (default 55432); trust
# authentication, listening on 127.0.0.1 only. Run as root it runs the server as the `postgres` user.
set -euo pipefail

DIR=${LOCAL_PG_DIR:-/tmp/promptlottery-pg}
PORT=${LOCAL_PG_PORT:-55432}
DB=promptlottery
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

die() { echo "local_postgres: $*" >&2; exit 1; }
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start() {
  [ -x "$BIN/pg_ctl" ] || die "PostgreSQL not found under /usr/lib/postgresql: apt-get install postgresql"
  if [ -f "$DIR/data/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null; then
    echo "local_postgres: already running in $DIR"
  else
    mkdir -p "$DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$DIR"
    as_owner "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >"$DIR/initdb.log"
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
      -o "-h 127.0.0.1 -p $PORT -k $DIR -c max_connections=200" start >/dev/null
    as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
  fi
  echo "local_postgres: up dir=$DIR"
  echo "postgresql://postgres@127.0.0.1:$PORT/$DB"
}

stop() {
  if [ -f "$DIR/data/postmaster.pid" ]; then
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
  fi
  rm -rf "$DIR"
  echo "local_postgres: stopped dir=$DIR"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
