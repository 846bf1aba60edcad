"""`make bench-peers`: the War load against Tapis over its WebSocket and against Colyseus, side
by side (``bench/peers/``: a Colyseus War room, and one Node load generator for both).

For each table count and each Tapis store (memory, SQLite), a ``tapis-server`` with
``--ws-port`` and the Colyseus server run at once, and ``load.mjs`` gives each its turns in
alternation (seat tokens, request ids and per-seat views on the Tapis side). Writes
``colyseus_cpu_ratio`` (Tapis's server CPU per action ÷ Colyseus's) for each run into
bench/peers.json and prints the JSON.

    python -m tapis_bench.peers --dir build/peers [--tables 50,500] [--turns 5] [--turn-s 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tapis_bench.procs import free_port, progress, wait_ready
from tapis_bench.stats import raise_fd_limit, ratio

RESULTS = Path(__file__).resolve().parent.parent / "peers.json"


def run(folder: Path, tables: int, store: str, turns: int, turn_s: float) -> dict[str, Any]:
    port, ws_port, colyseus_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="tapis-peers-") as data_dir:
        command = [sys.executable, "-m", "tapis_service.main", "--port", str(port),
                   "--ws-port", str(ws_port), "--store", store, "--log-level", "warning",
                   "--max-games", str(tables + 100), "--create-burst", str(tables + 100),
                   # one load generator creates every table, without a backend key
                   "--keyless-create-rate", "0", "--keyless-max-tables", "0",
                   "--keyless-address-share", "0",  # its joins too, from one address
                   "--ws-max-sockets-per-peer", str(4 * tables + 100)]
        if store == "sqlite":
            command += ["--data-dir", data_dir]
        tapis = subprocess.Popen(command)
        colyseus = subprocess.Popen(["node", "colyseus_war.mjs", str(colyseus_port)], cwd=folder,
                                    stdout=subprocess.PIPE)
        try:
            wait_ready(port, tapis)
            assert colyseus.stdout is not None
            assert colyseus.stdout.readline().strip() == b"ready"
            config = {"tables": tables, "turns": turns, "turn_s": turn_s,
                      "tapis": {"url": f"ws://127.0.0.1:{ws_port}/ws", "pid": tapis.pid},
                      "colyseus": {"url": f"ws://127.0.0.1:{colyseus_port}",
                                   "pid": colyseus.pid}}
            out = subprocess.run(["node", "load.mjs", json.dumps(config)], cwd=folder,
                                 check=True, capture_output=True, text=True, timeout=900)
            figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            for process in (tapis, colyseus):
                process.terminate()
                process.wait(30)
    figures["store"] = store
    figures["colyseus_cpu_ratio"] = ratio(figures["tapis"]["server_cpu_us_per_action"],
                                          figures["colyseus"]["server_cpu_us_per_action"])
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True,
                        help="the scratch folder holding load.mjs and Colyseus")
    parser.add_argument("--tables", default="50,500")
    parser.add_argument("--stores", default="memory,sqlite")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--turn-s", type=float, default=2.0)
    args = parser.parse_args(argv)
    raise_fd_limit()
    runs = []
    for tables in (int(n) for n in args.tables.split(",")):
        for store in args.stores.split(","):
            progress(f"peers: {tables} tables, Tapis on the {store} store, against Colyseus")
            runs.append(run(args.dir, tables, store, args.turns, args.turn_s))
    results = {"peers": runs}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
