# Proxy tests' helpers (sourced by tests/lib.sh; do not run it): a real
# reverse proxy (nginx, Caddy) with a shipped example config in front of
# examples/user_service, bloomguard as its guard.  tests/nginx.test and
# tests/caddy.test run the same phases (guard_*) through their own proxy;
# tests/zerohop.test, pubattack.test and filters.test use the pieces.

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

# check_answers DESC WANT OUT [FIELDS]: run_many's OUT (its FIELDS only,
# e.g. 1,2, when given) is WANT, line for line.
check_answers() {
    local got=$3
    if [ -n "${4:-}" ]; then got=$BG_WORK/answers.cut; cut -f"$4" "$3" >"$got"; fi
    if cmp -s "$2" "$got"; then
        pass "$1"
    else
        fail "$1" "got $(wc -l <"$got") answers; first difference:" \
            "$(diff "$2" "$got" | head -n 4 | tr '\n' ' ')" "curl: $(head -c 300 "$BG_WORK/many.err")"
    fi
}
# want_users IDS WANT: what run_many gets for existing users IDS (a file,
# one a line): 200, the row, X-Bloomguard: hit.  want_absent IDS WANT: for
# absent ones, fields 1,2: {"id":...,"exists":false} and 404.
want_users() { awk '{ printf "{\"id\":\"%s\",\"name\":\"user %s\"}\t200\thit\n", $1, $1 }' "$1" >"$2"; }
want_absent() { awk '{ printf "{\"id\":\"%s\",\"exists\":false}\t404\n", $1 }' "$1" >"$2"; }

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
    check_answers "$n existing orders: all 200 with their row, X-Bloomguard: hit" \
        "$BG_WORK/orders.want" "$BG_WORK/orders.out"
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
    want_absent "$BG_WORK/noorders.ids" "$BG_WORK/noorders.want"
    check_answers "all $n: 404 {\"id\":\"<order>\",\"exists\":false}, the id from the middle of the path" \
        "$BG_WORK/noorders.want" "$BG_WORK/noorders.out" 1,2
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


# ------------------------------------------- the phases of nginx and Caddy --
# tests/nginx.test and tests/caddy.test, in this order: guard_db, guard_start,
# guard_present_ids, guard_absent_ids, guard_edge_cases, guard_templates,
# hostile_clients, guard_fail_open, guard_restarts.  Each test sets ROWS,
# ABSENT, FPP and AUTH_ARGS, and adds its proxy's own checks between them.

# guard_db ROWS: the test's database: ROWS sample users (ROWS / 10 orders),
# [filter users] and [filter orders] listening on <channel>_<name>, three
# users whose ids need escaping; sets ITEMS.
guard_db() {
    make_db
    bg_pg_sample "$1"
    bg_pg_watch users id bloomguard_users
    bg_pg_watch orders id bloomguard_orders
    bg_psql -c "INSERT INTO users VALUES ('a b', 'space'), ('x/y', 'slash'), ('ü', 'umlaut')" >/dev/null
    ITEMS=$(($1 + 3))
}

# guard_start NAME CONFIGURE: bloomguard "main" on guard_conf's
# configuration (GUARD_CONF, also BG_CONF) with AUTH_ARGS, sized for ITEMS
# at FPP; the service; the proxy NAME (start_proxy NAME CONFIGURE).
guard_start() {
    GUARD_CONF=$BG_WORK/guard.conf
    guard_conf "$GUARD_CONF"
    BG_CONF=$GUARD_CONF
    start_daemon main "${AUTH_ARGS[@]}" --filter.expected_items="$ITEMS" \
        --filter.false_positive_rate="$FPP" --log.level=info
    wait_ready 30 || bail "/readyz did not answer 200 within 30 s (last: $HTTP_STATUS $HTTP_BODY)"
    start_service service
    start_proxy "$1" "$2"
}

# bg_stat FILTER: a value from bloomguard's /stats.
bg_stat() { use_daemon main; stats_get "$1" | head -n 1; }

# guard_present_ids N: ids 1, ROWS and N - 2 others through the proxy: each
# 200 with its row, X-Bloomguard: hit, one query and one bloomguard hit;
# then ids that need escaping.  Sets PRESENT_CONNS: the connections the
# proxy opened to the service meanwhile.
guard_present_ids() {
    local q0 q1 c0 c1 h0 h1 n p
    note "existing ids through ${BG_PROXY_NAME:-the proxy}"
    { echo 1; echo "$ROWS"; shuf -i 2-$((ROWS - 1)) -n $(($1 - 2)); } >"$BG_WORK/present.ids"
    sed 's|^|/user/get/|' "$BG_WORK/present.ids" >"$BG_WORK/present.paths"
    q0=$(svc_stat .queries); c0=$(svc_stat .http_connections); h0=$(bg_stat .auth.hits)
    run_many "$BG_WORK/present.paths" "$BG_WORK/present.out"
    q1=$(svc_stat .queries); c1=$(svc_stat .http_connections); h1=$(bg_stat .auth.hits)
    PRESENT_CONNS=$((c1 - c0))
    want_users "$BG_WORK/present.ids" "$BG_WORK/present.want"
    n=$(wc -l <"$BG_WORK/present.ids")
    check_answers "$n existing ids: all 200 with their row, X-Bloomguard: hit" \
        "$BG_WORK/present.want" "$BG_WORK/present.out"
    check_eq "every existing id reached the service (queries sent to PostgreSQL)" "$n" "$((q1 - q0))"
    check_eq "bloomguard counted a hit for each" "$n" "$((h1 - h0))"
    for p in a%20b x%2Fy %C3%BC; do
        via_proxy "/user/get/$p?from=test"
        assert_status "GET /user/get/$p (query string added) is 200" 200
    done
    check_eq "the decoded id reaches the service: %C3%BC is 'ü'" '{"id":"ü","name":"umlaut"}' "$HTTP_BODY"
}

# guard_absent_ids FACTOR: ABSENT ids past ROWS through the proxy: each a
# 404 {"id":...,"exists":false}, stopped by the proxy (a bloomguard miss) or
# let through to a 404 from the database, at most FACTOR x FPP x ABSENT of
# them.  Sets MISS: an id bloomguard surely calls absent.
guard_absent_ids() {
    local q0 q1 nf0 nf1 m0 m1 passed stopped limit proxy=${BG_PROXY_NAME:-the proxy}
    note "$ABSENT absent ids through $proxy"
    seq $((ROWS + 1)) $((ROWS + ABSENT)) >"$BG_WORK/absent.ids"
    sed 's|^|/user/get/|' "$BG_WORK/absent.ids" >"$BG_WORK/absent.paths"
    q0=$(svc_stat .queries); nf0=$(svc_stat .not_found); m0=$(bg_stat .auth.misses)
    run_many "$BG_WORK/absent.paths" "$BG_WORK/absent.out"
    q1=$(svc_stat .queries); nf1=$(svc_stat .not_found); m1=$(bg_stat .auth.misses)
    passed=$((q1 - q0))
    stopped=$(grep -c $'\t404\tmiss$' "$BG_WORK/absent.out" || true)
    limit=$(awk -v n="$ABSENT" -v p="$FPP" -v f="$1" 'BEGIN { printf "%d", f * n * p }')
    note "stopped by bloomguard: $stopped, let through (false positives): $passed"
    check_eq "$ABSENT answers" "$ABSENT" "$(wc -l <"$BG_WORK/absent.out")"
    check_num "the service received at most $1 x ${FPP} of them ($limit)" "$passed" "<=" "$limit"
    check_eq "each either stopped by $proxy or sent to the service" "$ABSENT" "$((stopped + passed))"
    check_eq "bloomguard counted a miss for each stopped one" "$stopped" "$((m1 - m0))"
    check_eq "each let through was a 404 from the database" "$passed" "$((nf1 - nf0))"
    want_absent "$BG_WORK/absent.ids" "$BG_WORK/absent.want"
    check_answers "all $ABSENT: 404 {\"id\":\"<id>\",\"exists\":false}, from $proxy or the service alike" \
        "$BG_WORK/absent.want" "$BG_WORK/absent.out" 1,2
    MISS=$(absent_seg gone-)
    via_proxy "/user/get/$MISS"
    check_eq "a stopped request is JSON" "application/json" "$HTTP_CT"
}

# guard_edge_cases SEG...: paths no template matches pass to the service;
# absent ids made of each SEG (characters that need care in the JSON body)
# are 404 with a well-formed body; a UTF-8 id is shown decoded.
guard_edge_cases() {
    local p seg
    note "edge cases through ${BG_PROXY_NAME:-the proxy}"
    via_proxy /user/get/1/
    check_eq "/user/get/1/ matches no template: bypass, the service's own 404" "404 bypass no_route" \
        "$HTTP_STATUS $(header X-Bloomguard) $(json_get "$HTTP_BODY" .error | tr -d '"')"
    via_proxy /stats
    check_eq "another path passes (bypass) to the service" "200 bypass" "$HTTP_STATUS $(header X-Bloomguard)"
    for p in "$@"; do
        seg=$(auth_miss_seg "$p") || { note "skip: bloomguard calls no /user/get/$p<n> a miss"; continue; }
        via_proxy "/user/get/$seg"
        check_match "/user/get/$seg: 404 with a well-formed JSON body" \
            "$HTTP_STATUS $(header X-Bloomguard) $HTTP_BODY" '^404 miss \{"id":"([^"\\[:cntrl:]]*)","exists":false\}$'
    done
    p=$(auth_miss_seg %C3%BD) || bail "bloomguard calls no /user/get/%C3%BD<n> a miss"
    via_proxy "/user/get/$p"
    check_eq "a decodable UTF-8 id is shown decoded, as /exists shows it" \
        "{\"id\":\"ý${p#%C3%BD}\",\"exists\":false}" "$HTTP_BODY"
}

# auth_miss_seg PREFIX: PREFIX (a raw path segment, which /exists may refuse
# as an ID) followed by the first n >= 1 for which bloomguard's /auth
# (BG_PORT[main]) says /user/get/PREFIXn is a miss; false if none of 20 is.
auth_miss_seg() {
    local n u
    for ((n = 1; n <= 20; n++)); do
        u=/user/get/$1$n
        BG_URL=http://127.0.0.1:${BG_PORT[main]} http GET /auth -H "X-Original-URI: $u" -H "X-Forwarded-Uri: $u"
        [ "$(header X-Bloomguard)" != miss ] || { printf '%s%s\n' "$1" "$n"; return 0; }
    done
    return 1
}

# guard_fail_open: bloomguard stopped: through the proxy, an existing id
# and 50 absent ones reach the service and its database, as does an
# order; the proxy keeps running.  Sets GUARD_PORT: the port bloomguard had.
guard_fail_open() {
    local q0 proxy=${BG_PROXY_NAME:-the proxy}
    note "bloomguard stopped: fail open"
    GUARD_PORT=${BG_PORT[main]}
    bg_stop main
    q0=$(svc_stat .queries)
    via_proxy /user/get/42
    check_eq "existing id: 200 with the row from the service, no X-Bloomguard" \
        '200  {"id":"42","name":"user 42"}' "$HTTP_STATUS $(header X-Bloomguard) $HTTP_BODY"
    seq $((ROWS + 1)) $((ROWS + 50)) | sed 's|^|/user/get/|' >"$BG_WORK/down.paths"
    run_many "$BG_WORK/down.paths" "$BG_WORK/down.out"
    # An empty X-Bloomguard (Caddy's) comes out of curl's %header{} as a lone CR.
    check_eq "50 absent ids: all 404 from the service, no verdict" 50 \
        "$(tr -d '\r' <"$BG_WORK/down.out" | grep -c $'\t404\t$' || true)"
    check_eq "all 51 reached the database" 51 "$(($(svc_stat .queries) - q0))"
    via_proxy /orders/14/items
    check_eq "an order (the id in the middle): 200 with its row from the service" \
        '200 {"id":"14","user_id":"3"}' "$HTTP_STATUS $HTTP_BODY"
    check_cmd "$proxy is still running" kill -0 "${BG_PID[$BG_PROXY_NAME]}"
}

# guard_restarts URI_SOURCE: bloomguard restarted on GUARD_PORT with one
# template on the default filter (--postgres.table and the others change
# the global keys, which the [filter NAME] sections of GUARD_CONF would
# override; the proxy keeps its file) and [auth] uri_source URI_SOURCE:
# without a table (guard_not_ready), with deny_status = 410 (still the
# proxy's 404 for MISS, a hit still the row), with uri_source = auto
# (guard_uri_source_auto).
guard_restarts() {
    BG_CONF=$top_srcdir/conf/bloomguard.conf
    AUTH_ARGS=('--auth.uri_template=/user/get/{id}' "--auth.uri_source=$1")
    guard_not_ready "$BG_PROXY_NAME" "$GUARD_PORT" "$MISS"

    note "deny_status=410 (not a status the proxy knows) is still a miss"
    start_daemon main "${AUTH_ARGS[@]}" --server.listen="127.0.0.1:$GUARD_PORT" \
        --filter.expected_items="$ITEMS" --auth.deny_status=410 --log.level=info
    wait_ready 30 || bail "/readyz did not answer 200 within 30 s"
    expect_denied "deny_status=410" "$MISS"
    check_eq "deny_status=410: the id in the proxy's body" "{\"id\":\"$MISS\",\"exists\":false}" "$HTTP_BODY"
    via_proxy /user/get/42
    check_eq "deny_status=410: a hit still gets the row" '200 hit {"id":"42","name":"user 42"}' \
        "$HTTP_STATUS $(header X-Bloomguard) $HTTP_BODY"

    guard_uri_source_auto "$GUARD_PORT" "$MISS"
}
