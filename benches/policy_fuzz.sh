#!/usr/bin/env bash
# Throughput of `warden policy fuzz` with the in-process oracles (a) and (b) — generation or
# mutation, the policy check, the independent invariant — on one core, over the embedded
# default policy. Target: >= 20k cases/s per core. Uses the release build.
#
#   benches/policy_fuzz.sh          # 5 runs of 5 s (RUNS=N SECONDS_EACH=S to change)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
each=${SECONDS_EACH:-5}
cargo build --release --quiet
rates=()
for i in $(seq 1 "$runs"); do
  json=$(target/release/warden policy fuzz --no-behaviour --jobs 1 --seconds "$each" --seed "$i" --json)
  rate=$(python3 -c 'import json,sys; r=json.load(sys.stdin); print(int(r["cases"]/r["seconds"]))' <<<"$json")
  echo "run $i: $rate cases/s"
  rates+=("$rate")
done
median=$(printf '%s\n' "${rates[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "median: $median cases/s on one core (oracles a+b)"
