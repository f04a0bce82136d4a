# What bench/run, bench/attack and bench/write_cost share: figures as
# medians of interleaved rounds, CPU ticks of the machine and of the run's
# own processes, the "bench: NAME ours=... anchor=... ratio=... target=... met|MISSED" lines
# and the notes of the results file, the cleanup of a run.  Source it after
# common.sh; do not run it.
# shellcheck disable=SC2034  # LINES, NOTES, R and hz are the sourcing scripts'

# bench_results: a results file's "## Results" section: the lines of the
# run (LINES) as a code block, and a blank line.
bench_results() { printf '## Results\n\n```\n'; printf '%s\n' "${LINES[@]}"; printf '```\n\n'; }

# bench_help SCRIPT: print SCRIPT's opening comment (its --help).
bench_help() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$1"; }

# The options every benchmark takes: --no-install (install=no: no
# apt-get), --no-build (build=no), --no-save (save=no: no results file),
# --notes FILE (notes_file), -h/--help.  bench_common_arg ARG...: the last
# branch of a script's own `case`; anything else is an error.  Sets
# BENCH_SHIFT, the words the option took.
install=yes build=yes save=yes notes_file=
bench_common_arg() {
    BENCH_SHIFT=1
    case $1 in
        --no-install) install=no ;;
        --no-build) build=no ;;
        --no-save) save=no ;;
        --notes) notes_file=$2; BENCH_SHIFT=2 ;;
        -h|--help) bench_help "$0"; exit 0 ;;
        *) bg_die "unknown argument $1 (see --help)" ;;
    esac
}

# ---------------------------------------------------------------- numbers --

# median NUMBER...: the median.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# ratio A B: A / B to 3 decimals (0 when B is 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}'; }
# fmt PRINTF-FORMAT NUMBER
fmt() { awk -v v="$2" -v f="$1" 'BEGIN {printf f, v}'; }
now() { date +%s.%N; }
# since T0: seconds from now's T0 until now.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }
# rel VALUE...: the values on one line, space-separated.
rel() { printf '%s\n' "$@" | tr '\n' ' ' | sed 's/ $//'; }
# ver COMMAND...: the first line COMMAND prints (a version).
ver() { "$@" 2>&1 | head -n 1; }

# R[KEY]: the values of one figure, one per round.  add KEY VALUE; med KEY.
declare -gA R=()
add() { R[$1]="${R[$1]:-} $2"; }
# shellcheck disable=SC2086  # the rounds' values are words
med() { median ${R[$1]}; }

# -------------------------------------------------------------------- CPU --
# CPU time in USER_HZ ticks (user + system).  The machine's minus this run's
# own is what other processes took from the measurements.  Clients that this
# shell started count once reaped (in its children's time).  (Softirq counts
# on both sides: a task's system time includes the loopback packet
# processing done in its syscalls.)
hz=$(getconf CLK_TCK)
cpu_machine() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# cpu_tree PID...: ticks of these processes and their live children.  A
# few forks whatever the number of processes: a PostgreSQL with 40 backends
# took a second to sample with one awk each, and the samples of a window
# must be quick to mean that window.
cpu_tree() {
    local pids=("$@")
    [ $# -gt 0 ] || { echo 0; return 0; }
    mapfile -t -O $# pids < <(pgrep -P "$(IFS=,; echo "$*")" || true)
    { cd /proc && cat "${pids[@]/%//stat}" 2>/dev/null || true; } | awk '{s += $14 + $15 + $16 + $17} END {print s + 0}'
}
# cpu_ours [PID...]: ticks of this shell (with its reaped children), of
# every process of BG_PID and of the PIDs given, and of their live children.
cpu_ours() {
    echo $(( $(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat) + $(cpu_tree "${BG_PID[@]}" "$@") ))
}
# cpu_children: ticks of this shell's reaped children.
cpu_children() { awk '{print $16 + $17}' /proc/$$/stat; }
# core_frac A B SECONDS: B - A ticks as a fraction of one core over SECONDS.
core_frac() { awk -v a="$1" -v b="$2" -v hz="$hz" -v d="$3" 'BEGIN {printf "%.2f", (b - a) / hz / d}'; }
# foreign_pct M0 M1 O0 O1 SECONDS: other processes' share (%) of both cores
# between the samples (M: cpu_machine, O: cpu_ours).
foreign_pct() {
    awk -v m="$(($2 - $1))" -v o="$(($4 - $3))" -v hz="$hz" -v el="$5" \
        'BEGIN {f = (m - o) / hz / el / 2 * 100; printf "%.1f\n", f < 0 ? 0 : f}'
}

# ------------------------------------------------------------------ report --

LINES=()
NOTES=()
# note TEXT: a line of the results file's notes (and of the log now).
note() { NOTES+=("$*"); bg_log "note: $*"; }
# line NAME OURS ANCHOR UNIT OP TARGET [PRINTF-FORMAT [TEXT]]: one "bench:"
# line, printed and kept for the results file, TEXT after the verdict; OP
# "none" prints "target=none" and no verdict.  Format by default %.0f.
# With LINE_FAILED set (LINE_FAILED=why line ...) the verdict is "FAILED"
# whatever the ratio, and why follows: the figure measured nothing (a
# follower that did not follow).  With LINE_RATIO set, that is the ratio
# judged and printed instead of OURS / ANCHOR (bench/write_cost: the median
# of its rounds' own ratios, OURS and ANCHOR being the medians of their
# figures).
line() {
    local name=$1 ours=$2 anchor=$3 unit=$4 op=$5 target=$6 f=${7:-%.0f} r met l
    r=${LINE_RATIO:-$(ratio "$ours" "$anchor")}
    met=$(awk -v r="$r" -v t="$target" -v op="$op" 'BEGIN {ok = (op == "<=") ? r <= t : r >= t; print ok ? "met" : "MISSED"}')
    [ "$op" = none ] && { op=; target=none; met=; }
    [ -n "${LINE_FAILED:-}" ] && met="FAILED ($LINE_FAILED)"
    l="bench: $name ours=$(fmt "$f" "$ours")$unit anchor=$(fmt "$f" "$anchor")$unit ratio=$r target=$op$target${met:+ $met}${8:+ $8}"
    LINES+=("$l")
    echo "$l"
}

# bench_pg_pin CPUS: the PostgreSQL of bg_pg_start on CPUS (a taskset
# list) from now on; backends and walsenders fork from the postmaster and
# inherit its cores.
bench_pg_pin() {
    local p master
    master=$(head -n 1 "$BG_PG_DIR/pg/postmaster.pid")
    for p in $master $(pgrep -P "$master"); do taskset -apc "$1" "$p" >/dev/null; done
}

# bench_cleanup: the EXIT trap of a run in $work: bloomguard's last log
# lines when it failed, every process of BG_PID stopped, the PostgreSQL of
# bg_pg_start stopped, $work removed (kept with BG_BENCH_KEEP set).
bench_cleanup() {
    local rc=$?
    if [ $rc -ne 0 ] && [ -s "${BG_LOG[bloomguard]:-}" ]; then
        bg_log "bloomguard's log ends:"
        tail -n 20 "${BG_LOG[bloomguard]}" >&2
    fi
    bg_stop_all
    bg_pg_stop
    # Lazily: a reader (nginx) still stopping must not keep the mount.
    [ -z "${BENCH_PUBDIR_MOUNTED:-}" ] || umount -l "$BENCH_PUBDIR"
    [ -z "${BENCH_PUBDIR:-}" ] || rm -rf "$BENCH_PUBDIR"
    if [ -n "${BG_BENCH_KEEP:-}" ]; then bg_log "kept $work"; else rm -rf "$work"; fi
}

# bench_pubdir: BENCH_PUBDIR, a directory of this user's own for
# [server] publish_dir (readers trust only such: $work, which bg_pg_start
# gives to postgres when run as root, is refused), removed by bench_cleanup.
# On a tmpfs (/dev/shm) where there is one, as the shipped /run/bloomguard
# is: the published files are the filters' memory, and in /tmp on a disk
# (this VM's) every insert dirties pages the kernel then writes back.
# As root, a tmpfs of its own mounted huge=within_size, as the shipped
# run-bloomguard.mount does for /run/bloomguard (docs/operations.md
# "Huge pages for the published filters"): each 2 MiB of a filter's layers one huge page, where /run and
# /dev/shm (huge=never) give 4 KiB pages and a TLB miss per lookup
# (issue 39).  BENCH_PUBDIR_PAGES says which ("huge=within_size" or
# "4 KiB": not root, or the mount refused); BENCH_HUGE=no keeps 4 KiB.
bench_pubdir() {
    local parent=/tmp
    [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] && parent=/dev/shm
    BENCH_PUBDIR=$(mktemp -d "$parent/bloomguard-publish.XXXXXX") || bg_die "mktemp failed"
    BENCH_PUBDIR_PAGES="4 KiB"
    if [ "$(id -u)" = 0 ] && [ "${BENCH_HUGE:-yes}" != no ] \
        && mount -t tmpfs -o huge=within_size,mode=0755,nosuid,nodev bloomguard-bench "$BENCH_PUBDIR"; then
        BENCH_PUBDIR_MOUNTED=1
        BENCH_PUBDIR_PAGES=huge=within_size
    fi
    chmod 755 "$BENCH_PUBDIR"
}

# ---------------------------------------------------------------- pgbench --
# bench/write_cost and bench/fleet insert into tables wc_NAME with pgbench.

# wc_rows NAME: the rows in wc_NAME.  wc_seqval NAME: its identity's last value.
wc_rows() { psql -qXAt -c "SELECT count(*) FROM wc_$1"; }
wc_seqval() { psql -qXAt -c "SELECT last_value FROM wc_${1}_id_seq"; }
# pgbench_connected CLIENTS: pgbench's sessions are all up (true once it has
# exited, so that a wait for it ends).
pgbench_connected() {
    bg_alive pgbench || return 0
    [ "$(psql -qXAt -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" -ge "$1" ]
}
