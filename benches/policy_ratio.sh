#!/usr/bin/env bash
# The policy check of each command against its floor, a bare tree-sitter-bash parse of the
# same command (target: check <= 2x floor), from one `cargo bench --bench policy` run.
#
#   benches/policy_ratio.sh            # runs the bench, then prints the ratios
#   benches/policy_ratio.sh --no-run   # prints the ratios of the last run
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-run" ]; then
  cargo bench --bench policy
fi
target=${CARGO_TARGET_DIR:-target}
python3 - "$target/criterion" <<'EOF'
import json, os, re, sys

root = sys.argv[1]
commands = re.findall(r'^    "(.*)",$', open("benches/policy.rs").read(), re.M)

def median_ns(group, i):
    path = os.path.join(root, group, str(i), "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]

worst = 0.0
print(f"{'#':>2}  {'check':>9}  {'floor':>9}  {'ratio':>5}  command")
for i, command in enumerate(commands):
    check, floor = median_ns("policy_check", i), median_ns("policy_floor", i)
    ratio = check / floor
    worst = max(worst, ratio)
    print(f"{i:>2}  {check / 1000:>7.2f}us  {floor / 1000:>7.2f}us  {ratio:>5.2f}  {command[:50]}")
print(f"worst ratio: {worst:.2f} (target <= 2.00)")
EOF
