# Glue for bloomguard's integration tests (tests/*.test): the shell library
# of scripts/lib (checks.sh's checks, pg.sh, daemon.sh, http.sh, proxy.sh),
# plus what only tests do: a temp dir and a database per test, cleaned up
# however the test ends; bloomguard, examples/user_service and proxies on
# fresh ports; the client tricks tests/nginx.test and tests/caddy.test
# play through a proxy.  Source it after `set -euo pipefail`; do not run it.
# Needs bash, curl, psql and jq.

# Byte-wise string handling (ids are bytes, lengths are byte counts).
export LC_ALL=C

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
BG_TOP=$top_srcdir
BG_NAME=$(basename "$0" .test)
BG_SCRIPT=$BG_NAME
# shellcheck source=scripts/lib/common.sh
. "$top_srcdir/scripts/lib/common.sh"
# shellcheck source=scripts/lib/checks.sh
. "$top_srcdir/scripts/lib/checks.sh"
# A helper of the library that cannot go on ends the test as a hard error.
bg_die() { bail "$*"; }

# BLOOMGUARD_BIN: test another build or an installed daemon instead.
BG_BIN=${BLOOMGUARD_BIN:-$top_builddir/src/bloomguard}
BG_CONF=$top_srcdir/conf/bloomguard.conf

BG_DB=
BG_WORK=
BG_URL=
# Background helpers without a name (relays, probes, socat): killed by cleanup.
BG_BGPIDS=()

# ----------------------------------------------------------------- setup --

# require_pg: PostgreSQL (via the PG* environment) must answer, and curl,
# psql and jq be there (prerequisite_missing otherwise); the daemon must be
# built.
require_pg() {
    need_tool curl "curl is not installed"
    need_tool psql "psql is not installed"
    need_tool jq "jq is not installed"
    psql -qXAt -c 'select 1' >/dev/null 2>&1 \
        || prerequisite_missing "PostgreSQL is not reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-}): psql -c 'select 1' failed"
    [ -x "$BG_BIN" ] || bail "$BG_BIN does not exist: build it first (make)"
}

# setup_test: temp dir and the cleanup trap.  Call once, first.
setup_test() {
    BG_WORK=$(mktemp -d "${TMPDIR:-/tmp}/bloomguard-$BG_NAME.XXXXXX")
    # Say which command failed when set -e ends the test early.
    set -E
    trap 'bg_rc=$?; [ "$BASHPID" != $$ ] || printf "Bail out! line %s: \"%s\" failed with status %s\n" "$LINENO" "$BASH_COMMAND" "$bg_rc"' ERR
    bg_at_exit cleanup
}

# own_cluster: a cluster of this test's own (in $BG_WORK/pg, stopped by
# cleanup) instead of the suite's, for a test whose checks rest on the
# cluster-wide snapshot horizon: another test's long transaction (an xid
# held, as tests/feedlock.test's lock holds one for 25 s) would hold back
# every prune, position and new logical slot of the shared cluster.  Call
# after setup_test, before make_db.
own_cluster() {
    chmod 755 "$BG_WORK"
    bg_pg_start "$BG_WORK/pg"
    BG_OWN_PG=1
}

# Private clusters, for a test that stops, copies, restores or promotes its
# own servers (tests/logical.test, fork.test, timeline.test): each in
# DIR/pg, listening on the unix socket DIR/.s.PGSQL.PORT only; cleanup stops
# every one started (a test database made on one goes with it).
BG_PRIVATE_PGS=()
# private_pg_dir DIR: DIR, postgres's (for a pg_basebackup into DIR/pg).
private_pg_dir() {
    bg_pg_bin
    chmod 755 "$BG_WORK"
    mkdir -p "$1"
    [ "$(id -u)" -ne 0 ] || chown postgres: "$1"
}
# private_pg_init DIR: initdb DIR/pg (trust, C.UTF-8), as postgres.
private_pg_init() {
    private_pg_dir "$1"
    bg_as_pg "$BG_PG_BIN/initdb" -D "$1/pg" --locale=C.UTF-8 -U postgres -A trust >"$1/initdb.log" 2>&1 \
        || { cat "$1/initdb.log"; bail "initdb of $1 failed"; }
}
# private_pg_up DIR PORT [OPTIONS]: start DIR/pg (OPTIONS: more postgres
# options, "-c name=value ..."); its log is DIR/pg.log.
private_pg_up() {
    [[ " ${BG_PRIVATE_PGS[*]} " == *" $1 "* ]] || BG_PRIVATE_PGS+=("$1")
    bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$1/pg" -l "$1/pg.log" -w -t 60 \
        -o "-k $1 -c listen_addresses='' -p $2 ${3:-}" start >/dev/null
}
# private_pg_down DIR [MODE]: stop it (fast by default).
private_pg_down() { bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$1/pg" -m "${2:-fast}" -w -t 60 stop >/dev/null; }

# start_relay SOCKET [PORT]: tests/tcprelay to the unix socket SOCKET (on
# PORT: where an earlier relay stood), killed by cleanup; sets relay (its
# pid: USR1 freezes, USR2 thaws, TERM cuts every connection) and rport.
start_relay() {
    rm -f "$BG_WORK/relay.port"
    "$top_builddir/tests/tcprelay" "$BG_WORK/relay.port" "$1" ${2:+"$2"} &
    relay=$!
    BG_BGPIDS+=("$relay")
    bg_wait_for 5 test -s "$BG_WORK/relay.port" || bail "tcprelay did not start"
    rport=$(cat "$BG_WORK/relay.port")
}

# make_db: create bgtest_<name>_<pid> (dropped by cleanup) and set BG_DB,
# the database of bg_psql and bg_pg_sample.
make_db() {
    BG_DB=bgtest_${BG_NAME}_$$
    createdb "$BG_DB" || bail "createdb $BG_DB failed"
}

# pg_test [--own]: the start of most tests: require_pg, setup_test, make_db,
# and PGDATABASE (plain psql's database) set to the test's.  --own: on a
# cluster of the test's own (own_cluster), for checks another test's
# transactions or WAL would disturb.
pg_test() {
    require_pg
    setup_test
    [ "${1:-}" != --own ] || own_cluster
    make_db
    export PGDATABASE=$BG_DB
}

# need_built VAR TOOL: VAR is tests/TOOL of the build, which must be there
# (make check builds it).  Call after setup_test.
need_built() {
    printf -v "$1" '%s' "$top_builddir/tests/$2"
    [ -x "${!1}" ] || bail "tests/$2 is not built (make check builds it)"
}

# test_role ROLE: a login role of the test's own (roles are the cluster's,
# not the database's), dropped by cleanup with what it owns in BG_DB.
BG_ROLES=()
test_role() {
    BG_ROLES+=("$1")
    bg_psql -c "CREATE ROLE $1 LOGIN" >/dev/null
}

cleanup() {
    local rc=$? name pid d
    trap - EXIT
    # Under set -e a failing command would end a trap early: finish the job.
    set +e
    for pid in "${BG_BGPIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    bg_stop_all
    for pid in "${BG_BGPIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$BG_WORK" ]; then
        for name in "${!BG_LOG[@]}"; do
            [ -f "${BG_LOG[$name]}" ] || continue
            printf '# --- last lines of daemon %s log (%s)\n' "$name" "${BG_LOG[$name]}"
            tail -n 40 "${BG_LOG[$name]}" | sed 's/^/#   /'
        done
    fi
    for name in "${BG_ROLES[@]}"; do
        psql -qX -d "$BG_DB" -c "DROP OWNED BY $name" >/dev/null 2>&1
        psql -qX -d "$BG_DB" -c "DROP ROLE IF EXISTS $name" >/dev/null 2>&1
    done
    for d in "${BG_PRIVATE_PGS[@]}"; do
        [ ! -f "$d/pg/postmaster.pid" ] || private_pg_down "$d" immediate 2>/dev/null
        [ "${PGHOST:-}" != "$d" ] || BG_DB=
    done
    if [ -n "${BG_OWN_PG:-}" ]; then
        bg_pg_stop
    elif [ -n "$BG_DB" ]; then
        bg_pg_drop_slots "$BG_DB"
        dropdb --if-exists --force "$BG_DB" 2>/dev/null || dropdb --if-exists "$BG_DB" || true
    fi
    # BG_TEST_KEEP=1: a failed test's work dir (its daemons' whole logs) stays.
    if [ -n "$BG_WORK" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "${BG_TEST_KEEP:-}" ]; then
        printf '# kept %s\n' "$BG_WORK"
    elif [ -n "$BG_WORK" ]; then
        rm -rf "$BG_WORK"
    fi
    exit "$rc"
}

# ---------------------------------------------------------------- daemon --

# test_method: the follow method this test's daemons run: BG_METHOD
# (scripts/test --method), else what method auto takes on scripts/test's
# server, whose wal_level is logical.
test_method() { echo "${BG_METHOD:-logical}"; }

# start_daemon NAME [--section.key=value ...]: start the daemon on port 0
# against $BG_DB with debug logging (an argument overriding conninfo, listen
# or log.level replaces the default one; BG_FILE_LOG_LEVEL=1 leaves the level
# to the config file, as an override would outlive a SIGHUP), wait (30 s at most) for its
# "listening on http://HOST:PORT" line (HOST may be 0.0.0.0: the tests still
# connect to 127.0.0.1), set BG_PID/BG_PORT/BG_LOG[NAME] (daemon.sh) and
# point BG_URL at it.  Must run in the test's own shell (not $(...)); stop
# it with bg_stop NAME [SIGNAL], which sets BG_EXIT.
start_daemon() {
    local name=$1; shift
    local args=(-c "$BG_CONF") a have_ci=0 have_listen=0 have_level=0 have_method=0 have_stale=0
    for a in "$@"; do
        case $a in
            --postgres.conninfo=*) have_ci=1 ;;
            --server.listen=*) have_listen=1 ;;
            --log.level=*) have_level=1 ;;
            --sync.method=*) have_method=1 ;;
            --sync.max_staleness=*) have_stale=1 ;;
        esac
    done
    # A test of staleness sets max_staleness itself; the others check exact
    # answers, and on a loaded 2-core machine (tests three at a time) a
    # follower's proof can lag the 2 s default: the daemon would then
    # honestly answer "maybe" where the test wants a 404.
    [ $have_stale = 1 ] || args+=(--sync.max_staleness=30)
    # BG_METHOD: the follow method the suite runs under (scripts/test --method).
    [ $have_method = 1 ] || [ -z "${BG_METHOD:-}" ] || args+=(--sync.method="$BG_METHOD")
    [ $have_listen = 1 ] || args+=(--server.listen=127.0.0.1:0)
    [ $have_ci = 1 ] || args+=(--postgres.conninfo="dbname=$BG_DB")
    [ $have_level = 1 ] || [ "${BG_FILE_LOG_LEVEL:-0}" = 1 ] || args+=(--log.level=debug)
    local log=$BG_WORK/$name.log
    note "start $name: bloomguard ${args[*]} $*"
    # A fresh log: its first "listening on" line is this start's.
    : >"$log"
    bg_spawn "$name" "$log" "$BG_BIN" "${args[@]}" "$@"
    bg_listen_port "$name" 30
    BG_URL=http://127.0.0.1:${BG_PORT[$name]}
    note "daemon $name: pid ${BG_PID[$name]}, $BG_URL"
}

# use_daemon NAME: point BG_URL at that daemon.
use_daemon() { BG_URL=http://127.0.0.1:${BG_PORT[$1]}; }

# wait_ready [SECONDS]: poll BG_URL's /readyz until 200 (default 30 s);
# false on timeout, with the last answer in HTTP_*.
wait_ready() { bg_wait_for "${1:-30}" _readyz_200; }
_readyz_200() { http GET /readyz; [ "$HTTP_STATUS" = 200 ]; }

# shellcheck source=tests/lib/proxy.sh
. "$top_srcdir/tests/lib/proxy.sh"

# ------------------------------------------------- clients of the library --
# The language clients of published filters (clients/*: tests/pyclient.test,
# tests/goclient.test) run their own test suites against a real daemon.

# libbloomguard_usable: skip (exit 77) when libbloomguard is built with a
# sanitizer (scripts/test --sanitize): a process without the sanitizer's
# runtime (nginx, python, a Go program) cannot load it.  Not a missing
# prerequisite: this build cannot run the test (tests/check_publish covers
# the library under the sanitizers).
# libbloomguard_sanitized: true when it is.  grep reads all that nm says:
# under pipefail, grep -q's early exit could fail nm (SIGPIPE), which read
# as "not sanitized" and built a client that cannot link.
libbloomguard_sanitized() {
    nm -D "$top_builddir/lib/.libs/libbloomguard.so" 2>/dev/null | grep -E ' U __(asan|tsan|ubsan)_' >/dev/null
}
libbloomguard_usable() {
    if libbloomguard_sanitized; then
        printf 'SKIP: libbloomguard is built with a sanitizer, which %s cannot load\n' "$1"
        exit 77
    fi
}

# client_daemon ROWS STALENESS: a database of ROWS sample users (text ids
# 1..ROWS) and a daemon (main) publishing its filter in $BG_WORK/run with
# max_staleness STALENESS; exports what the clients' suites read
# (BLOOMGUARD_TEST_FILTER, _URL, _PID, _ROWS, _STALENESS) and
# LD_LIBRARY_PATH to the build's libbloomguard.
client_daemon() {
    make_db
    bg_pg_sample "$1"
    bg_pg_watch users id
    mkdir -p "$BG_WORK/run"
    start_daemon main --server.publish_dir="$BG_WORK/run" --sync.max_staleness="$2" \
        --sync.min_rebuild_interval=0 --log.level=info
    wait_ready 30 || bail "/readyz did not answer 200 within 30 s (last: $HTTP_STATUS $HTTP_BODY)"
    export BLOOMGUARD_TEST_FILTER=$BG_WORK/run/default.bgf BLOOMGUARD_TEST_URL=$BG_URL \
        BLOOMGUARD_TEST_PID=${BG_PID[main]} BLOOMGUARD_TEST_ROWS=$1 BLOOMGUARD_TEST_STALENESS=$2
    export LD_LIBRARY_PATH=$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    [ -f "$BLOOMGUARD_TEST_FILTER" ] || bail "the daemon published no $BLOOMGUARD_TEST_FILTER"
}
# ------------------------------------------------------ published filters --
# Readers of the files [server] publish_dir holds (docs/zerohop.md):
# tests/zerohop.test, tests/libagree.test, tests/pubattack.test.

# libclient_build: tests/libclient.c built as a user builds a client of
# libbloomguard (cc and pkg-config, the build tree's .pc), as
# $BG_WORK/libclient; run it with libclient_run PATH [ARGS].  Skips the test
# when libbloomguard is built with a sanitizer, whose runtime a plain
# program cannot load (tests/check_publish covers the library under the
# sanitizers).  Call after setup_test.
libclient_build() {
    need_tool cc "no C compiler (gcc) for the library client"
    need_tool pkg-config "pkg-config is not installed"
    libbloomguard_usable "a plain program"
    LIBCLIENT=$BG_WORK/libclient
    # shellcheck disable=SC2046  # pkg-config's words are meant to split
    cc -O2 -o "$LIBCLIENT" "$top_srcdir/tests/libclient.c" \
        $(PKG_CONFIG_PATH="$top_builddir/lib" pkg-config --cflags --libs bloomguard) \
        || bail "the library client does not build against libbloomguard"
    chmod 755 "$LIBCLIENT"
}
libclient_run() { LD_LIBRARY_PATH="$top_builddir/lib/.libs" "$LIBCLIENT" "$@"; }

# ------------------------------------------------------ growing a table --
# grow_table N TABLE ROW SECONDS: N transactions of 10,000 rows each into
# TABLE, ids 10001 on (ROW: a row's select list, of the id g, e.g. "g::text,
# 'grown'"); then a check that the current daemon's follower told the
# filter of all of them (.notifications) within SECONDS.
# For tests/growth.test and tests/sizing.test.
grow_table() {
    local i lo
    for ((i = 0; i < $1; i++)); do
        lo=$((10001 + i * 10000))
        bg_psql -c "INSERT INTO $2 SELECT $3 FROM generate_series($lo, $((lo + 9999))) g" >/dev/null
    done
    GROWN_ROWS=$(($1 * 10000))
    check_cmd "the follower added the $GROWN_ROWS rows" bg_wait_for "$4" _grown
}
_grown() { num_cmp "$(stats_get .notifications)" '>=' "$GROWN_ROWS"; }

# start_inserter FIRST [NAME]: in the background (its pid in INS, stopped by
# stop_inserter or the cleanup), 10 rows of users (ids FIRST on, name NAME,
# 'f' by default) every 0.2 s, each batch's ids and commit time logged to
# $W/inserted (emptied first).  For the fleet tests' writes all along.
start_inserter() {
    : >"$W/inserted"
    (
        local i=$1 t k
        while :; do
            bg_psql -c "INSERT INTO users SELECT g::text, '${2:-f}' FROM generate_series($i, $((i + 9))) g" >/dev/null
            t=$(date +%s.%N)
            for ((k = i; k < i + 10; k++)); do echo "$t $k"; done >>"$W/inserted"
            i=$((i + 10))
            sleep 0.2
        done
    ) &
    INS=$!
    BG_BGPIDS+=("$INS")
}
stop_inserter() {
    kill "$INS"
    wait "$INS" 2>/dev/null || true
}
