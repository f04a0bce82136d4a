# The Debian package built from the tree and Debian 12 roots made with
# debootstrap, for the tests that install the package somewhere of its own:
# scripts/systemd-test (boots it under systemd-nspawn) and
# scripts/container-test (the container image).  Source it after
# common.sh; do not run it.  Needs root for debootstrap.

# bg_deb_build WORK: build the packages (dpkg-buildpackage -us -uc -b, no
# tests: the suite runs in scripts/test) from a copy of the tree (tracked
# and new files, no build outputs: a configured checkout stays as it is),
# in WORK/build; its log is WORK/build.log.  Sets BG_DEB_VERSION and BG_DEB
# (the bloomguard .deb); the other .debs are beside it.
bg_deb_build() {
    local work=$1 src
    BG_DEB_VERSION=$(sed -n '1s/^bloomguard (\([^)]*\)).*/\1/p' "$BG_TOP/debian/changelog")
    src=$work/build/bloomguard-$BG_DEB_VERSION
    mkdir -p "$src"
    if git -C "$BG_TOP" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$BG_TOP" && git ls-files -z -co --exclude-standard | tar -c --null -T - -f -) | tar -x -C "$src"
    else
        cp -a "$BG_TOP/." "$src"
        (cd "$src" && { [ ! -f Makefile ] || make -s distclean >/dev/null; })
    fi
    bg_log "building the package (dpkg-buildpackage -us -uc -b; the test suite runs in scripts/test)"
    (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
        >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; bg_die "dpkg-buildpackage failed"; }
    BG_DEB=$(ls "$work"/build/bloomguard_"$BG_DEB_VERSION"_*.deb)
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

# bg_debootstrap ROOT SUITE PACKAGES LOG: a --variant=minbase root of SUITE
# in ROOT with PACKAGES (comma-separated) added, from the mirror apt uses;
# its output in LOG (the last lines shown when it fails).  In a mount
# namespace of its own: the /proc and /sys it mounts in the root go away
# with it, even if it is killed.
bg_debootstrap() {
    local root=$1 suite=$2 pkgs=$3 log=$4 mirror
    mirror=$(bg_deb_mirror "$suite")
    bg_log "making a $suite root in $root (debootstrap --variant=minbase from $mirror)"
    unshare --mount --propagation private \
        debootstrap --variant=minbase --include="$pkgs" "$suite" "$root" "$mirror" >"$log" 2>&1 \
        || { tail -n 30 "$log"; return 1; }
    rm -rf "$root/var/cache/apt/archives/"*.deb
}
