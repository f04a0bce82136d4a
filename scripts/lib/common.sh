# The entry of bloomguard's shell library, for scripts/, bench/ and (through
# tests/lib.sh) tests/: logging, package installs and builds here, and the
# rest of scripts/lib by concern: pg.sh (a throwaway PostgreSQL), daemon.sh
# (processes, ports, readiness), http.sh (curl and jq), proxy.sh (private
# nginx and Caddy).  checks.sh (tests) and bench.sh (benchmarks) are sourced
# by those who need them.  Source it; do not run it.

# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2034  # the package lists and tool names are the sourcing scripts'
BG_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${BG_TOP:=$(cd "$BG_LIB/../.." && pwd)}"

bg_log() { printf '%s: %s\n' "${BG_SCRIPT:-bloomguard}" "$*" >&2; }
# bg_die MSG: a fatal error.  Every helper of the library reports its
# failures through it; tests/lib.sh makes it a TAP "Bail out!".
bg_die() { bg_log "error: $*"; exit 1; }

# bg_at_exit CMD: CMD runs once when the script ends, however it ends; Ctrl-C
# and TERM end it with 130 and 143.  While CMD runs, INT and TERM are ignored:
# a second signal (Ctrl-C pressed twice, or timeout(1) passing one on beside
# the terminal's) would otherwise cut the cleanup short and leave a
# PostgreSQL running and its directory behind.
bg_at_exit() {
    BG_AT_EXIT=$1
    trap 'bg_at_exit_run $?' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
# The exit status is handed on (cleanups read it in $? to show a log on
# failure), and set -e is off: one step that fails does not skip the rest.
bg_at_exit_run() {
    trap '' INT TERM
    set +e
    (exit "$1")
    eval "$BG_AT_EXIT"
}

# bg_wait_for SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds
# (return 0) or about SECONDS have passed (return 1).  In this shell, not a
# subshell: COMMAND may set variables or call bg_die.
bg_wait_for() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 10; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

# bg_need_pkgs PKG...: install the Debian packages that are missing.
bg_need_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    bg_log "installing ${missing[*]}"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt or dpkg (unattended-upgrades, a second script
    # installing at the same time) instead of failing: the timeout covers
    # dpkg's lock, not the package lists' lock that `update` takes, so
    # that one is retried.
    local tries=0
    until $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>"${TMPDIR:-/tmp}/bg-apt.$$"; do
        if ! grep -q 'Could not get lock' "${TMPDIR:-/tmp}/bg-apt.$$" || [ $((tries += 1)) -ge 120 ]; then
            cat "${TMPDIR:-/tmp}/bg-apt.$$" >&2
            rm -f "${TMPDIR:-/tmp}/bg-apt.$$"
            bg_die "apt-get update failed"
        fi
        sleep 5
    done
    rm -f "${TMPDIR:-/tmp}/bg-apt.$$"
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || bg_die "apt-get install ${missing[*]} failed"
}

# The packages a build and the test suite need.
BG_BUILD_PKGS="autoconf automake pkg-config make gcc libc6-dev libmicrohttpd-dev
libjansson-dev libpq-dev check libxxhash-dev libinih-dev libsystemd-dev
libcurl4-gnutls-dev"
# libbloomguard is built with libtool; the nginx module against nginx-dev
# (tests/zerohop.test, bench/attack --module).
BG_BUILD_PKGS="$BG_BUILD_PKGS libtool nginx-dev"
BG_RUNTIME_PKGS="postgresql postgresql-client curl procps"
# jq: the JSON reader of http.sh (tests, bench, scripts).
BG_RUNTIME_PKGS="$BG_RUNTIME_PKGS jq"
# What the tests of the unit, the man page and /metrics run.
BG_TEST_PKGS="nginx-light systemd prometheus groff-base man-db socat pgbouncer"
# tests/caddy.test: the Caddyfile example behind a real Caddy.
BG_TEST_PKGS="$BG_TEST_PKGS caddy"
# The clients of published filters (tests/pyclient.test, tests/goclient.test):
# a venv of Debian's python3 that pip installs clients/python into offline,
# and Go 1.19 with cgo for clients/go.
BG_TEST_PKGS="$BG_TEST_PKGS python3-venv python3-setuptools python3-wheel golang-go"
# tests/kubernetes.test: the examples' YAML, checked against the Kubernetes
# API's models of the Python client.
BG_TEST_PKGS="$BG_TEST_PKGS yamllint python3-yaml python3-kubernetes"
# What scripts/systemd-test needs to build the .deb and boot it.
BG_DEB_PKGS="debhelper dpkg-dev lintian debootstrap systemd-container"
# What scripts/container-test needs besides those: podman to import the base
# and mount the image, buildah to build it (chroot isolation, no runtime),
# python3 for the http.server that the nginx image's requests reach.
BG_CONTAINER_PKGS="podman buildah python3"

# bg_build [configure args...]: autoreconf, configure and make in the top dir.
bg_build() {
    (cd "$BG_TOP" && { [ -x configure ] || autoreconf -fi >/dev/null; } \
        && { [ -f Makefile ] || ./configure -q "$@"; } \
        && make -s -j"$(nproc)" >/dev/null) || bg_die "build failed"
}

# What scripts/fuzz and scripts/test --sanitize add: clang with libFuzzer and
# the sanitizer runtimes (libclang-rt), llvm-symbolizer for reports with
# file:line.
BG_SANITIZE_PKGS="clang-14 libclang-rt-14-dev llvm-14"
BG_CLANG=clang-14
BG_SYMBOLIZER=/usr/lib/llvm-14/bin/llvm-symbolizer

# bg_build_copy DIR [configure args...]: copy the tree to DIR with `make
# distdir` (exactly what distcheck builds) and configure it there with the
# given arguments (e.g. CC=clang CFLAGS=...), for a second build that leaves
# the in-tree one alone.  A copy because autoconf refuses an out-of-tree
# build of a source dir that is configured in place.  Builds nothing.
bg_build_copy() {
    local dir=$1; shift
    (cd "$BG_TOP" && { [ -x configure ] || autoreconf -fi >/dev/null; } \
        && { [ -f Makefile ] || ./configure -q --enable-werror; }) || bg_die "configure failed"
    rm -rf "$dir"
    mkdir -p "$(dirname "$dir")"
    make -s -C "$BG_TOP" distdir distdir="$dir" >/dev/null || bg_die "make distdir failed"
    (cd "$dir" && ./configure -q "$@") >"$dir.configure.log" 2>&1 \
        || { tail -n 30 "$dir.configure.log" >&2; bg_die "configure $* failed (see $dir.configure.log)"; }
}

. "$BG_LIB/pg.sh"
. "$BG_LIB/daemon.sh"
. "$BG_LIB/http.sh"
. "$BG_LIB/proxy.sh"
