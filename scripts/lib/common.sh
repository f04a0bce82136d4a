# Shared helpers for bloomguard's scripts: package installs and a throwaway
# PostgreSQL cluster on a private unix socket.  Source it; do not run it.

bg_log() { printf '%s: %s\n' "${BG_SCRIPT:-bloomguard}" "$*" >&2; }
bg_die() { bg_log "error: $*"; exit 1; }

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
    # Wait for another apt or dpkg (unattended-upgrades) instead of failing.
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null || bg_die "apt-get update failed"
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || bg_die "apt-get install ${missing[*]} failed"
}

# The packages a build and the test suite need.
BG_BUILD_PKGS="autoconf automake pkg-config make gcc libc6-dev libmicrohttpd-dev
libjansson-dev libpq-dev check libxxhash-dev libinih-dev libsystemd-dev"
BG_RUNTIME_PKGS="postgresql postgresql-client curl procps"
# What the tests of the unit, the man page and /metrics run.
BG_TEST_PKGS="nginx-light systemd prometheus groff-base man-db socat pgbouncer"
# tests/caddy.test: the Caddyfile example behind a real Caddy.
BG_TEST_PKGS="$BG_TEST_PKGS caddy"
# What scripts/systemd-test needs to build the .deb and boot it.
BG_DEB_PKGS="debhelper dpkg-dev lintian debootstrap systemd-container"

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
# DIR; exports PGHOST, PGPORT, PGUSER, PGDATABASE for libpq and psql.
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
    case $1 in
        start) bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
                   -o "-k $dir -c listen_addresses='' -p 5432 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
                   start >/dev/null ;;
        stop) bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$dir/pg" -m fast -w -t 60 stop >/dev/null ;;
    esac
}

bg_pg_stop() {
    [ -n "${BG_PG_DIR:-}" ] && [ -d "$BG_PG_DIR/pg" ] || return 0
    bg_as_pg "$BG_PG_BIN/pg_ctl" -D "$BG_PG_DIR/pg" -m immediate -w stop >/dev/null 2>&1 || true
}

# bg_pg_sample ROWS: create sql/schema.sql's users table with ROWS rows.
bg_pg_sample() {
    psql -qX -v ON_ERROR_STOP=1 -f "$BG_TOP/sql/schema.sql" >/dev/null || bg_die "schema.sql failed"
    psql -qX -v ON_ERROR_STOP=1 -v rows="$1" -f "$BG_TOP/sql/sample.sql" >/dev/null || bg_die "sample.sql failed"
}

# bg_free_port VAR: set VAR to a loopback TCP port nothing listens on, below
# the usual ephemeral range (32768-60999), and not given out before by this
# shell (a variable, not $(...), so that the subshell does not forget it).
BG_USED_PORTS=" "
bg_free_port() {
    local p i
    for ((i = 0; i < 1000; i++)); do
        p=$((20000 + RANDOM % 12000))
        case $BG_USED_PORTS in *" $p "*) continue ;; esac
        awk -v p="$(printf ':%04X' "$p")" '$2 ~ p"$" { found = 1 } END { exit !found }' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null && continue
        BG_USED_PORTS+="$p "
        printf -v "$1" %s "$p"
        return 0
    done
    bg_die "no free port"
}

# bg_wait_ready URL PID LOG: poll URL/readyz (a bloomguard) until it answers
# 200, for up to 30 minutes (a first load can be that long); die with LOG's
# tail as soon as PID has exited.
bg_wait_ready() {
    local i
    for ((i = 0; i < 36000; i++)); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/readyz")" = 200 ] && return 0
        kill -0 "$2" 2>/dev/null || { tail -n 20 "$3" >&2; bg_die "bloomguard ($3) exited"; }
        sleep 0.05
    done
    bg_die "bloomguard ($3) not ready after 30 minutes"
}

# bg_listen_port LOG: the port of the first "listening on
# http://127.0.0.1:PORT" line that bloomguard or examples/user_service
# (started with port 0) writes to LOG, waiting up to 30 s for it.
bg_listen_port() {
    local i p
    for ((i = 0; i < 600; i++)); do
        p=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$1" 2>/dev/null | head -n 1)
        [ -n "$p" ] && { echo "$p"; return 0; }
        sleep 0.05
    done
    tail -n 20 "$1" >&2
    bg_die "no 'listening on' line in $1"
}
