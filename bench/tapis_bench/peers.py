"""`make bench-peers`: the War load against Tapis over its WebSocket and against Colyseus, side
by side in one run (``bench/peers/``: the Colyseus rooms, and one Node load generator for all).

Four servers run at once, for each table count: ``tapis-server --ws-port`` on the memory store
and on SQLite (seat tokens, request ids, per-seat views with the hidden cards redacted, the
journal, limits and metrics counted: a server's defaults), and two Colyseus processes: the room
a Colyseus developer writes (the public state in a Schema, synchronised by patches; the decks
server-side; the events in the answer) and the messages-only room (no synchronised state; the
events broadcast once; an answer). ``load.mjs`` gives each side its turns in alternation and
reads each server's CPU from /proc during its own turns only. Colyseus's cost per action falls
steeply as its action rate rises, so each side's rate is recorded, and so is the host's
one-minute load before the run: a ratio from a busy host (load >= 2) is flagged, not
comparable. Before each table count it waits (``--settle``, 90 s at most) for the load to fall
under 1: a run leaves the host's one-minute average at about 2 (four servers and the load
generator on two cores), which would otherwise stand as the next table count's "load before".

The last line printed is a JSON object, per table count (``"50"``, ``"500"``):
``colyseus_cpu_ratio_state`` and ``colyseus_cpu_ratio_messages`` (Tapis over WebSocket on the
memory store ÷ each room, server CPU per action), ``sqlite_over_memory`` (Tapis on SQLite ÷ on
the memory store) and ``load_avg``; every figure goes to bench/peers.json. For each Tapis
server the table also gives its actions per store commit over the run (``actions_per_commit``,
from its metrics: persons' inputs ÷ store transactions; SQLite's group commit at work, none on
the memory store).

    python -m tapis_bench.peers --dir build/peers [--quick] [--tables 50,500] [--turns 5]
                                [--settle SECONDS] [--compare OTHER_TREE/.venv/bin/python]
                                [--compare-store memory|sqlite]

``--compare`` runs another tree's server (on the memory store, or ``--compare-store``'s) as one
more side of the same turns (a row of the table, ``compare_1``; the ratios are this tree's):
two trees timed under the very same load and host, turn by turn.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tapis_bench.procs import free_port, progress, wait_ready
from tapis_bench.stats import raise_fd_limit, ratio

RESULTS = Path(__file__).resolve().parent.parent / "peers.json"
BUSY_LOAD = 2.0
"""A one-minute load average from which the host counts as busy (the ratios are flagged)."""
QUIET_LOAD = 1.0
"""The one-minute load average a run waits for before it starts (``settle``)."""
TAPIS_STORES = ("memory", "sqlite")


def settle(longest_s: float, load: Callable[[], float] = lambda: os.getloadavg()[0],
           sleep: Callable[[float], None] = time.sleep,
           now: Callable[[], float] = time.monotonic, poll_s: float = 5.0) -> float:
    """Wait until the host's one-minute load is under ``QUIET_LOAD``, ``longest_s`` at most
    (the previous table count's own load decays by half in about 40 s): the load then."""
    deadline = now() + longest_s
    current = load()
    if current >= QUIET_LOAD and longest_s > 0:
        progress(f"peers: waiting for a quiet host (load {current:.2f}, {longest_s:.0f} s at "
                 "most)")
    while current >= QUIET_LOAD and now() < deadline:
        sleep(min(poll_s, max(0.0, deadline - now())))
        current = load()
    return current
COLYSEUS_ROOMS = {"colyseus_state": "war_state", "colyseus_messages": "war"}


@contextmanager
def tapis(tables: int, store: str, python: str = sys.executable,
          name: str = "") -> Iterator[dict[str, Any]]:
    """A ``tapis-server`` with its WebSocket door, on ``store``: its side of the load
    (``python``: another tree's, for ``--compare``)."""
    port, ws_port, metrics_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="tapis-peers-") as data_dir:
        command = [python, "-m", "tapis_service.process.main", "--port", str(port),
                   "--ws-port", str(ws_port), "--store", store, "--log-level", "warning",
                   "--metrics-port", str(metrics_port),
                   "--max-games", str(tables + 100), "--create-burst", str(tables + 100),
                   # one load generator creates every table, without a backend key
                   "--keyless-create-rate", "0", "--keyless-max-tables", "0",
                   "--keyless-address-share", "0",  # its joins too, from one address
                   "--ws-max-sockets-per-peer", str(4 * tables + 100)]
        if store == "sqlite":
            command += ["--data-dir", data_dir]
        process = subprocess.Popen(command)
        try:
            wait_ready(port, process)
            yield {"name": name or f"tapis_{store}", "kind": "tapis", "pid": process.pid,
                   "url": f"ws://127.0.0.1:{ws_port}/ws",
                   "metrics": f"http://127.0.0.1:{metrics_port}/metrics"}
        finally:
            process.terminate()
            process.wait(30)


@contextmanager
def colyseus(folder: Path, name: str) -> Iterator[dict[str, Any]]:
    """A Colyseus process serving both rooms; the load uses one of them (``name``)."""
    port = free_port()
    process = subprocess.Popen(["node", "colyseus_war.mjs", str(port)], cwd=folder,
                               stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the Colyseus server did not start")
        yield {"name": name, "kind": name, "pid": process.pid, "url": f"ws://127.0.0.1:{port}"}
    finally:
        process.terminate()
        process.wait(30)


def run(folder: Path, tables: int, turns: int, turn_s: float,
        compare: tuple[str, ...] = (), compare_store: str = "memory") -> dict[str, Any]:
    """One load run, every side at ``tables`` tables, in alternating turns (and, a diagnostic,
    a server of each other tree in ``compare``, on ``compare_store``: ``compare_1``, ...)."""
    load_avg = round(os.getloadavg()[0], 2)
    if load_avg >= BUSY_LOAD:
        progress(f"peers: WARNING the host is busy (load {load_avg} >= {BUSY_LOAD}): "
                 "Colyseus's cost per action depends on its rate; these ratios are not "
                 "those of a quiet host")
    with ExitStack() as stack:
        sides = [stack.enter_context(tapis(tables, store)) for store in TAPIS_STORES]
        sides += [stack.enter_context(colyseus(folder, name)) for name in COLYSEUS_ROOMS]
        sides += [stack.enter_context(tapis(tables, compare_store, python, f"compare_{i}"))
                  for i, python in enumerate(compare, 1)]
        config = {"tables": tables, "turns": turns, "turn_s": turn_s, "sides": sides}
        out = subprocess.run(["node", "load.mjs", json.dumps(config)], cwd=folder,
                             check=True, capture_output=True, text=True, timeout=1800)
        per_commit = {side["name"]: actions_per_commit(side["metrics"])
                      for side in sides if "metrics" in side}
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    for name, value in per_commit.items():
        figures[name]["actions_per_commit"] = value
    figures["load_avg"] = load_avg
    figures["load_avg_after"] = round(os.getloadavg()[0], 2)
    return figures


def actions_per_commit(url: str) -> float | None:
    """A Tapis server's persons' inputs per store transaction so far, from its metrics (None:
    no transaction, the memory store)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    actions = commits = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tapis_actions_total" and sample.labels.get("source") == "person":
                actions += sample.value
            elif sample.name == "tapis_store_commit_seconds_count":
                commits += sample.value
    return round(actions / commits, 1) if commits else None


def summary(figures: dict[str, Any]) -> dict[str, float | None]:
    """The ratios of one run (server CPU per action)."""
    def cpu(side: str) -> float | None:
        value = figures.get(side, {}).get("server_cpu_us_per_action")
        return float(value) if value is not None else None

    memory = cpu("tapis_memory")
    return {"colyseus_cpu_ratio_state": ratio(memory, cpu("colyseus_state")),
            "colyseus_cpu_ratio_messages": ratio(memory, cpu("colyseus_messages")),
            "sqlite_over_memory": ratio(cpu("tapis_sqlite"), memory),
            "load_avg": figures["load_avg"]}


def table(runs: dict[str, dict[str, Any]]) -> str:
    """The side-by-side table of the docs (Markdown), from the runs."""
    lines = ["| tables | side | µs CPU per action | actions/s | p50 ms | load generator's µs CPU "
             "per action | games per 1,000 actions | server sleeps per 1,000 actions "
             "| actions a commit | load before → after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for tables, figures in runs.items():
        compared = sorted(side for side in figures if side.startswith("compare_"))
        for side in ("colyseus_state", "colyseus_messages", "tapis_memory", "tapis_sqlite",
                     *compared):
            got = figures[side]
            lines.append(f"| {tables} | {side} | {got['server_cpu_us_per_action']} | "
                         f"{got['actions_per_s']} | {got['p50_ms']:.2f} | "
                         f"{got.get('client_cpu_us_per_action')} | "
                         f"{got.get('games_per_1000_actions')} | "
                         f"{got.get('server_sleeps_per_1000_actions')} | "
                         f"{got.get('actions_per_commit') or '-'} | "
                         f"{figures['load_avg']} → {figures['load_avg_after']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True,
                        help="the scratch folder holding load.mjs and Colyseus")
    parser.add_argument("--tables", default="50,500")
    parser.add_argument("--turns", type=int, default=5, help="measured turns per side")
    parser.add_argument("--turn-s", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=90.0, metavar="SECONDS",
                        help="before each table count, wait this long at most for the "
                             f"one-minute load to fall under {QUIET_LOAD} (0: do not wait)")
    parser.add_argument("--compare", action="append", default=[], metavar="PYTHON",
                        help="also run another tree's server (its .venv/bin/python) in the "
                             "same turns: a diagnostic row, no ratio changes")
    parser.add_argument("--compare-store", choices=TAPIS_STORES, default="memory",
                        help="the store of the --compare servers (default: memory)")
    parser.add_argument("--quick", action="store_true",
                        help="2 measured turns of 1 s per side (a few minutes in all)")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.turn_s = 2, 1.0
    raise_fd_limit()
    runs: dict[str, dict[str, Any]] = {}
    for tables in (int(n) for n in args.tables.split(",")):
        settle(args.settle)
        progress(f"peers: {tables} tables: Tapis (memory, SQLite) and Colyseus (state, messages)")
        runs[str(tables)] = run(args.dir, tables, args.turns, args.turn_s, tuple(args.compare),
                                 args.compare_store)
    results = {tables: summary(figures) for tables, figures in runs.items()}
    RESULTS.write_text(json.dumps({"runs": runs, "results": results}, indent=2) + "\n")
    print(table(runs))
    if any(result["load_avg"] is not None and result["load_avg"] >= BUSY_LOAD
           for result in results.values()):
        print(f"WARNING: a busy host (one-minute load >= {BUSY_LOAD}): not a quiet host's ratios")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
