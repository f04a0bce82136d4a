# Checks for bloomguard's tests: one "ok - ..." / "not ok - ..." line per
# check, with what was expected and what came instead, and the rule for a
# missing prerequisite (skip, or fail where the run must be complete).
# tests/lib.sh sources it; it needs http.sh for the assert_* of the last
# HTTP answer.  Source it; do not run it.

BG_FAILS=0
BG_CHECKS=0

note() { printf '# %s\n' "$*"; }

# bail MSG: a hard error of the test itself (setup failed): exit 1 now.
bail() { printf 'Bail out! %s\n' "$*"; exit 1; }

# --------------------------------------------------------- prerequisites --
# The one skip-or-fail rule.  A test whose prerequisite is missing (a
# reachable PostgreSQL, curl, jq, nginx, promtool, ...) skips: exit 77,
# automake's SKIP.  Where the run must be complete, BLOOMGUARD_REQUIRE_PG=1
# (scripts/test, which installs every package a test needs, sets it), a
# missing prerequisite fails the test instead.

# prerequisites_required: true when a missing prerequisite is a failure.
prerequisites_required() { [ "${BLOOMGUARD_REQUIRE_PG:-0}" = 1 ]; }

# prerequisite_missing WHY: skip the test (or fail it, see above), saying WHY.
prerequisite_missing() {
    if prerequisites_required; then
        printf 'FAIL: %s, and BLOOMGUARD_REQUIRE_PG=1\n' "$1"
        exit 1
    fi
    printf 'SKIP: %s\n' "$1"
    exit 77
}

# need_tool COMMAND WHY: COMMAND (a name on PATH or a path) must be there.
need_tool() { command -v "$1" >/dev/null || prerequisite_missing "$2"; }

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

# check_not_contains DESC HAYSTACK NEEDLE: HAYSTACK does not hold NEEDLE.
check_not_contains() {
    case $2 in
        *"$3"*) fail "$1" "expected not to contain: $(show "$3")" "                    got: $(show "$2")" ;;
        *) pass "$1" ;;
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

# ------------------------------------------------- the last HTTP answer --
# Checks of what http (http.sh) set: HTTP_STATUS, HTTP_BODY, HTTP_CT.

# assert_status DESC EXPECTED: the last response's status (shows the body).
assert_status() {
    if [ "$HTTP_STATUS" = "$2" ]; then
        pass "$1"
    else
        fail "$1" "expected: status $2" "     got: status $HTTP_STATUS, body $(show "$HTTP_BODY")"
    fi
}

# assert_json_field DESC FILTER EXPECTED: json_get's FILTER of the last
# response body is EXPECTED, e.g. .status '"ok"', .exists true, .inserted 3.
assert_json_field() {
    local got
    got=$(json_get "$HTTP_BODY" "$2")
    if [ "$got" == "$3" ]; then
        pass "$1"
    else
        fail "$1" "expected: $2 = $3" "     got: $2 = $got in body $(show "$HTTP_BODY") (status $HTTP_STATUS)"
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
    err=$(json_get "$HTTP_BODY" .error)
    msg=$(json_get "$HTTP_BODY" .message)
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
