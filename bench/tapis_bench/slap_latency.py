"""Server-side time from a winning slap's arrival to its pile-won event being sent.

    python -m tapis_bench.slap_latency [--games 30] [--players 4] [--reaction-ms 100]

Starts `tapis-server --metrics-port`, races `tapis-bot selfplay --kind bataille-corse` bots
against it, then reads the `tapis_slap_to_pile_won_seconds` histogram and prints p50/p99
(interpolated within buckets) as JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request

from tapis_bench.procs import free_port


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The q-quantile from cumulative (upper bound, count) buckets, linearly interpolated."""
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf") or count == below:
                return lower
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def read_histogram(port: int) -> list[tuple[float, float]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = []
    for line in text.splitlines():
        if line.startswith("tapis_slap_to_pile_won_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            out.append((float(le), float(line.rsplit(" ", 1)[1])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", type=int, default=30)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--reaction-ms", type=int, default=100)
    args = parser.parse_args()
    port, metrics_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tapis_service.process.main", "--port", str(port), "--metrics-port",
         str(metrics_port), "--log-level", "warning"])
    try:
        for _ in range(300):
            try:
                read_histogram(metrics_port)
                break
            except OSError:
                time.sleep(0.1)
        bot = subprocess.run(
            [sys.executable, "-m", "tapis_clients.bot", "--target", f"127.0.0.1:{port}",
             "--reaction-ms", str(args.reaction_ms), "selfplay", "--kind", "bataille-corse",
             "--games", str(args.games), "--players", str(args.players)],
            capture_output=True, text=True, check=False)
        selfplay = json.loads(bot.stdout.strip().splitlines()[-1])
        buckets = read_histogram(metrics_port)
    finally:
        server.terminate()
        server.wait(10)
    result = {"selfplay": selfplay, "piles_won_by_slap": buckets[-1][1],
              "p50_ms": round(quantile(buckets, 0.5) * 1000, 3),
              "p99_ms": round(quantile(buckets, 0.99) * 1000, 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
