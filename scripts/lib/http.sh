# Speaking HTTP to bloomguard and reading its JSON: one curl call per request
# with the status, headers and body kept for the checks, jq for every JSON
# value, and the readers of bloomguard's own endpoints (/stats, POST
# /exists, /reload).  Sourced by common.sh.  http and what builds on it
# need BG_URL (the server) and BG_WORK (a temp dir); the JSON readers need jq.
# shellcheck disable=SC2034  # the variables set here are for the sourcing scripts

BG_CURL_TIMEOUT=15

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

# ------------------------------------------------------------------ JSON --
# jq reads every JSON value; compare what it prints, not the server's bytes
# (a check of the exact bytes the server sent looks at HTTP_BODY itself).

# json_get JSON FILTER: each value jq's FILTER yields, as compact JSON text
# on a line of its own: a string with its quotes ('"ok"'), a number,
# true/false/null, '[true,false]'.  An absent key is null; '.k // empty'
# prints nothing instead.  Prints nothing when JSON is not JSON (or FILTER
# does not apply to it); dies when FILTER is not jq (exit 3): a typo must
# not pass for an empty answer.
json_get() { _bg_jq -c "$2" "$1"; }

# json_raw JSON FILTER: the strings FILTER yields, decoded (no quotes, the
# escapes turned into their bytes) and nothing added: not even a newline.
json_raw() { _bg_jq -j "$2 | strings" "$1"; }

_bg_jq() {
    local rc=0
    jq "$1" "$2" <<<"$3" 2>/dev/null || rc=$?
    [ "$rc" -ne 3 ] || bg_die "jq cannot compile the filter $2"
}

# json_str STRING: STRING as a JSON string literal.
json_str() { jq -nc --arg s "$1" '$s'; }

# ------------------------------------------------- bloomguard's endpoints --

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
    json_get "$HTTP_BODY" '.exists[]' >"$BATCH_RESULTS"
    BATCH_N=$(wc -l <"$BATCH_RESULTS")
    BATCH_TRUE=$(grep -cx true "$BATCH_RESULTS" || true)
    BATCH_FALSE=$(grep -cx false "$BATCH_RESULTS" || true)
}

# batch_count true|false FIRST LAST: BATCH_COUNT, how many of the ids
# FIRST..LAST (numbers) answer true (or false), asked with batch_exists
# 10,000 at a time.
batch_count() {
    local s e
    BATCH_COUNT=0
    for ((s = $2; s <= $3; s += 10000)); do
        e=$((s + 9999 > $3 ? $3 : s + 9999))
        seq "$s" "$e" >"$BG_WORK/batch.ids"
        batch_exists "$BG_WORK/batch.ids"
        if [ "$1" = true ]; then
            BATCH_COUNT=$((BATCH_COUNT + BATCH_TRUE))
        else
            BATCH_COUNT=$((BATCH_COUNT + BATCH_FALSE))
        fi
    done
}

# batch_all_true FILE STALENESS: batch_exists FILE again and again until all
# its ids answer true, for STALENESS seconds and a margin at most (the
# contract: a row committed less than max_staleness ago may rightly be
# absent that long; a row lost for good stays absent and the caller's check
# fails).  BATCH_TRUE: how many did at the last ask.
batch_all_true() {
    local n deadline
    n=$(wc -l <"$1")
    deadline=$(awk -v s="$SECONDS" -v m="$2" 'BEGIN { printf "%d", s + m + 3 }')
    while :; do
        batch_exists "$1"
        [ "$BATCH_TRUE" -lt "$n" ] && [ "$SECONDS" -lt "$deadline" ] || break
        sleep 0.1
    done
}

# stats_get FILTER...: fetch /stats once, then print each FILTER's value
# (json_get) on its own line.  Sets STATS_BODY.
stats_get() {
    local f
    http GET /stats
    STATS_BODY=$HTTP_BODY
    for f in "$@"; do printf '%s\n' "$(json_get "$STATS_BODY" "$f")"; done
}

# wait_stat FILTER VALUE SECONDS: poll /stats until FILTER has VALUE
# (e.g. wait_stat .horizon.degraded true 5); false on timeout.
wait_stat() { bg_wait_for "$3" _stat_is "$1" "$2"; }
_stat_is() { [ "$(stats_get "$1")" = "$2" ]; }

# wait_fresh_since T SECONDS: within SECONDS, not degraded and the horizon
# later than T (date +%s.%N): every row committed before T is in the filter.
# "Not degraded" alone proves nothing right after a fault: the horizon from
# before it stays within max_staleness for a while.
wait_fresh_since() { bg_wait_for "$2" _fresh_since "$1"; }
_fresh_since() {
    local t0 deg age
    t0=$(date +%s.%N)
    read -r deg age < <(stats_get .horizon.degraded .horizon.age_seconds | paste -sd' ')
    [ "$deg" = false ] && [ "$age" != null ] && awk -v t0="$t0" -v a="$age" -v t="$1" 'BEGIN { exit !(t0 - a > t) }'
}
# wait_rebuild_after ID SECONDS: poll /stats until a rebuild newer than ID finished.
wait_rebuild_after() { bg_wait_for "$2" _rebuilt_after "$1"; }
_rebuilt_after() { [ "$(stats_get .rebuild.completed_id)" -gt "$1" ]; }

# reload_and_wait: POST /reload, then wait (30 s at most) until that rebuild finished.
reload_and_wait() {
    http POST /reload
    local id
    id=$(json_get "$HTTP_BODY" '.rebuild_id // empty')
    [ -n "$id" ] && wait_rebuild_after $((id - 1)) 30
}
