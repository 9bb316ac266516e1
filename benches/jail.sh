#!/usr/bin/env bash
# Whole-process cost of starting a program in the host jail, in one run:
#   warden jail -- /bin/true   vs   /bin/true   vs   bwrap (all namespaces) /bin/true
# and, when a C compiler is present, the floor of any launcher: a static C program that only
# vforks, execs /bin/true and waits (no sandbox at all).
# Targets: warden ≤ 3 ms median, ≤ 0.3 × bwrap and ≤ 1.7 × the C floor. Uses the release build.
# Then each step of warden's jail, median over STEP_RUNS runs of WARDEN_JAIL_TRACE=1 (wall and
# warden's CPU time in µs; the child's steps until execve have wall time only).
#
#   benches/jail.sh            # 300 runs each (RUNS=N to change), 100 traced (STEP_RUNS=N)
#   SPACED=1 benches/jail.sh   # 50 ms pause before each run, as between an agent's commands
#                              # (kernel caches such as RCU-synced cgroup locks go cold)
#   WARDEN=path benches/jail.sh  # another warden binary (no build)
#   BEFORE=path benches/jail.sh  # and an older binary in the same run ("warden before")
#
# hyperfine is used when installed (apt-get install -y hyperfine), else (or with INTERLEAVE=1) a
# loop timed with bash's $EPOCHREALTIME that runs the commands in turn, one run of each per
# round, so a machine whose load changes during the run weighs on all of them alike. The
# machine should be otherwise idle: the numbers are milliseconds.
set -euo pipefail

cd "$(dirname "$0")/.."
runs=${RUNS:-300}
step_runs=${STEP_RUNS:-100}
if [[ -n ${WARDEN:-} ]]; then
    warden=$WARDEN
else
    cargo build --release --quiet
    warden="$PWD/target/release/warden"
fi

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
mkdir "$workdir/ws"
: >"$workdir/config.toml"
export WARDEN_CONFIG="$workdir/config.toml"

names=("warden jail" "/bin/true" "bwrap")
commands=(
    "$warden jail --workspace $workdir/ws -- /bin/true"
    "/bin/true"
    "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent /bin/true"
)
if [[ -n ${BEFORE:-} ]]; then
    names+=("warden before")
    commands+=("$BEFORE jail --workspace $workdir/ws -- /bin/true")
fi
if ! command -v bwrap >/dev/null; then
    echo "bwrap is not installed: comparing with /bin/true only" >&2
    unset 'names[2]' 'commands[2]'
    names=("${names[@]}")
    commands=("${commands[@]}")
fi
cat >"$workdir/floor.c" <<'C'
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char *argv[] = {"/bin/true", 0};
    pid_t pid = vfork();
    if (pid == 0) { execv(argv[0], argv); _exit(127); }
    int status;
    waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
}
C
if cc -O2 -static -o "$workdir/floor" "$workdir/floor.c" 2>/dev/null; then
    names+=("C floor")
    commands+=("$workdir/floor")
else
    echo "no static C toolchain: the launcher floor is not measured" >&2
fi

declare -A median_ms
if command -v hyperfine >/dev/null && [[ -z ${INTERLEAVE:-} ]]; then
    spacing=()
    if [[ -n ${SPACED:-} ]]; then spacing=(--prepare "sleep 0.05"); fi
    hyperfine -N --warmup 20 --runs "$runs" "${spacing[@]}" --export-csv "$workdir/results.csv" \
        "${commands[@]}" >&2
    # command,mean,stddev,median,... in seconds, one row per command in order.
    i=0
    while IFS=, read -r _ _ _ median _; do
        median_ms[${names[$i]}]=$(awk -v s="$median" 'BEGIN { printf "%.2f", s * 1000 }')
        i=$((i + 1))
    done < <(tail -n +2 "$workdir/results.csv")
else
    echo "timing the commands in turn with \$EPOCHREALTIME" >&2
    for round in $(seq $((runs + 20))); do
        for i in "${!commands[@]}"; do
            read -r -a argv <<<"${commands[$i]}"
            if [[ -n ${SPACED:-} ]]; then sleep 0.05; fi
            start=${EPOCHREALTIME/./}
            "${argv[@]}" >/dev/null
            end=${EPOCHREALTIME/./}
            # The first 20 rounds warm up.
            if ((round > 20)); then echo $((end - start)) >>"$workdir/times.$i"; fi
        done
    done
    for i in "${!commands[@]}"; do
        median_ms[${names[$i]}]=$(sort -n "$workdir/times.$i" |
            awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] / 1000 }')
    done
fi

echo
echo "median wall time (ms):"
for name in "${names[@]}"; do
    printf "  %-14s %s\n" "$name" "${median_ms[$name]}"
done
if [[ -n ${median_ms["C floor"]:-} && -n ${median_ms[bwrap]:-} ]]; then
    floor_ratio=$(awk -v f="${median_ms["C floor"]}" -v b="${median_ms[bwrap]}" 'BEGIN { printf "%.2f", f / b }')
    echo "C floor / bwrap = $floor_ratio (what any launcher costs before it sets up anything)"
fi
w=${median_ms["warden jail"]}
# verdict VALUE LIMIT: "met" when VALUE ≤ LIMIT.
verdict() { if awk -v v="$1" -v l="$2" 'BEGIN { exit !(v + 0 <= l + 0) }'; then echo "met"; else echo "NOT met"; fi; }
echo "target warden ≤ 3 ms: $(verdict "$w" 3)"
if [[ -n ${median_ms["C floor"]:-} ]]; then
    f=${median_ms["C floor"]}
    ratio=$(awk -v w="$w" -v f="$f" 'BEGIN { printf "%.2f", w / f }')
    echo "warden / C floor = $ratio; target ≤ 1.7: $(verdict "$ratio" 1.7)"
    if [[ -n ${median_ms["warden before"]:-} ]]; then
        ratio=$(awk -v w="${median_ms["warden before"]}" -v f="$f" 'BEGIN { printf "%.2f", w / f }')
        echo "warden before / C floor = $ratio"
    fi
fi
if [[ -n ${median_ms[bwrap]:-} ]]; then
    b=${median_ms[bwrap]}
    ratio=$(awk -v w="$w" -v b="$b" 'BEGIN { printf "%.2f", w / b }')
    echo "warden / bwrap = $ratio; target ≤ 0.3: $(verdict "$ratio" 0.3)"
fi

# steps BINARY: the median of each step of STEP_RUNS traced runs (nothing from a binary that
# has no trace).
steps() {
    for _ in $(seq "$step_runs"); do
        if [[ -n ${SPACED:-} ]]; then sleep 0.05; fi
        WARDEN_JAIL_TRACE=1 "$1" jail --workspace "$workdir/ws" -- /bin/true 2>&1 >/dev/null |
            sed -n 's/^warden:   //p'
    done | awk '
        # "STEP NAME  wall W cpu C": the name may contain spaces.
        {
            c = $NF; w = $(NF - 2); name = $0; sub(/ +wall .*$/, "", name)
            if (!(name in seen)) { seen[name] = 1; order[++n] = name }
            if (w != "?") walls[name] = walls[name] " " w
            if (c != "-") cpus[name] = cpus[name] " " c
        }
        function median(list,    v, k, i, j, t) {
            k = split(list, v, " ")
            if (k == 0) return "-"
            for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return v[int((k + 1) / 2)]
        }
        END {
            printf "  %-38s %8s %8s\n", "step", "wall", "cpu"
            for (i = 1; i <= n; i++) printf "  %-38s %8s %8s\n", order[i], median(walls[order[i]]), median(cpus[order[i]])
        }'
}
if ((step_runs > 0)); then
    echo
    echo "each step of warden jail (median of $step_runs runs of WARDEN_JAIL_TRACE=1; µs):"
    steps "$warden"
    if [[ -n ${BEFORE:-} ]]; then
        echo
        echo "each step of warden before:"
        steps "$BEFORE"
    fi
fi
