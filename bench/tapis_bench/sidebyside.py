"""Two or more server variants under the same War action load, rounds alternating.

    python -m tapis_bench.sidebyside [--rounds 3] [--seconds 5] [--asyncio]
                                     [--variant NAME:VAR=VALUE ...]

Variants: ``bare``, ``tapis`` (``--store memory``, on uvloop) and, with ``--asyncio``,
``tapis-asyncio`` (the same server with ``TAPIS_EVENT_LOOP=asyncio``: the standard loop);
``--variant`` adds a Tapis server with one environment variable set (e.g.
``gc50k:TAPIS_GC_THRESHOLDS=50000,3``). Prints each variant's median actions/s, SubmitAction
p50/p99 and server CPU µs per action, and the ratios to bare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

from tapis_bench.procs import load, progress, servers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.sidebyside", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--asyncio", action="store_true")
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args(argv)
    wanted = {"bare": ("bare", ""), "tapis": ("tapis", "memory")}
    env: dict[str, dict[str, str]] = {}
    if args.asyncio:
        wanted["tapis-asyncio"] = ("tapis", "memory")
        env["tapis-asyncio"] = {"TAPIS_EVENT_LOOP": "asyncio"}
    for variant in args.variant:
        name, _, assignment = variant.partition(":")
        key, _, value = assignment.partition("=")
        wanted[name] = ("tapis", "memory")
        env[name] = {key: value}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in wanted}
    load_before = os.getloadavg()
    with servers(wanted, env=env) as running:
        for number in range(args.rounds):
            for name in wanted:
                port, pid = running[name]
                figures = load({"mode": "actions", "server": "bare" if name == "bare" else "tapis",
                                "target": f"127.0.0.1:{port}", "kind": "war", "games": 64,
                                "seats": 2, "channels": 4, "warmup_s": 1.0,
                                "duration_s": args.seconds, "server_pid": pid})
                runs[name].append(figures)
                progress(f"round {number + 1} {name:>12}: {figures['actions_per_s']} actions/s,"
                         f" p50 {figures['submit_p50_ms']} ms, server CPU "
                         f"{figures['server_cpu_us_per_action']} µs/action")
    keys = ("actions_per_s", "submit_p50_ms", "submit_p99_ms", "event_p99_ms",
            "server_cpu_us_per_action")
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in keys}
               for name, rs in runs.items()}
    summary: dict[str, Any] = {"medians": medians, "loadavg_before": load_before,
                               "loadavg_after": os.getloadavg()}
    for name in wanted:
        if name != "bare":
            summary[f"{name}_ratios"] = {k: round(medians[name][k] / medians["bare"][k], 2)
                                         for k in keys}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
