# Shared helpers for bloomguard's integration tests (tests/*.test): a private
# database and temp dir per test, daemons on port 0, an HTTP client built on
# curl and assertions that print what they expected and what they got.
# Source it after `set -euo pipefail`; do not run it.  Needs bash, curl, psql.

# Byte-wise string handling (ids are bytes, lengths are byte counts).
export LC_ALL=C

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
# BLOOMGUARD_BIN: test another build or an installed daemon instead.
BG_BIN=${BLOOMGUARD_BIN:-$top_builddir/src/bloomguard}
BG_CONF=$top_srcdir/conf/bloomguard.conf
BG_NAME=$(basename "$0" .test)

BG_FAILS=0
BG_CHECKS=0
BG_DB=
BG_WORK=
BG_URL=
BG_CURL_TIMEOUT=15
declare -A BG_PID=() BG_PORT=() BG_LOG=()
BG_BGPIDS=()

note() { printf '# %s\n' "$*"; }

# bail MSG: a hard error of the test itself (setup failed): exit 1 now.
bail() { printf 'Bail out! %s\n' "$*"; exit 1; }

# ---------------------------------------------------------------- checks --

pass() { BG_CHECKS=$((BG_CHECKS + 1)); printf 'ok - %s\n' "$1"; }
# fail DESC [DETAIL...]: one failed check; details are printed indented.
fail() {
    BG_CHECKS=$((BG_CHECKS + 1)); BG_FAILS=$((BG_FAILS + 1))
    printf 'not ok - %s\n' "$1"; shift
    local d
    for d in "$@"; do printf '#   %s\n' "$d"; done
}

# check_eq DESC EXPECTED GOT
check_eq() {
    if [ "$2" == "$3" ]; then pass "$1"; else fail "$1" "expected: $(show "$2")" "     got: $(show "$3")"; fi
}

# check_cmd DESC COMMAND...: the command succeeds.
check_cmd() {
    local desc=$1; shift
    if "$@"; then pass "$desc"; else fail "$desc" "command failed: $*"; fi
}

# check_match DESC STRING ERE
check_match() {
    if [[ $2 =~ $3 ]]; then pass "$1"; else fail "$1" "expected to match: $3" "              got: $(show "$2")"; fi
}

# check_num DESC A OP B: numeric (float) comparison with awk; OP is one of
# == != < <= > >=.
check_num() {
    local desc=$1 a=$2 op=$3 b=$4
    if num_cmp "$a" "$op" "$b"; then pass "$desc"; else fail "$desc" "expected: $(show "$a") $op $(show "$b")" "     got: false"; fi
}
num_cmp() {
    [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] || return 1
    [[ $3 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] || return 1
    awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
        if (op == "==") r = a + 0 == b + 0; else if (op == "!=") r = a + 0 != b + 0
        else if (op == "<") r = a + 0 < b + 0; else if (op == "<=") r = a + 0 <= b + 0
        else if (op == ">") r = a + 0 > b + 0; else if (op == ">=") r = a + 0 >= b + 0
        else r = 0
        exit !r }'
}

# check_contains DESC HAYSTACK NEEDLE (fixed string)
check_contains() {
    case $2 in
        *"$3"*) pass "$1" ;;
        *) fail "$1" "expected to contain: $(show "$3")" "                got: $(show "$2")" ;;
    esac
}

# show STRING: a one-line, bounded rendering of a value for messages.
show() {
    local s=$1
    s=${s//$'\r'/\\r}; s=${s//$'\n'/\\n}
    if [ ${#s} -gt 300 ]; then s="${s:0:300}... (${#1} bytes)"; fi
    printf "'%s'" "$s"
}

# finish: the test's exit status from the failure count.
finish() {
    if [ "$BG_FAILS" -gt 0 ]; then
        printf '# %d of %d checks failed\n' "$BG_FAILS" "$BG_CHECKS"
        exit 1
    fi
    printf '# all %d checks passed\n' "$BG_CHECKS"
    exit 0
}

# ----------------------------------------------------------------- setup --

# require_pg: PostgreSQL (via the PG* environment) must answer; else skip
# (77), or fail when BLOOMGUARD_REQUIRE_PG=1.  Also requires the daemon and
# curl.
require_pg() {
    local why=
    command -v curl >/dev/null || why="curl is not installed"
    if [ -z "$why" ]; then
        command -v psql >/dev/null || why="psql is not installed"
    fi
    if [ -z "$why" ] && ! psql -qXAt -c 'select 1' >/dev/null 2>&1; then
        why="PostgreSQL is not reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-}): psql -c 'select 1' failed"
    fi
    if [ -n "$why" ]; then
        if [ "${BLOOMGUARD_REQUIRE_PG:-0}" = 1 ]; then
            printf 'FAIL: %s, and BLOOMGUARD_REQUIRE_PG=1\n' "$why"
            exit 1
        fi
        printf 'SKIP: %s\n' "$why"
        exit 77
    fi
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

# make_db: create bgtest_<name>_<pid> (dropped by cleanup) and set BG_DB.
make_db() {
    BG_DB=bgtest_${BG_NAME}_$$
    createdb "$BG_DB" || bail "createdb $BG_DB failed"
}

# psql_db ARGS...: psql on the test's database, stopping at the first error.
psql_db() { psql -qX -v ON_ERROR_STOP=1 -d "$BG_DB" "$@"; }

# load_sample ROWS: sql/schema.sql's users table with ids '1'..ROWS.
load_sample() {
    psql_db -f "$top_srcdir/sql/schema.sql" >/dev/null || bail "schema.sql failed"
    psql_db -v rows="$1" -f "$top_srcdir/sql/sample.sql" >/dev/null || bail "sample.sql failed"
}

cleanup() {
    local rc=$? name pid
    trap - EXIT
    # Under set -e a failing command would end a trap early: finish the job.
    set +e
    for pid in "${BG_BGPIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for name in "${!BG_PID[@]}"; do
        stop_pid "${BG_PID[$name]}" TERM || true
    done
    for pid in "${BG_BGPIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$BG_WORK" ]; then
        for name in "${!BG_LOG[@]}"; do
            [ -f "${BG_LOG[$name]}" ] || continue
            printf '# --- last lines of daemon %s log (%s)\n' "$name" "${BG_LOG[$name]}"
            tail -n 40 "${BG_LOG[$name]}" | sed 's/^/#   /'
        done
    fi
    if [ -n "$BG_DB" ]; then
        dropdb --if-exists --force "$BG_DB" 2>/dev/null || dropdb --if-exists "$BG_DB" || true
    fi
    [ -n "$BG_WORK" ] && rm -rf "$BG_WORK"
    exit "$rc"
}

# ---------------------------------------------------------------- daemon --

# start_daemon NAME [--section.key=value ...]: start the daemon on port 0
# against $BG_DB with debug logging (an argument overriding conninfo, listen
# or log.level replaces the default one; BG_FILE_LOG_LEVEL=1 leaves the level
# to the config file, as an override would outlive a SIGHUP), wait (30 s at most) for its
# "listening on http://HOST:PORT" line (HOST may be 0.0.0.0: the tests still
# connect to 127.0.0.1), set BG_PID/BG_PORT/BG_LOG[NAME]
# and point BG_URL at it.  Must run in the test's own shell (not $(...)).
start_daemon() {
    local name=$1; shift
    local args=(-c "$BG_CONF") a have_ci=0 have_listen=0 have_level=0
    for a in "$@"; do
        case $a in
            --postgres.conninfo=*) have_ci=1 ;;
            --server.listen=*) have_listen=1 ;;
            --log.level=*) have_level=1 ;;
        esac
    done
    [ $have_listen = 1 ] || args+=(--server.listen=127.0.0.1:0)
    [ $have_ci = 1 ] || args+=(--postgres.conninfo="dbname=$BG_DB")
    [ $have_level = 1 ] || [ "${BG_FILE_LOG_LEVEL:-0}" = 1 ] || args+=(--log.level=debug)
    local log=$BG_WORK/$name.log
    note "start $name: bloomguard ${args[*]} $*"
    # Created here: the background child opens it only when it gets to run.
    : >"$log"
    "$BG_BIN" "${args[@]}" "$@" </dev/null >"$log.out" 2>>"$log" &
    local pid=$!
    BG_PID[$name]=$pid
    BG_LOG[$name]=$log
    local port='' i
    for ((i = 0; i < 300; i++)); do
        port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\) .*|\1|p' "$log" 2>/dev/null | head -n 1) || port=''
        [ -f "$log" ] || bail "daemon $name: its log $log vanished (is something deleting $BG_WORK?)"
        [ -n "$port" ] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            sed 's/^/#   /' "$log" || true
            bail "daemon $name exited before listening"
        fi
        sleep 0.1
    done
    [ -n "$port" ] || { sed 's/^/#   /' "$log" || true; bail "daemon $name logged no 'listening on http://127.0.0.1:PORT' line within 30 s"; }
    BG_PORT[$name]=$port
    BG_URL=http://127.0.0.1:$port
    note "daemon $name: pid $pid, $BG_URL"
}

# use_daemon NAME: point BG_URL at that daemon.
use_daemon() { BG_URL=http://127.0.0.1:${BG_PORT[$1]}; }

daemon_alive() { kill -0 "${BG_PID[$1]}" 2>/dev/null; }

# wait_ready [SECONDS]: poll /readyz until 200 (default 30 s); false on timeout.
wait_ready() {
    local limit=${1:-30} i
    for ((i = 0; i < limit * 5; i++)); do
        http GET /readyz
        [ "$HTTP_STATUS" = 200 ] && return 0
        sleep 0.2
    done
    return 1
}

# stop_pid PID SIG: signal PID, wait up to 10 s, SIGKILL if needed; sets
# BG_EXIT to the exit status ("timeout" when it had to be killed).  Runs in
# the test's own shell: only the parent can collect a child's status.
stop_pid() {
    local pid=$1 sig=$2 i
    BG_EXIT=0
    kill -s "$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -s KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        BG_EXIT=timeout
        return 0
    fi
    wait "$pid" 2>/dev/null || BG_EXIT=$?
}

# stop_daemon NAME [SIGNAL]: stop it (default SIGTERM) and set BG_EXIT to
# its exit status ("timeout" if it did not exit within 10 s).
stop_daemon() {
    local name=$1 sig=${2:-TERM}
    stop_pid "${BG_PID[$name]}" "$sig"
    unset "BG_PID[$name]"
}

# ------------------------------------------------------------------ HTTP --

# http METHOD PATH [curl args...]: one request to $BG_URL$PATH (path sent
# as is).  Sets HTTP_STATUS ("000" on a connection error), HTTP_BODY,
# HTTP_HEADERS (CRs removed) and HTTP_CT (the Content-Type value).
http() {
    local method=$1 path=$2; shift 2
    local m=(-X "$method")
    [ "$method" = HEAD ] && m=(--head)
    [ "$method" = GET ] && m=()
    : >"$BG_WORK/body"; : >"$BG_WORK/headers"
    HTTP_STATUS=$(curl -sS --path-as-is --max-time "$BG_CURL_TIMEOUT" "${m[@]}" \
        -o "$BG_WORK/body" -D "$BG_WORK/headers" -w '%{http_code}' \
        "$@" "$BG_URL$path" 2>"$BG_WORK/curl.err") || HTTP_STATUS=000
    [ -n "$HTTP_STATUS" ] || HTTP_STATUS=000
    if [ "$method" = HEAD ]; then HTTP_BODY=; else HTTP_BODY=$(cat "$BG_WORK/body"); fi
    HTTP_HEADERS=$(tr -d '\r' <"$BG_WORK/headers")
    HTTP_CT=$(header Content-Type)
    if [ "$HTTP_STATUS" = 000 ]; then HTTP_BODY="curl error: $(cat "$BG_WORK/curl.err")"; fi
}

# header NAME: the value of a response header of the last http call.
header() {
    printf '%s\n' "$HTTP_HEADERS" | awk -v n="$1" 'BEGIN { n = tolower(n) }
        { i = index($0, ":"); if (i && tolower(substr($0, 1, i - 1)) == n) { v = substr($0, i + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v); print v; exit } }'
}

# post_json PATH FILE-OR-STRING: POST a JSON body (@file or literal).
post_json() { http POST "$1" -H 'Content-Type: application/json' --data-binary "$2"; }

# assert_status DESC EXPECTED: the last response's status (shows the body).
assert_status() {
    if [ "$HTTP_STATUS" = "$2" ]; then
        pass "$1"
    else
        fail "$1" "expected: status $2" "     got: status $HTTP_STATUS, body $(show "$HTTP_BODY")"
    fi
}

# assert_json_field DESC KEY EXPECTED: the raw JSON value of KEY (see
# json_get) in the last response body, e.g. '"ok"', 'true', '3'.
assert_json_field() {
    local got
    got=$(json_get "$HTTP_BODY" "$2")
    if [ "$got" == "$3" ]; then
        pass "$1"
    else
        fail "$1" "expected: \"$2\": $3" "     got: \"$2\": $got in body $(show "$HTTP_BODY") (status $HTTP_STATUS)"
    fi
}

# assert_json_ct DESC: Content-Type of the last response is application/json.
assert_json_ct() {
    case $HTTP_CT in
        application/json|application/json\;*) pass "$1" ;;
        *) fail "$1" "expected: Content-Type application/json" "     got: $(show "$HTTP_CT")" ;;
    esac
}

# assert_error DESC STATUS [CODE]: an error response: STATUS, JSON content
# type, a non-empty string "error" (equal to CODE if given) and a string
# "message".
assert_error() {
    local desc=$1 st=$2 code=${3:-} err msg problems=()
    err=$(json_get "$HTTP_BODY" error)
    msg=$(json_get "$HTTP_BODY" message)
    [ "$HTTP_STATUS" = "$st" ] || problems+=("status $HTTP_STATUS, expected $st")
    if [ -n "$code" ]; then
        [ "$err" = "\"$code\"" ] || problems+=("\"error\" is $(show "$err"), expected \"$code\"")
    else
        [[ $err =~ ^\".+\"$ ]] || problems+=("\"error\" is $(show "$err"), expected a non-empty string")
    fi
    [[ $msg =~ ^\".*\"$ ]] || problems+=("\"message\" is $(show "$msg"), expected a string")
    case $HTTP_CT in
        application/json|application/json\;*) ;;
        *) problems+=("Content-Type $(show "$HTTP_CT"), expected application/json") ;;
    esac
    if [ ${#problems[@]} -eq 0 ]; then
        pass "$desc"
    else
        fail "$desc" "${problems[@]}" "body: $(show "$HTTP_BODY")"
    fi
}

# wait_stat KEY VALUE SECONDS: poll /stats until KEY has the raw VALUE
# (e.g. wait_stat horizon.degraded true 5); false on timeout.
wait_stat() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        [ "$(stats_get "$1")" = "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# wait_rebuild_after ID SECONDS: poll /stats until a rebuild newer than ID finished.
wait_rebuild_after() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [ "$(stats_get rebuild.completed_id)" -gt "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# reload_and_wait: POST /reload, then wait (30 s at most) until that rebuild finished.
reload_and_wait() {
    http POST /reload
    local id
    id=$(json_get "$HTTP_BODY" rebuild_id)
    [ -n "$id" ] && wait_rebuild_after $((id - 1)) 30
}

# ------------------------------------------------------------------ JSON --

# json_get JSON KEY: print the raw text of KEY's value (a string with its
# quotes and escapes, a number, true/false/null, an array or an object);
# KEY is a dotted path from the top-level object, e.g. "lookups.hits".
# Prints nothing when the key is absent or the JSON is malformed.  A small
# recursive-descent walk in awk: no jq or python on a fresh machine.
json_get() {
    printf '%s' "$1" | awk -v want="$2" '
    function ws() { while (i <= n && index(" \t\r\n", substr(s, i, 1))) i++ }
    function str(   st, c) {
        st = i; i++
        while (i <= n) {
            c = substr(s, i, 1)
            if (c == "\\") i += 2
            else if (c == "\"") { i++; return substr(s, st, i - st) }
            else i++
        }
        bad = 1; return ""
    }
    function val(path,   st, c, k, idx) {
        ws(); st = i; c = substr(s, i, 1)
        if (c == "{") {
            i++; ws()
            if (substr(s, i, 1) == "}") i++
            else while (!bad) {
                ws(); if (substr(s, i, 1) != "\"") { bad = 1; return }
                k = str(); k = substr(k, 2, length(k) - 2)
                ws(); if (substr(s, i, 1) != ":") { bad = 1; return }
                i++; val(path == "" ? k : path "." k)
                ws(); c = substr(s, i, 1); i++
                if (c == "}") break
                if (c != ",") { bad = 1; return }
            }
        } else if (c == "[") {
            i++; ws()
            if (substr(s, i, 1) == "]") i++
            else for (idx = 0; !bad; idx++) {
                val(path "[" idx "]")
                ws(); c = substr(s, i, 1); i++
                if (c == "]") break
                if (c != ",") { bad = 1; return }
            }
        } else if (c == "\"") str()
        else {
            while (i <= n && index(",:{}[] \t\r\n\"", substr(s, i, 1)) == 0) i++
            if (i == st) { bad = 1; return }
        }
        if (path == want && !found) { found = 1; out = substr(s, st, i - st) }
    }
    { s = s $0 "\n" }
    END { n = length(s); i = 1; bad = 0; val(""); ws(); if (!bad && i > n && found) printf "%s", out }'
}

# json_bools JSON KEY: the elements of a flat array of booleans, one a line.
json_bools() {
    json_get "$1" "$2" | tr -d ' \t[]' | tr ',' '\n' | awk 'NF'
}

# json_str STRING: STRING as a JSON string literal.
json_str() {
    local s=$1
    s=${s//\\/\\\\}; s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}; s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

# json_unescape LITERAL: the string a JSON string literal (with quotes)
# stands for, as UTF-8 bytes.  Fails on a malformed literal.
json_unescape() {
    local s=$1 out='' c hi lo cp esc
    [[ $s == \"*\" && ${#s} -ge 2 ]] || return 1
    s=${s:1:${#s}-2}
    while [ -n "$s" ]; do
        c=${s:0:1}
        if [ "$c" != '\' ]; then out+=$c; s=${s:1}; continue; fi
        c=${s:1:1}
        case $c in
            '"'|'\'|/) out+=$c; s=${s:2} ;;
            b) out+=$'\b'; s=${s:2} ;;
            f) out+=$'\f'; s=${s:2} ;;
            n) out+=$'\n'; s=${s:2} ;;
            r) out+=$'\r'; s=${s:2} ;;
            t) out+=$'\t'; s=${s:2} ;;
            u)
                [[ ${s:2:4} =~ ^[0-9a-fA-F]{4}$ ]] || return 1
                hi=$((16#${s:2:4})); s=${s:6}
                cp=$hi
                if ((hi >= 0xD800 && hi <= 0xDBFF)) && [[ ${s:0:6} =~ ^\\u[dD][c-fC-F][0-9a-fA-F]{2}$ ]]; then
                    lo=$((16#${s:2:4})); s=${s:6}
                    cp=$((0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)))
                fi
                if ((cp < 0x80)); then esc=$(printf '\\x%02x' $cp)
                elif ((cp < 0x800)); then esc=$(printf '\\x%02x\\x%02x' $((0xC0 | cp >> 6)) $((0x80 | (cp & 0x3F))))
                elif ((cp < 0x10000)); then esc=$(printf '\\x%02x\\x%02x\\x%02x' $((0xE0 | cp >> 12)) $((0x80 | (cp >> 6 & 0x3F))) $((0x80 | (cp & 0x3F))))
                else esc=$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((0xF0 | cp >> 18)) $((0x80 | (cp >> 12 & 0x3F))) $((0x80 | (cp >> 6 & 0x3F))) $((0x80 | (cp & 0x3F))))
                fi
                printf -v c "$esc"
                out+=$c
                ;;
            *) return 1 ;;
        esac
    done
    printf '%s' "$out"
}

# urlencode STRING: percent-encode every byte but [A-Za-z0-9._~-].
urlencode() {
    local s=$1 out='' c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
            [A-Za-z0-9._~-]) out+=$c ;;
            *) out+=$(printf '%%%02X' "'$c") ;;
        esac
    done
    printf '%s' "$out"
}

# ids_json FILE: a {"ids":[...]} body from FILE's lines (plain ids without
# '"' or '\'), on stdout.
ids_json() { printf '{"ids":['; sed 's/.*/"&"/' "$1" | paste -sd, -; printf ']}'; }

# batch_exists FILE: POST /exists with FILE's ids; sets BATCH_TRUE and
# BATCH_FALSE (counts), BATCH_N (elements) and BATCH_RESULTS (file, one
# true/false a line, in order).
batch_exists() {
    ids_json "$1" >"$BG_WORK/batch.json"
    post_json /exists "@$BG_WORK/batch.json"
    BATCH_RESULTS=$BG_WORK/batch.out
    json_bools "$HTTP_BODY" exists >"$BATCH_RESULTS"
    BATCH_N=$(wc -l <"$BATCH_RESULTS")
    BATCH_TRUE=$(grep -cx true "$BATCH_RESULTS" || true)
    BATCH_FALSE=$(grep -cx false "$BATCH_RESULTS" || true)
}

# stats_get KEY...: fetch /stats once, then print each KEY's raw value on
# its own line (empty line when absent).  Sets STATS_BODY.
stats_get() {
    local k
    http GET /stats
    STATS_BODY=$HTTP_BODY
    for k in "$@"; do json_get "$STATS_BODY" "$k"; echo; done
}

# ----------------------------------------------------------------- proxies --
# A real reverse proxy (nginx, Caddy) with a shipped example config in front
# of examples/user_service, bloomguard as its guard: tests/nginx.test and
# tests/caddy.test.

# require_tool WHY: skip (77) with WHY when WHY is not empty, or fail when
# BLOOMGUARD_REQUIRE_PG=1 (scripts/test installs every tool a test needs).
require_tool() {
    [ -n "$1" ] || return 0
    if [ "${BLOOMGUARD_REQUIRE_PG:-0}" = 1 ]; then
        printf 'FAIL: %s, and BLOOMGUARD_REQUIRE_PG=1\n' "$1"
        exit 1
    fi
    printf 'SKIP: %s\n' "$1"
    exit 77
}

# free_port: a TCP port no socket is bound to right now (for servers that
# cannot bind port 0 and tell which port they got; start_proxy retries).
free_port() {
    local p i
    for ((i = 0; i < 1000; i++)); do
        # Below the usual ephemeral range (32768-60999), and bound by nothing.
        p=$((20000 + RANDOM % 12000))
        awk -v p="$(printf ':%04X' "$p")" '$2 ~ p"$" { found = 1 } END { exit !found }' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$p"; return 0; }
    done
    return 1
}

# start_service NAME: examples/user_service on port 0 against $BG_DB; sets
# BG_PID/BG_PORT/BG_LOG[NAME] like start_daemon (cleanup stops it).
start_service() {
    local name=$1 log=$BG_WORK/$1.log port='' i
    local bin=$top_builddir/examples/user_service
    [ -x "$bin" ] || bail "$bin does not exist: build it first (make)"
    # Created here: the background child opens it only when it gets to run.
    : >"$log"
    "$bin" --listen 127.0.0.1:0 --conninfo "dbname=$BG_DB" --threads 2 </dev/null >"$log" 2>&1 &
    BG_PID[$name]=$!
    BG_LOG[$name]=$log
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$log" | head -n 1)
        [ -n "$port" ] && break
        kill -0 "${BG_PID[$name]}" 2>/dev/null || { sed 's/^/#   /' "$log"; bail "$name exited"; }
        sleep 0.1
    done
    [ -n "$port" ] || bail "$name logged no 'listening on' line within 10 s"
    BG_PORT[$name]=$port
    note "$name: pid ${BG_PID[$name]}, http://127.0.0.1:$port"
}

# start_proxy NAME CONFIGURE: start a proxy on a free loopback port.
# CONFIGURE PORT writes its config for that port and sets PROXY_CMD (the
# command, run in the foreground) and PROXY_LOG (its log file, if it does
# not log to stderr).  Waits (10 s at most) until GET /_probe gets any HTTP
# answer; tries 3 ports when one chosen was taken meanwhile.  Sets
# BG_PID/BG_PORT/BG_LOG[NAME] and PROXY_URL; cleanup stops it.
start_proxy() {
    local name=$1 configure=$2 out=$BG_WORK/$1.out try port i
    for try in 1 2 3; do
        port=$(free_port) || bail "no free port for $name"
        PROXY_CMD=() PROXY_LOG=
        "$configure" "$port"
        "${PROXY_CMD[@]}" </dev/null >"$out" 2>&1 &
        BG_PID[$name]=$!
        BG_LOG[$name]=${PROXY_LOG:-$out}
        PROXY_URL=http://127.0.0.1:$port
        for ((i = 0; i < 100; i++)); do
            kill -0 "${BG_PID[$name]}" 2>/dev/null || break
            if curl -s -o /dev/null --max-time 2 "$PROXY_URL/_probe"; then
                BG_PORT[$name]=$port
                note "$name: pid ${BG_PID[$name]}, $PROXY_URL"
                return 0
            fi
            sleep 0.1
        done
        stop_pid "${BG_PID[$name]}" TERM >/dev/null
        unset "BG_PID[$name]"
        grep -qi 'address already in use' "${BG_LOG[$name]}" "$out" 2>/dev/null || break
    done
    sed 's/^/#   /' "${BG_LOG[$name]}" "$out" 2>/dev/null | sort -u || true
    bail "$name did not start"
}

# svc_stat KEY: a counter from start_service's service's /stats (the one
# named "service").
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
        [ "$(json_get "$HTTP_BODY" exists)" = false ] && { printf '%s%s\n' "$1" "$n"; return 0; }
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
    q0=$(svc_stat queries)
    [ $hits = no ] || h0=$(service_hits)
    via_proxy "/user/get/$seg" "$@"
    q1=$(svc_stat queries)
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
