#!/usr/bin/env bash
# `warden serve`'s listener: requests per second for `GET /v1/runs/{id}` (keep-alive
# connections, CONNS at once, for SECS seconds), and the server's resident memory (VmRSS) idle
# after start-up and again after the load. Uses the release build; the model is never called
# (the run is read, not made). The client is Python on the same machine, so on a small box
# the number is a floor set by the client as much as by warden.
#
#   benches/http_api.sh                 # CONNS=8 SECS=10
#   WARDEN_RELEASE_DIR=target/bench/release benches/http_api.sh
set -euo pipefail

cd "$(dirname "$0")/.."
conns=${CONNS:-8}
secs=${SECS:-10}
# WARDEN_RELEASE_DIR: binaries built elsewhere (another profile or target dir); else built here.
dir=${WARDEN_RELEASE_DIR:-}
if [ -z "$dir" ]; then
    cargo build --release --quiet --bin warden --bin warden-full
    dir="$PWD/target/release"
fi
warden="$dir/warden"

home=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$home"' EXIT
mkdir -p "$home/.warden"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=bench-token-0123456789abcdef
# The model's address refuses connections: a run queued here fails fast, and is read all the same.
env -i HOME="$home" PATH="$PATH" WARDEN_HTTP_TOKEN="$token" ANTHROPIC_API_KEY=x \
    ANTHROPIC_BASE_URL=http://127.0.0.1:9 "$warden" serve --listen "127.0.0.1:$port" \
    2>"$home/serve.log" &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
    sleep 0.1
done
sleep 2
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
idle=$(rss)
run=$(curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/messages" \
    -H 'content-type: application/json' -d '{"thread": "bench", "text": "hello"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["run_id"])')

python3 - "$port" "$token" "$run" "$conns" "$secs" <<'PY'
import http.client, sys, threading, time
port, token, run, conns, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
counts = [0] * conns
stop = time.monotonic() + secs
def worker(i):
    c = http.client.HTTPConnection("127.0.0.1", int(port))
    headers = {"Authorization": f"Bearer {token}"}
    while time.monotonic() < stop:
        c.request("GET", f"/v1/runs/{run}", headers=headers)
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        counts[i] += 1
threads = [threading.Thread(target=worker, args=(i,)) for i in range(conns)]
start = time.monotonic()
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.monotonic() - start
print(f"GET /v1/runs/{{id}}: {sum(counts)} requests in {elapsed:.1f} s over {conns} connections = {sum(counts)/elapsed:.0f} req/s")
PY
echo "VmRSS idle after start-up: ${idle} kB; after the load: $(rss) kB"
