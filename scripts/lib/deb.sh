# The Debian packages built from the tree and Debian 12 roots made with
# debootstrap, for the scripts that install the packages somewhere of their
# own: scripts/systemd-test (boots a root under systemd-nspawn) and
# scripts/container-test (the container images).  Source it after
# common.sh; do not run it.  Needs root for debootstrap and chroot.
#
# One build and one debootstrap serve a whole run: with BG_DEB_SHARE set to
# a directory (.ci/run makes one for its run and removes it at the end), the
# first script builds the packages and the bare root there and the next
# ones reuse them, each keyed (the packages by the tree's contents, a root
# by its suite, recipe and package list) and made under a lock, so that a
# changed tree or a script running at the same time never gets another's.
# Without it each script makes its own in its WORK.  Nothing else is kept:
# a fresh machine pays what a run here pays.

# shellcheck disable=SC2034  # BG_DEB*, BG_ROOT: for the sourcing scripts

# Bump when the way a root is made changes (not its package list).
BG_DEB_ROOT_RECIPE=2
# The suite of the roots the scripts install into: Debian 12.
BG_DEB_SUITE=bookworm

# bg_deb_why_not WHAT UNSHARE_OPTION...: on stdout, why this machine cannot
# make a root and run it (WHAT needs root; the mounts and namespaces need
# CAP_SYS_ADMIN, bit 21 of the effective set; `unshare UNSHARE_OPTION...`
# must work); nothing when it can.
bg_deb_why_not() {
    local what=$1 capeff
    shift
    capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
    if [ "$(id -u)" -ne 0 ]; then
        echo "$what need root"
    elif ! (( (16#$capeff >> 21) & 1 )); then
        echo "no CAP_SYS_ADMIN here (an unprivileged container?)"
    elif ! unshare "$@" true 2>/dev/null; then
        echo "cannot make the namespaces it needs (unshare $* failed)"
    fi
}

# _bg_deb_dir WORK NAME: where NAME is made: in BG_DEB_SHARE, or in WORK.
_bg_deb_dir() { echo "${BG_DEB_SHARE:-$1}/$2"; }

# _bg_deb_files: the tree's files (tracked and new, no build outputs), NUL
# separated, relative to BG_TOP; without git, every file.
_bg_deb_git() { git -C "$BG_TOP" rev-parse --git-dir >/dev/null 2>&1; }
_bg_deb_files() {
    if _bg_deb_git; then
        git -C "$BG_TOP" ls-files -z -co --exclude-standard
    else
        (cd "$BG_TOP" && find . -path ./.git -prune -o -type f -print0)
    fi
}

# _bg_deb_tree_key: a digest of the tree's files, names, contents and modes
# (a deleted file still listed by git changes it too: tar's error is
# ignored, the file is left out).
_bg_deb_tree_key() {
    { _bg_deb_files | (cd "$BG_TOP" && tar -c --null -T - --sort=name --mtime=@0 --owner=0 --group=0 \
        --numeric-owner -f - 2>/dev/null) || true; } | sha256sum | cut -c1-16
}

# bg_deb_build WORK: the packages (dpkg-buildpackage -us -uc -b, no tests:
# the suite runs in scripts/test) built from a copy of the tree (tracked
# and new files, no build outputs: a configured checkout stays as it is),
# or the ones an earlier script of the run built from the same tree.  Sets
# BG_DEB_VERSION, BG_DEB_DIR (the .debs), BG_DEB (the bloomguard .deb in
# it) and BG_DEB_LOG (dpkg-buildpackage's output).  Do not write to
# BG_DEB_DIR: copy what you need.
bg_deb_build() {
    local work=$1 dir key src lock
    BG_DEB_VERSION=$(sed -n '1s/^bloomguard (\([^)]*\)).*/\1/p' "$BG_TOP/debian/changelog")
    dir=$(_bg_deb_dir "$work" debs)
    key=$(_bg_deb_tree_key)
    mkdir -p "$(dirname "$dir")"
    exec {lock}>"$dir.lock"
    flock "$lock"
    if [ "$(cat "$dir/key" 2>/dev/null)" = "$key" ]; then
        bg_log "using the packages an earlier step built from this tree ($dir)"
    else
        rm -rf "$dir"
        src=$dir/bloomguard-$BG_DEB_VERSION
        mkdir -p "$src"
        _bg_deb_files | (cd "$BG_TOP" && tar -c --null -T - -f -) | tar -x -C "$src"
        _bg_deb_git || (cd "$src" && { [ ! -f Makefile ] || make -s distclean >/dev/null; })
        bg_log "building the packages (dpkg-buildpackage -us -uc -b; the test suite runs in scripts/test)"
        (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
            >"$dir/build.log" 2>&1 || { tail -n 40 "$dir/build.log"; bg_die "dpkg-buildpackage failed"; }
        # The key last: a build that died half way is not reused.
        echo "$key" >"$dir/key"
    fi
    exec {lock}>&-
    BG_DEB_DIR=$dir BG_DEB_LOG=$dir/build.log
    BG_DEB=$(ls "$dir"/bloomguard_"$BG_DEB_VERSION"_*.deb)
}

# bg_deb_depends DEB: the packages DEB depends on, one a line (the first
# of each alternative, no versions).
bg_deb_depends() {
    dpkg-deb -f "$1" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/[[:space:]]//g' | grep -v '^$'
}

# bg_deb_mirror SUITE: the mirror apt uses here for SUITE's main (after an
# apt-get update if apt knows none yet); dies when there is none.
bg_deb_mirror() {
    local m
    m=$(_bg_deb_mirror "$1")
    if [ -z "$m" ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        m=$(_bg_deb_mirror "$1")
    fi
    [ -n "$m" ] || bg_die "no Debian $1 main repository among apt's sources (/etc/apt/sources.list*)"
    echo "$m"
}
_bg_deb_mirror() {
    apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null \
        | awk -v s="$1" '$2 == s && $3 == "main" {print $1; exit}'
}

# bg_deb_root WORK SUITE [PKG...]: sets BG_ROOT to a root of Debian SUITE
# made with debootstrap --variant=minbase, bare without PKGs (a container
# image's base: what an image needs, its packages declare), else with PKGs
# and what they depend on installed by apt-get (no recommends, as
# debootstrap --include).  The bare root is made once and each package
# list's root is a copy of it, made once.  Do not write to BG_ROOT: boot
# it with --volatile=overlay, import a copy.  The logs are beside it.
bg_deb_root() {
    local work=$1 suite=$2 dir base key root lock
    shift 2
    dir=$(_bg_deb_dir "$work" roots)
    mkdir -p "$dir"
    exec {lock}>"$dir/lock"
    flock "$lock"
    base=$dir/$suite-minbase-$BG_DEB_ROOT_RECIPE
    if [ -x "$base/usr/bin/apt-get" ]; then
        bg_log "using the $suite base an earlier step made ($base)"
    else
        rm -rf "$base.new"
        bg_debootstrap "$base.new" "$suite" "$base.log" || bg_die "debootstrap failed"
        mv "$base.new" "$base"
    fi
    root=$base
    if [ $# -gt 0 ]; then
        key=$(printf '%s\n' "$@" | sort -u | sha256sum | cut -c1-16)
        root=$dir/$suite-$BG_DEB_ROOT_RECIPE-$key
        if [ -f "$root.done" ]; then
            bg_log "using the $suite root with these packages an earlier step made ($root)"
        else
            bg_log "making a $suite root with $# packages in $root (a copy of the base; apt-get install)"
            rm -rf "$root"
            cp -a --reflink=auto "$base" "$root"
            _bg_deb_apt_install "$root" "$root.log" "$@" || bg_die "apt-get install in the $suite root failed"
            touch "$root.done"
        fi
    fi
    exec {lock}>&-
    BG_ROOT=$root
}

# bg_debootstrap ROOT SUITE LOG: a bare --variant=minbase root of SUITE in
# ROOT, from the mirror apt uses, without the downloaded packages and
# package lists (as Debian's own container images: 49 MB of lists, which
# anything that installs fetches afresh); its output in LOG (the last
# lines shown when it fails).  In a mount namespace of its own: the /proc
# and /sys it mounts in the root go away with it, even if it is killed.
bg_debootstrap() {
    local root=$1 suite=$2 log=$3 mirror
    mirror=$(bg_deb_mirror "$suite")
    bg_log "making a $suite base in $root (debootstrap --variant=minbase from $mirror)"
    unshare --mount --propagation private \
        debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1 \
        || { tail -n 30 "$log"; return 1; }
    rm -rf "$root/var/cache/apt/archives/"*.deb
    find "$root/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete
}

# _bg_deb_apt_install ROOT LOG PKG...: apt-get install PKGs in ROOT (its
# sources are debootstrap's: the mirror), chrooted in a mount namespace of
# its own with /proc and /dev, as debootstrap installs; no service starts
# (policy-rc.d says no while it runs).  Output in LOG.
_bg_deb_apt_install() {
    local root=$1 log=$2
    shift 2
    unshare --mount --propagation private sh -euc '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        printf "#!/bin/sh\nexit 101\n" >"$root/usr/sbin/policy-rc.d"
        chmod 755 "$root/usr/sbin/policy-rc.d"
        rc=0
        chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c "apt-get update -q &&
            apt-get install -y -q --no-install-recommends \"\$@\" && apt-get clean" sh "$@" || rc=$?
        rm -f "$root/usr/sbin/policy-rc.d"
        find "$root/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete
        exit $rc' sh "$root" "$@" >"$log" 2>&1 || { tail -n 30 "$log"; return 1; }
}
