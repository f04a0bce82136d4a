# A throwaway PostgreSQL cluster on a private unix socket (scripts/test,
# scripts/demo, bench), and the psql calls every script and test makes on
# a database: bloomguard's schema, sample rows and NOTIFY triggers.
# Sourced by common.sh; needs bg_die.

BG_PG_BIN=
bg_pg_bin() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && BG_PG_BIN=$d
    done
    [ -n "$BG_PG_BIN" ] || bg_die "PostgreSQL server binaries not found"
}

# Run a PostgreSQL server command as the postgres user when we are root
# (initdb and pg_ctl refuse to run as root).
bg_as_pg() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# bg_pg_start DIR: create and start a cluster in DIR/pg with its socket in
# DIR, wal_level = logical (what bloomguard's default follow method reads);
# exports PGHOST, PGPORT, PGUSER, PGDATABASE for libpq and psql.  Commits
# are not durable (fsync, synchronous_commit and full_page_writes off: tests
# and most benchmarks measure CPU, not the disk) unless BG_PG_DURABLE=yes,
# which keeps PostgreSQL's defaults (bench/write_cost: what a follower costs
# the writers of a real server).
bg_pg_start() {
    local dir=$1
    bg_pg_bin
    mkdir -p "$dir/pg"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir" "$dir/pg"
    chmod 755 "$dir"
    bg_as_pg "$BG_PG_BIN/initdb" -D "$dir/pg" --locale=C.UTF-8 -U postgres -A trust >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; bg_die "initdb failed"; }
    BG_PG_DIR=$dir
    bg_pg_ctl start || { cat "$dir/pg.log" >&2; bg_die "PostgreSQL did not start"; }
    export PGHOST=$dir PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
}

# bg_pg_ctl start|stop: start or (fast) stop the cluster of bg_pg_start again.
bg_pg_ctl() {
    local dir=$BG_PG_DIR
    local o="-k $dir -c listen_addresses='' -p 5432 -c max_connections=200 -c wal_level=logical -c max_replication_slots=40 -c max_wal_senders=40"
    [ "${BG_PG_DURABLE:-}" = yes ] || o+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    case $1 in
        start) bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 -o "$o" start >/dev/null ;;
        stop) bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$dir/pg" -m fast -w -t 60 stop >/dev/null ;;
    esac
}

bg_pg_stop() {
    [ -n "${BG_PG_DIR:-}" ] && [ -d "$BG_PG_DIR/pg" ] || return 0
    bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$BG_PG_DIR/pg" -m immediate -w stop >/dev/null 2>&1 || true
}

# bg_pg_drop_slots DB: drop the replication slots of database DB (a
# bloomguard with snapshots leaves a permanent one; a database with a slot
# cannot be dropped).  Waits up to 10 s for a walsender still on one to go.
bg_pg_drop_slots() {
    local i left
    for ((i = 0; i < 100; i++)); do
        left=$(psql -qXAt -d postgres -v db="$1" <<'SQL' 2>/dev/null
SELECT count(pg_drop_replication_slot(slot_name)) FILTER (WHERE NOT active),
       count(*) FILTER (WHERE active)
  FROM pg_replication_slots WHERE database = :'db';
SQL
        ) || return 0
        case $left in *"|0") return 0 ;; esac
        sleep 0.1
    done
}

# bg_psql ARGS...: psql on BG_DB (a test's own database; when empty,
# libpq's default: PGDATABASE), quiet, stopping at the first error.
bg_psql() { psql -qX -v ON_ERROR_STOP=1 ${BG_DB:+-d "$BG_DB"} "$@"; }

# bg_pg_sample ROWS: sql/schema.sql's users table with ids '1'..ROWS.
bg_pg_sample() {
    # One transaction: a bloomguard already retrying never sees the tables
    # created but still empty (tests/pgdown.test loaded 0 rows that way).
    bg_psql -1 -v rows="$1" -f "$BG_TOP/sql/schema.sql" -f "$BG_TOP/sql/sample.sql" >/dev/null \
        || bg_die "schema.sql or sample.sql failed"
}

# bg_pg_watch TABLE COLUMN [CHANNEL]: let a bloomguard follow COLUMN's new
# IDs: sql/notify.sql's bloomguard_watch with method $BG_METHOD (default
# auto: logical where wal_level = logical, else the feed; notify: the NOTIFY
# trigger on CHANNEL, default bloomguard).
bg_pg_watch() {
    PGOPTIONS='-c client_min_messages=warning' bg_psql -f "$BG_TOP/sql/notify.sql" >/dev/null \
        || bg_die "notify.sql failed"
    bg_psql -c "SELECT $(bg_watch_sql "$@")" >/dev/null || bg_die "$(bg_watch_sql "$@") failed"
}

# bg_watch_sql TABLE COLUMN [CHANNEL]: bg_pg_watch's call, for a script's own SQL.
bg_watch_sql() {
    printf "bloomguard_watch('%s', '%s', '%s', method => '%s')" "$1" "$2" "${3:-bloomguard}" "${BG_METHOD:-auto}"
}

# bg_pg_grant ROLE: what a bloomguard role needs to follow tables by any
# method, besides SELECT on the tables (the caller's own GRANT): read and
# prune the change feed (bloomguard_feed_grant, method feed) and replicate
# (REPLICATION, method logical).  Needs bg_pg_watch (or notify.sql) first.
bg_pg_grant() {
    bg_psql -c "SELECT bloomguard_feed_grant('$1'); ALTER ROLE \"$1\" REPLICATION" >/dev/null \
        || bg_die "granting $1 what bloomguard needs failed"
}
