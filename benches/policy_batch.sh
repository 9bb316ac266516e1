#!/usr/bin/env bash
# Batch-mode throughput of `warden policy check --batch -` through the CLI (target >= 20 000/s):
# on one thread (--jobs 1, the cost per core) and on all cores (the default), whose answers must
# be byte for byte the same.
# Usage: benches/policy_batch.sh [N]   (builds the release binary first; WARDEN=path measures
# another binary instead)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
if [ -z "${WARDEN:-}" ]; then
  cargo build --release --quiet
  WARDEN=./target/release/warden
fi
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
mkdir -p "$ws/src" && echo "a TODO" > "$ws/notes.txt" && echo "fn main() {}" > "$ws/src/main.rs"
commands=(
  "ls -la" "cat notes.txt" "grep -rn TODO src | sort | uniq -c > todo.txt" "head -n 20 notes.txt"
  "find . -name '*.rs' -newer notes.txt" "sed -n 's/foo/bar/p' notes.txt" "git log --oneline -n 5"
  "cd src && wc -l main.rs" "cat /etc/shadow" "echo hello > out.txt"
)
input="$ws/input.txt"
for ((i = 0; i < n; i++)); do printf '%s\n' "${commands[i % ${#commands[@]}]}"; done > "$input"
cores=$(nproc)
for jobs in 1 "$cores"; do
  start=$(date +%s%N)
  "$WARDEN" policy check --workspace "$ws" --batch - --jobs "$jobs" < "$input" > "$ws/out-$jobs.jsonl"
  end=$(date +%s%N)
  lines=$(wc -l < "$ws/out-$jobs.jsonl")
  [ "$lines" -eq "$n" ] || { echo "expected $n output lines, got $lines" >&2; exit 1; }
  ms=$(( (end - start) / 1000000 ))
  echo "batch, --jobs $jobs: $n commands in ${ms} ms = $(( n * 1000 / (ms > 0 ? ms : 1) )) commands/s"
done
cmp -s "$ws/out-1.jsonl" "$ws/out-$cores.jsonl" \
  || { echo "--jobs 1 and --jobs $cores answered differently" >&2; exit 1; }
