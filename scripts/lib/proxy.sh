# The reverse proxies of conf/ run privately: an nginx or a Caddy whose
# config, state, logs and pid file all lie in one directory, with the
# configuration `bloomguard --print-nginx` or `--print-caddy` writes for the
# bloomguard it guards, and the placeholder addresses of what bloomguard does
# not know (the service 127.0.0.1:8081, Caddy's relay :8082, the proxy :8000)
# replaced.  Also the demo's configuration, which the shipped examples
# conf/nginx/bloomguard.conf and conf/caddy/Caddyfile are the output for.
# For tests/nginx.test, tests/caddy.test, tests/proxyconf.test, scripts/demo
# and bench.  Sourced by common.sh; start the command it sets with bg_spawn.
# shellcheck disable=SC2034  # the variables set here are for the sourcing scripts

# bg_conf_filters NAME:TABLE:COLUMN...: a [filter NAME] section per
# argument, in order (the first is the default), on stdout, each followed
# by a blank line.  For the configurations scripts, tests and bench write.
bg_conf_filters() {
    local f name table
    for f in "$@"; do
        name=${f%%:*} table=${f#*:}
        printf '[filter %s]\ntable = %s\ncolumn = %s\n\n' "$name" "${table%%:*}" "${table#*:}"
    done
}

# bg_demo_conf FILE: write scripts/demo's configuration to FILE:
# conf/bloomguard.conf with two filters, users (the default) and orders (the
# tables of sql/schema.sql), and a uri_template for each, the one of orders
# with the id in the middle of the path (examples/user_service serves both).
# [auth] uri_source stays auto: the demo pins it for the proxy it starts.
bg_demo_conf() {
    {
        cat "$BG_TOP/conf/bloomguard.conf"
        printf '\n# scripts/demo: two tables, two named filters, one daemon (users first: the default).\n'
        bg_conf_filters users:users:id orders:orders:id
        printf '[auth]\nuri_template = /user/get/{id} users\nuri_template = /orders/{id}/items orders\n'
    } >"$1"
}

# bg_demo_example nginx|caddy: what conf/nginx/bloomguard.conf or
# conf/caddy/Caddyfile holds, on stdout: `bloomguard --print-nginx` (or
# --print-caddy) for the demo's configuration on 127.0.0.1:8080, with
# uri_source pinned to the header that proxy sets, as scripts/demo runs it.
bg_demo_example() {
    local conf src rc=0
    case $1 in
        nginx) src=x-original-uri ;;
        caddy) src=x-forwarded-uri ;;
        *) bg_die "bg_demo_example: nginx or caddy, not $1" ;;
    esac
    conf=$(mktemp "${TMPDIR:-/tmp}/bloomguard-demo-conf.XXXXXX")
    bg_demo_conf "$conf"
    "${BG_BIN:-$BG_TOP/src/bloomguard}" -c "$conf" --server.listen=127.0.0.1:8080 \
        --auth.uri_source=$src "--print-$1" || rc=$?
    rm -f "$conf"
    return $rc
}

# bg_nginx_find: set BG_NGINX to an nginx with the auth_request module, or
# return 1 with BG_WHY saying what is missing.
bg_nginx_find() {
    BG_NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    BG_WHY=
    if [ ! -x "$BG_NGINX" ]; then
        BG_WHY="nginx is not installed (apt-get install nginx-light)"
    elif ! "$BG_NGINX" -V 2>&1 | grep -q http_auth_request; then
        BG_WHY="$BG_NGINX has no auth_request module (apt-get install nginx-light)"
    fi
    [ -z "$BG_WHY" ]
}

# bg_nginx_conf DIR [ERROR_LOG_LEVEL [WORKER_CONNECTIONS]] <HTTP-BLOCK: write
# DIR/nginx.conf, one worker (as root when we are root) whose pid file, error
# log and temp paths are all in DIR, with stdin as the rest of its http {}
# block (the caller's access_log, include and servers); set BG_NGINX_CMD to
# run it in the foreground.  Defaults: level warn, 1024 connections.
# BG_NGINX_MAIN: lines for the main context (load_module ...), default none.
bg_nginx_conf() {
    local dir=$1 level=${2:-warn} conns=${3:-1024}
    mkdir -p "$dir"
    {
        echo "# A private nginx: everything in $dir; runs in the foreground."
        [ "$(id -u)" -ne 0 ] || echo "user root;"
        [ -z "${BG_NGINX_MAIN:-}" ] || printf '%s\n' "$BG_NGINX_MAIN"
        cat <<EOC
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log $level;
events { worker_connections $conns; }
http {
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
EOC
        sed 's/^/    /'
        echo "}"
    } >"$dir/nginx.conf"
    BG_NGINX_CMD=("$BG_NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -g 'daemon off;')
}

# bg_nginx_example DIR SERVICE LISTEN BLOOMGUARD-ARG...: DIR/bloomguard.conf,
# for bg_nginx_conf's http block to include: what `bloomguard
# BLOOMGUARD-ARG... --print-nginx` writes (the arguments of the bloomguard
# nginx asks: its -c FILE, a --server.listen with its real port, its
# templates), with the service at SERVICE and nginx on LISTEN (HOST:PORT).
bg_nginx_example() {
    local dir=$1 service=$2 listen=$3
    shift 3
    mkdir -p "$dir"
    "${BG_BIN:-$BG_TOP/src/bloomguard}" "$@" --print-nginx >"$dir/bloomguard.conf.new" \
        || bg_die "bloomguard $* --print-nginx failed"
    sed -e "s/127\.0\.0\.1:8081/$service/" -e "s/127\.0\.0\.1:8000/$listen/" \
        "$dir/bloomguard.conf.new" >"$dir/bloomguard.conf"
    rm -f "$dir/bloomguard.conf.new"
}

# bg_nginx_module: set BG_NGINX_MODULE to the build tree's
# ngx_http_bloomguard_module.so and BG_NGINX_MAIN to the load_module line
# for it (bg_nginx_conf), and BG_NGINX_ENV to the environment nginx needs
# to find the build tree's libbloomguard; or return 1 with BG_WHY.
bg_nginx_module() {
    local build=${top_builddir:-$BG_TOP}
    BG_NGINX_MODULE=$build/nginx/ngx_http_bloomguard_module.so
    BG_WHY=
    if [ ! -f "$BG_NGINX_MODULE" ]; then
        BG_WHY="the nginx module is not built (apt-get install nginx-dev, then ./configure && make)"
        return 1
    fi
    BG_NGINX_MAIN="load_module $BG_NGINX_MODULE;"
    BG_NGINX_ENV=(env "LD_LIBRARY_PATH=$build/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
}

# bg_nginx_module_example DIR FILTER-PATH [SERVICE [LISTEN]]:
# DIR/bloomguard-module.conf, conf/nginx/bloomguard-module.conf with the
# published filter at FILTER-PATH and these HOST:PORT addresses (by default
# the shipped ones), for bg_nginx_conf's http block to include.
bg_nginx_module_example() {
    mkdir -p "$1"
    sed -e "s|/run/bloomguard/default\.bgf|$2|" -e "s/127\.0\.0\.1:8081/${3:-127.0.0.1:8081}/" \
        -e "s/127\.0\.0\.1:8000/${4:-127.0.0.1:8000}/" "$BG_TOP/conf/nginx/bloomguard-module.conf" \
        >"$1/bloomguard-module.conf"
}

# bg_caddy_find: set BG_CADDY to Caddy, or return 1 with BG_WHY.
bg_caddy_find() {
    BG_CADDY=$(command -v caddy || echo /usr/bin/caddy)
    BG_WHY=
    [ -x "$BG_CADDY" ] || BG_WHY="caddy is not installed (apt-get install caddy)"
    [ -z "$BG_WHY" ]
}

# bg_caddy_example DIR SERVICE RELAY-PORT PORT BLOOMGUARD-ARG...: DIR/Caddyfile,
# what `bloomguard BLOOMGUARD-ARG... --print-caddy` writes (as for
# bg_nginx_example), with the service at SERVICE (HOST:PORT), its relay on
# RELAY-PORT and Caddy on PORT; set BG_CADDY_CMD to run it with its state
# (autosave, certificate storage) in DIR: HOME and the XDG dirs.
bg_caddy_example() {
    local dir=$1 service=$2 relay=$3 port=$4
    shift 4
    mkdir -p "$dir/home" "$dir/config" "$dir/data"
    "${BG_BIN:-$BG_TOP/src/bloomguard}" "$@" --print-caddy >"$dir/Caddyfile.new" \
        || bg_die "bloomguard $* --print-caddy failed"
    sed -e "s/127\.0\.0\.1:8081/$service/" \
        -e "s/127\.0\.0\.1:8082/127.0.0.1:$relay/" -e "s|http://:8082|http://:$relay|" \
        -e "s|http://:8000|http://:$port|" "$dir/Caddyfile.new" >"$dir/Caddyfile"
    rm -f "$dir/Caddyfile.new"
    BG_CADDY_CMD=(env HOME="$dir/home" XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/data"
                  "$BG_CADDY" run --config "$dir/Caddyfile" --adapter caddyfile)
}
