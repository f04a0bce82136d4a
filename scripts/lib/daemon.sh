# Processes the scripts and tests start and stop by name: bloomguard,
# examples/user_service, proxies, load generators.  A name's pid, port and
# log are in BG_PID, BG_PORT and BG_LOG; ports come from bg_free_port or
# from the "listening on" line of a server started on port 0; readiness is
# /readyz or any HTTP answer.  Sourced by common.sh; needs bg_die,
# bg_wait_for and curl.
# shellcheck disable=SC2034  # the variables set here are for the sourcing scripts

declare -gA BG_PID=() BG_PORT=() BG_LOG=()

# bg_free_port VAR: set VAR to a loopback TCP port nothing listens on, below
# the usual ephemeral range (32768-60999), and not given out before by this
# shell (a variable, not $(...), so that the subshell does not forget it),
# for servers that cannot bind port 0 and say which port they got.
BG_USED_PORTS=" "
bg_free_port() {
    local _bg_p _bg_i
    for ((_bg_i = 0; _bg_i < 1000; _bg_i++)); do
        _bg_p=$((20000 + RANDOM % 12000))
        case $BG_USED_PORTS in *" $_bg_p "*) continue ;; esac
        awk -v p="$(printf ':%04X' "$_bg_p")" '$2 ~ p"$" { found = 1 } END { exit !found }' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null && continue
        BG_USED_PORTS+="$_bg_p "
        printf -v "$1" %s "$_bg_p"
        return 0
    done
    bg_die "no free port"
}

# bg_spawn NAME LOG COMMAND...: run COMMAND in the background, stdin from
# /dev/null, stdout and stderr appended to LOG (created now: the child
# opens it only when it gets to run); sets BG_PID[NAME] and BG_LOG[NAME].
# In this shell, not $(...): only the parent can wait for its child.
bg_spawn() {
    local name=$1 log=$2
    shift 2
    : >>"$log"
    "$@" </dev/null >>"$log" 2>&1 &
    BG_PID[$name]=$!
    BG_LOG[$name]=$log
}

# bg_alive NAME: NAME's process is still running.
bg_alive() { [ -n "${BG_PID[$1]:-}" ] && kill -0 "${BG_PID[$1]}" 2>/dev/null; }

# bg_listen_port NAME [SECONDS]: set BG_PORT[NAME] from the first
# "listening on http[s]://HOST:PORT" line that NAME (bloomguard or
# examples/user_service, started on port 0) wrote to BG_LOG[NAME], waiting
# up to SECONDS (default 30).  Dies when NAME exits first or never says.
bg_listen_port() {
    bg_wait_for "${2:-30}" _bg_port_logged "$1" && return 0
    tail -n 20 "${BG_LOG[$1]}" >&2
    bg_die "$1 logged no 'listening on http://HOST:PORT' line within ${2:-30} s (log: ${BG_LOG[$1]})"
}
_bg_port_logged() {
    local name=$1 log=${BG_LOG[$1]} p
    [ -f "$log" ] || bg_die "$name: its log $log vanished (is something deleting it?)"
    p=$(sed -n 's|.*listening on https\{0,1\}://[^ ]*:\([0-9][0-9]*\).*|\1|p' "$log" | head -n 1)
    [ -n "$p" ] && { BG_PORT[$name]=$p; return 0; }
    bg_alive "$name" || { tail -n 20 "$log" >&2; bg_die "$name exited before listening (log: $log)"; }
    return 1
}

# bg_wait_ready NAME [SECONDS]: poll bloomguard NAME's /readyz on
# 127.0.0.1:BG_PORT[NAME] until it answers 200, for up to SECONDS (default
# 30 minutes: a first load can be that long); dies with its log's tail as
# soon as it has exited.
bg_wait_ready() {
    bg_wait_for "${2:-1800}" _bg_readyz "$1" || bg_die "$1 not ready after ${2:-1800} s"
}
_bg_readyz() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${BG_PORT[$1]}/readyz")" = 200 ] && return 0
    bg_alive "$1" || { tail -n 20 "${BG_LOG[$1]}" >&2; bg_die "$1 exited (log: ${BG_LOG[$1]})"; }
    return 1
}

# bg_wait_http URL NAME [SECONDS]: wait until URL gets any HTTP answer
# (a proxy is up); false when NAME has exited or SECONDS (default 10) passed.
bg_wait_http() {
    local url=$1 name=$2 i
    for ((i = 0; i < ${3:-10} * 10; i++)); do
        curl -s -o /dev/null --max-time 2 "$url" && return 0
        bg_alive "$name" || return 1
        sleep 0.1
    done
    return 1
}

# bg_stop_pid PID SIGNAL: signal PID, wait up to 10 s, SIGKILL if needed;
# sets BG_EXIT to the exit status ("timeout" when it had to be killed).
# Runs in the starting shell: only the parent can collect a child's status.
bg_stop_pid() {
    local pid=$1 sig=$2
    BG_EXIT=0
    kill -s "$sig" "$pid" 2>/dev/null || true
    if ! bg_wait_for 10 _bg_gone "$pid"; then
        kill -s KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        BG_EXIT=timeout
        return 0
    fi
    wait "$pid" 2>/dev/null || BG_EXIT=$?
}

_bg_gone() { ! kill -0 "$1" 2>/dev/null; }

# bg_stop NAME [SIGNAL]: stop NAME (default SIGTERM) as bg_stop_pid does
# and forget its pid.
bg_stop() {
    local name=$1
    bg_stop_pid "${BG_PID[$name]}" "${2:-TERM}"
    unset "BG_PID[$name]"
}

# bg_stop_all: SIGTERM to every named process at once, then bg_stop each
# (for cleanup traps).
bg_stop_all() {
    local name
    for name in "${!BG_PID[@]}"; do kill "${BG_PID[$name]}" 2>/dev/null || true; done
    for name in "${!BG_PID[@]}"; do bg_stop "$name"; done
}
