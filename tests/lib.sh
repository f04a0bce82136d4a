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
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
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

# ----------------------------------------------------------------- proxies --
# A real reverse proxy (nginx, Caddy) with a shipped example config in front
# of examples/user_service, bloomguard as its guard: tests/nginx.test and
# tests/caddy.test.

# start_service NAME: examples/user_service on port 0 against $BG_DB; sets
# BG_PID/BG_PORT/BG_LOG[NAME] like start_daemon (cleanup stops it).
start_service() {
    local name=$1 log=$BG_WORK/$1.log
    local bin=$top_builddir/examples/user_service
    [ -x "$bin" ] || bail "$bin does not exist: build it first (make)"
    : >"$log"
    bg_spawn "$name" "$log" "$bin" --listen 127.0.0.1:0 --conninfo "dbname=$BG_DB" --threads 2
    bg_listen_port "$name" 10
    note "$name: pid ${BG_PID[$name]}, http://127.0.0.1:${BG_PORT[$name]}"
}

# start_proxy NAME CONFIGURE: start a proxy on a free loopback port.
# CONFIGURE PORT writes its config for that port and sets PROXY_CMD (the
# command, run in the foreground) and PROXY_LOG (its log file, if it does
# not log to stderr).  Waits (10 s at most) until GET /_probe gets any HTTP
# answer; tries 3 ports when one chosen was taken meanwhile.  Sets
# BG_PID/BG_PORT/BG_LOG[NAME] and PROXY_URL; cleanup stops it.
start_proxy() {
    local name=$1 configure=$2 out=$BG_WORK/$1.out try port
    for try in 1 2 3; do
        bg_free_port port
        PROXY_CMD=() PROXY_LOG=
        "$configure" "$port"
        : >"$out"
        bg_spawn "$name" "$out" "${PROXY_CMD[@]}"
        BG_LOG[$name]=${PROXY_LOG:-$out}
        PROXY_URL=http://127.0.0.1:$port
        if bg_wait_http "$PROXY_URL/_probe" "$name" 10; then
            BG_PORT[$name]=$port
            note "$name: pid ${BG_PID[$name]}, $PROXY_URL"
            return 0
        fi
        bg_stop "$name" >/dev/null
        grep -qi 'address already in use' "${BG_LOG[$name]}" "$out" 2>/dev/null || break
    done
    sed 's/^/#   /' "${BG_LOG[$name]}" "$out" 2>/dev/null | sort -u || true
    bail "$name did not start"
}

# svc_stat FILTER: a counter from start_service's service's /stats (the one
# named "service"), e.g. svc_stat .queries.
svc_stat() {
    local body
    body=$(curl -sS --max-time 10 "http://127.0.0.1:${BG_PORT[service]}/stats")
    json_get "$body" "$1"
}

# via_proxy PATH [curl args...]: one GET through PROXY_URL; sets HTTP_*.
via_proxy() { local keep=$BG_URL; BG_URL=$PROXY_URL; http GET "$@"; BG_URL=$keep; }

# run_many FILE-OF-PATHS OUT: GET each path through PROXY_URL with one curl
# (keep-alive); OUT gets one line per request: body TAB status TAB verdict.
run_many() {
    sed "s|.*|url = \"$PROXY_URL&\"|" "$1" >"$BG_WORK/many.cfg"
    timeout 80 curl -sS --path-as-is --max-time 15 -K "$BG_WORK/many.cfg" \
        -w '\t%{http_code}\t%header{x-bloomguard}\n' >"$2" 2>"$BG_WORK/many.err" || true
}

# absent_seg PREFIX: PREFIX (a raw, percent-encoded path segment) followed
# by the first n >= 1 for which bloomguard (BG_PORT[main]) says the decoded
# id surely does not exist, so that a filter's false positive never makes a
# check below flaky.
absent_seg() {
    local n
    for ((n = 1; n < 100; n++)); do
        BG_URL=http://127.0.0.1:${BG_PORT[main]} http GET "/exists/$1$n"
        [ "$(json_get "$HTTP_BODY" .exists)" = false ] && { printf '%s%s\n' "$1" "$n"; return 0; }
    done
    bail "bloomguard calls every id $1<n> present"
}

# expect_denied DESC SEG [curl args...]: GET /user/get/SEG through the
# proxy (with the curl args: the client's tricks) is answered by the proxy
# itself: 404, X-Bloomguard: miss, {"id":...,"exists":false}; the service
# sent no query to PostgreSQL, and (when the test defines service_hits, the
# requests the proxy sent to the service) was not asked at all.
expect_denied() { expect_stopped_as '^404 miss \{"id":"[^"\\[:cntrl:]]*","exists":false\}$' "$@"; }

# expect_refused DESC SEG [curl args...]: like expect_denied, but a 414
# from the proxy (a URI longer than it takes) is as good as a miss.
expect_refused() {
    expect_stopped_as '^(404 miss \{"id":"[^"\\[:cntrl:]]*","exists":false\}|414 .*)$' "$@"
}

# expect_stopped_as ERE DESC SEG [curl args...]: expect_denied with
# "STATUS VERDICT BODY" matching ERE.
expect_stopped_as() {
    local re=$1 desc=$2 seg=$3 q0 q1 h0=0 h1=0 hits=no; shift 3
    declare -F service_hits >/dev/null && hits=yes
    q0=$(svc_stat .queries)
    [ $hits = no ] || h0=$(service_hits)
    via_proxy "/user/get/$seg" "$@"
    q1=$(svc_stat .queries)
    [ $hits = no ] || h1=$(service_hits)
    check_match "$desc: stopped by the proxy ($HTTP_STATUS)" "$HTTP_STATUS $(header X-Bloomguard) $HTTP_BODY" "$re"
    if [ $hits = yes ]; then
        check_eq "$desc: no query, no request reached the service" "0 0" "$((q1 - q0)) $((h1 - h0))"
    else
        check_eq "$desc: no query reached the database" 0 "$((q1 - q0))"
    fi
}

# expect_no_5xx DESC PATH [curl args...]: something bloomguard may not be
# able to decode: through the proxy, any answer but a 5xx (or none), and
# bloomguard still answers /healthz.
expect_no_5xx() {
    local desc=$1 path=$2 st; shift 2
    via_proxy "$path" "$@"
    st=$HTTP_STATUS
    note "$desc: $st $(header X-Bloomguard)"
    BG_URL=http://127.0.0.1:${BG_PORT[main]} http GET /healthz
    check_match "$desc: an answer, not a 5xx; bloomguard still serving" "$st $HTTP_STATUS" '^[234][0-9][0-9] 200$'
}

# guard_not_ready PROXY PORT MISS: bloomguard "main" restarted on PORT with
# no filter (no table), once with fail_open = no, once with yes: the absent
# id MISS through the proxy (named PROXY in the checks) is a 503 not_ready
# from the proxy that never reaches the service, or passes on to it.
# Uses the test's AUTH_ARGS.
guard_not_ready() {
    local proxy=$1 port=$2 miss=$3 fo q0
    note "bloomguard without a filter (no table) on the same port"
    for fo in no yes; do
        start_daemon main "${AUTH_ARGS[@]}" --server.listen="127.0.0.1:$port" \
            --postgres.table=no_such_table --auth.fail_open=$fo --log.level=info
        q0=$(svc_stat .queries)
        via_proxy "/user/get/$miss"
        if [ $fo = no ]; then
            check_eq "fail_open=no, not ready: 503 not_ready from $proxy" "503 not-ready \"not_ready\"" \
                "$HTTP_STATUS $(header X-Bloomguard) $(json_get "$HTTP_BODY" .error)"
            check_eq "fail_open=no, not ready: the service was not asked" 0 "$(($(svc_stat .queries) - q0))"
        else
            check_eq "fail_open=yes, not ready: passed on to the service" "404 not-ready" \
                "$HTTP_STATUS $(header X-Bloomguard)"
            check_eq "fail_open=yes, not ready: the service was asked" 1 "$(($(svc_stat .queries) - q0))"
        fi
        bg_stop main
    done
}

# guard_uri_source_auto PORT MISS: bloomguard "main" restarted on PORT with
# uri_source = auto (sized for the test's ITEMS): the proxy alone keeps the
# client's forged X-Original-URI and X-Forwarded-Uri from it.
guard_uri_source_auto() {
    note "uri_source = auto: the proxy alone keeps the client's forged headers from bloomguard"
    bg_stop main
    start_daemon main '--auth.uri_template=/user/get/{id}' --auth.uri_source=auto \
        --server.listen="127.0.0.1:$1" --filter.expected_items="$ITEMS" --log.level=info
    wait_ready 30 || bail "/readyz did not answer 200 within 30 s"
    expect_denied "uri_source=auto, forged X-Original-URI and X-Forwarded-Uri naming id 1" "$2" \
        -H 'X-Original-URI: /user/get/1' -H 'X-Forwarded-Uri: /user/get/1'
}

# hostile_clients: the header and encoding tricks of an attacker who wants
# absent ids to reach the service, through the proxy at PROXY_URL with
# bloomguard (BG_PORT[main], [auth] uri_template = /user/get/{id}) in front
# of examples/user_service (BG_PORT[service]).
hostile_clients() {
    local m pad i
    m=$(absent_seg hostile)
    pad=$(head -c 9000 /dev/zero | tr '\0' c)
    expect_denied "absent id, 7.9 KB Cookie" "$m" -H "Cookie: s=${pad:0:7900}"
    for ((i = 0; i < 4; i++)); do printf 'X-Pad-%d: %s\n' "$i" "${pad:0:7400}"; done >"$BG_WORK/30k.hdr"
    expect_denied "absent id, 30 KB of headers" "$m" -H "@$BG_WORK/30k.hdr"
    for ((i = 0; i < 200; i++)); do printf 'X-Many-%d: %s\n' "$i" "${pad:0:40}"; done >"$BG_WORK/200.hdr"
    expect_denied "absent id, 200 headers" "$m" -H "@$BG_WORK/200.hdr"
    expect_denied "absent id, forged X-Original-URI and X-Forwarded-Uri naming id 1" "$m" \
        -H 'X-Original-URI: /user/get/1' -H 'X-Forwarded-Uri: /user/get/1' -H 'X-Forwarded-Method: GET'
    expect_denied "absent id, 7 KB query string" "$m?q=${pad:0:7000}"
    for i in 8100 8150 8170 8180; do
        expect_refused "absent id, a URI of $((i + 13 + ${#m})) bytes" "$m?q=${pad:0:i}"
    done
    expect_denied "absent id with %2F" "$(absent_seg sl%2Fash)"
    expect_denied "absent id with %2E%2E%2F" "$(absent_seg %2E%2E%2F)"
    expect_denied "absent id, upper-case and needless escapes" "$(absent_seg %68%6F%73%74%69%6C%65)"
    expect_denied "absent id, 400 bytes" "$(absent_seg "${pad:0:400}")"
    expect_no_5xx "'%' not followed by two hex digits" "/user/get/$m%zz"
    # --request-target: curl would percent-encode raw bytes in a URL.
    expect_no_5xx "raw non-UTF-8 bytes" / --request-target "/user/get/$m"$'\xff\xfe'
    expect_no_5xx "raw UTF-8 cut mid-character" / --request-target "/user/get/$m"$'\xc3'
    expect_no_5xx "a raw non-UTF-8 byte in the method" "/user/get/$m" -X $'GE\xffT'
    expect_no_5xx "UTF-8 cut mid-character" "/user/get/$m%C3"
    expect_no_5xx "'..' segments" "/user/get/x/../$m"
    expect_no_5xx "'..' as the id" "/user/get/.."
    expect_no_5xx "%2E%2E as the id" "/user/get/%2E%2E"
    expect_no_5xx "7.9 KB id" "/user/get/${pad:0:7880}"
    expect_refused "absent id, a 9 KB URI" "$m?q=$pad"
}

# ------------------------------------------------------- several templates --
# guard_conf FILE: the configuration tests/nginx.test and tests/caddy.test
# start bloomguard with and print their proxy's file from: the demo's
# (bg_demo_conf, scripts/lib/proxy.sh: the users and orders filters, the id
# at the end and in the middle) and a third template, the id beside a
# literal in its segment (with a '.' that must not match any byte).
# uri_source comes from the test.
guard_conf() {
    bg_demo_conf "$1"
    echo 'uri_template = /v1.0/user/{id}.json users' >>"$1"
}

# guard_templates: through the proxy at PROXY_URL, bloomguard (BG_PORT[main],
# on guard_conf's configuration, over bg_pg_sample's ROWS users and ROWS / 10
# orders 7, 14, ...) in front of examples/user_service: for every template,
# absent ids are answered 404 by the proxy with the id in the body and never
# reach the service, present ones reach it; paths no template matches pass.
guard_templates() {
    local n q0 q1 nf0 nf1 stopped passed seg want p hits=no h0=0 h1=0
    declare -F service_hits >/dev/null && hits=yes
    note "orders: the id in the middle of the path (/orders/{id}/items)"
    seq 7 7 $((ROWS / 10 * 7)) | shuf -n 200 >"$BG_WORK/orders.ids"
    sed 's|.*|/orders/&/items|' "$BG_WORK/orders.ids" >"$BG_WORK/orders.paths"
    q0=$(svc_stat .queries)
    run_many "$BG_WORK/orders.paths" "$BG_WORK/orders.out"
    q1=$(svc_stat .queries)
    awk '{ printf "{\"id\":\"%s\",\"user_id\":\"%d\"}\t200\thit\n", $1, 1 + $1 / 7 }' \
        "$BG_WORK/orders.ids" >"$BG_WORK/orders.want"
    n=$(wc -l <"$BG_WORK/orders.ids")
    if cmp -s "$BG_WORK/orders.want" "$BG_WORK/orders.out"; then
        pass "$n existing orders: all 200 with their row, X-Bloomguard: hit"
    else
        fail "$n existing orders: all 200 with their row, X-Bloomguard: hit" \
            "$(diff "$BG_WORK/orders.want" "$BG_WORK/orders.out" | head -n 4 | tr '\n' ' ')"
    fi
    check_eq "every existing order reached the service" "$n" "$((q1 - q0))"

    for k in $(shuf -i 0-$((ROWS / 10 - 1)) -n 1000); do echo $((7 * k + 3)); done >"$BG_WORK/noorders.ids"
    sed 's|.*|/orders/&/items|' "$BG_WORK/noorders.ids" >"$BG_WORK/noorders.paths"
    q0=$(svc_stat .queries); nf0=$(svc_stat .not_found)
    [ $hits = no ] || h0=$(service_hits)
    run_many "$BG_WORK/noorders.paths" "$BG_WORK/noorders.out"
    q1=$(svc_stat .queries); nf1=$(svc_stat .not_found)
    [ $hits = no ] || h1=$(service_hits)
    n=$(wc -l <"$BG_WORK/noorders.ids")
    passed=$((q1 - q0))
    stopped=$(grep -c $'\t404\tmiss$' "$BG_WORK/noorders.out" || true)
    note "absent orders stopped by the proxy: $stopped, let through (false positives): $passed"
    check_eq "$n absent orders: each stopped by the proxy or a 404 from the database" \
        "$n $passed" "$((stopped + passed)) $((nf1 - nf0))"
    check_num "absent orders: at most 2 % reached the service" "$passed" "<=" $((n / 50))
    [ $hits = no ] || check_eq "absent orders: only the ones let through reached the service" \
        "$passed" "$((h1 - h0))"
    awk '{ printf "{\"id\":\"%s\",\"exists\":false}\t404\n", $1 }' "$BG_WORK/noorders.ids" >"$BG_WORK/noorders.want"
    if cut -f1,2 "$BG_WORK/noorders.out" | cmp -s "$BG_WORK/noorders.want" -; then
        pass "all $n: 404 {\"id\":\"<order>\",\"exists\":false}, the id from the middle of the path"
    else
        fail "all $n: 404 {\"id\":\"<order>\",\"exists\":false}" \
            "$(cut -f1,2 "$BG_WORK/noorders.out" | diff "$BG_WORK/noorders.want" - | head -n 4 | tr '\n' ' ')"
    fi
    # IDs that need care in the body, where bloomguard denies them (an orders
    # id that is no bigint may be another matter for it).
    for p in 'q%22q:q%22q' '%C3%BD:ý' 'a%2Fb:a%2Fb' 'b%5Cs:b%5Cs' 'a%20b:a b'; do
        guard_expect_miss_if "/orders/${p%%:*}/items" "${p#*:}"
    done

    note "a literal beside the id in its segment (/v1.0/user/{id}.json)"
    via_proxy /v1.0/user/42.json
    check_eq "existing id: reaches the service (which has no such route)" "404 hit \"no_route\"" \
        "$HTTP_STATUS $(header X-Bloomguard) $(json_get "$HTTP_BODY" .error)"
    seg=$(absent_seg gone-)
    guard_expect_miss "/v1.0/user/$seg.json" "$seg"
    guard_expect_miss "/v1.0/user/$seg.json?x=1.json" "$seg"
    guard_expect_miss_if "/v1.0/user/$seg.json.json" "$seg.json"
    for p in 'q%22q:q%22q' '%C3%BD:ý' 'sl%2Fash:sl%2Fash' 'a%20b:a b' '%2E%2E:..'; do
        seg=$(absent_seg "${p%%:*}") want=${p#*:}
        guard_expect_miss "/v1.0/user/$seg.json" "$want${seg#"${p%%:*}"}"
    done

    note "paths no template matches pass to the service"
    seg=$(absent_seg gone-)
    for p in "/v1x0/user/$seg.json" "/v1.0/user/$seg.jsonx" "/v1.0/user/$seg" "/orders/$seg" \
             "/orders/$seg/items/" "/orders//items"; do
        via_proxy "$p"
        check_eq "$p: bypass, the service's own 404" "404 bypass \"no_route\"" \
            "$HTTP_STATUS $(header X-Bloomguard) $(json_get "$HTTP_BODY" .error)"
    done
}

# guard_expect_miss_if PATH ID: guard_expect_miss where bloomguard's /auth
# denies PATH (the id may be a false positive, or no value of the column's
# type); a note otherwise.
guard_expect_miss_if() {
    BG_URL=http://127.0.0.1:${BG_PORT[main]} http GET /auth -H "X-Original-URI: $1" -H "X-Forwarded-Uri: $1"
    if [ "$(header X-Bloomguard)" = miss ]; then
        guard_expect_miss "$@"
    else
        note "skip $1: not a miss for bloomguard ($HTTP_STATUS $(header X-Bloomguard))"
    fi
}

# guard_expect_miss PATH ID: GET PATH through the proxy is its own 404 with
# ID (decoded) in the body, and nothing reached the service.
guard_expect_miss() {
    local q0 q1 h0=0 h1=0 hits=no
    declare -F service_hits >/dev/null && hits=yes
    q0=$(svc_stat .queries)
    [ $hits = no ] || h0=$(service_hits)
    via_proxy "$1"
    q1=$(svc_stat .queries)
    [ $hits = no ] || h1=$(service_hits)
    check_eq "$1: the proxy's 404, the id in the body" \
        "404 miss application/json {\"id\":\"$2\",\"exists\":false}" \
        "$HTTP_STATUS $(header X-Bloomguard) $HTTP_CT $HTTP_BODY"
    check_eq "$1: nothing reached the service" "0 0" "$((q1 - q0)) $((h1 - h0))"
}

# ------------------------------------------------- clients of the library --
# The language clients of published filters (clients/*: tests/pyclient.test,
# tests/goclient.test) run their own test suites against a real daemon.

# libbloomguard_usable: skip (exit 77) when libbloomguard is built with a
# sanitizer (scripts/test --sanitize): a process without the sanitizer's
# runtime (nginx, python, a Go program) cannot load it.  Not a missing
# prerequisite: this build cannot run the test (tests/check_publish covers
# the library under the sanitizers).
libbloomguard_usable() {
    if nm -D "$top_builddir/lib/.libs/libbloomguard.so" 2>/dev/null | grep -Eq ' U __(asan|tsan|ubsan)_'; then
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
