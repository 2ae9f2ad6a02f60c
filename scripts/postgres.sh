#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster on loopback, for tests
# (with pg_stat_statements preloaded: vmaas-bench counts what a create sends).
#   scripts/postgres.sh start DIR   prints the database URL
#   scripts/postgres.sh stop DIR
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}

pgbin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$d" ] || { apt_install postgresql >&2; d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1); }
    echo "$d"
}

# PostgreSQL refuses to run as root: run it as the postgres user then.
run_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case $cmd in
start)
    bin=$(pgbin)
    port=$(free_port)
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    run_pg "$bin/initdb" -D "$dir/data" -A trust -U vmaas -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    run_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=300 -c shared_preload_libraries=pg_stat_statements" start >/dev/null
    echo "postgres://vmaas@127.0.0.1:$port/postgres"
    ;;
stop)
    bin=$(pgbin)
    [ -d "$dir/data" ] && run_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*) die "unknown command $cmd" ;;
esac
