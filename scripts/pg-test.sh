#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests: as the postgres user,
# in a temporary directory, on a free port, listening on 127.0.0.1 only.
#
#   eval "$(scripts/pg-test.sh start)"   # exports CORRAL_TEST_POSTGRES and CORRAL_TEST_PGDIR
#   go test ./internal/store/...
#   scripts/pg-test.sh stop "$CORRAL_TEST_PGDIR"
#
# "start" prints shell export lines on stdout (and nothing else there);
# progress goes to stderr. Needs Debian's postgresql package (initdb and
# pg_ctl under /usr/lib/postgresql/*/bin) and root or the postgres user.
set -euo pipefail

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$d" ] || { echo "pg-test: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  echo "$d"
}

as_pg() { # run a command as the postgres user
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

freeport() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $(( 20000 + RANDOM % 20000 ))
}

start() {
  local bin dir port
  bin=$(bindir)
  dir=$(mktemp -d /tmp/corral-pg.XXXXXX)
  chown postgres: "$dir" 2>/dev/null || true
  port=$(freeport)
  as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >&2
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2
  as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres corral_test >&2
  echo "export CORRAL_TEST_POSTGRES='postgres://postgres@127.0.0.1:$port/corral_test?sslmode=disable'"
  echo "export CORRAL_TEST_PGDIR='$dir'"
}

stop() {
  local dir=${1:-${CORRAL_TEST_PGDIR:-}}
  [ -n "$dir" ] && [ -d "$dir/data" ] || { echo "pg-test: no cluster dir given" >&2; exit 1; }
  as_pg "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
