#!/usr/bin/env bash
# Batch-mode throughput of `warden policy check --batch -` through the CLI (target ≥ 20 000/s).
# Usage: benches/policy_batch.sh [N]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
cargo build --release --quiet
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
start=$(date +%s%N)
./target/release/warden policy check --workspace "$ws" --batch - < "$input" > "$ws/out.jsonl"
end=$(date +%s%N)
lines=$(wc -l < "$ws/out.jsonl")
[ "$lines" -eq "$n" ] || { echo "expected $n output lines, got $lines" >&2; exit 1; }
ms=$(( (end - start) / 1000000 ))
echo "batch: $n commands in ${ms} ms = $(( n * 1000 / (ms > 0 ? ms : 1) )) commands/s"
