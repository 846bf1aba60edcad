"""`make bench`: every Tapis benchmark, side by side with the bare grpc.aio baseline.

    python -m tapis_bench            the full run (a few minutes)
    python -m tapis_bench --quick    shorter runs (under a minute)
    python -m tapis_bench --smoke    a tiny run that checks every figure is produced
    python -m tapis_bench --profile  also profile the server (pyinstrument) under the action load

Prints a markdown table, writes bench/results.json and prints the JSON as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tapis_bench import engine
from tapis_bench.procs import load, progress, servers, sqlite_available
from tapis_bench.stats import raise_fd_limit, ratio

RESULTS = Path(__file__).resolve().parent.parent / "results.json"
PROFILE = Path(__file__).resolve().parent.parent / "profile.txt"


@dataclass(frozen=True)
class Plan:
    """How long and how big each benchmark runs."""

    rounds: int
    """Bare, memory and SQLite runs alternate this many times (the machine is shared and
    noisy: each figure is the median over the rounds)."""
    warmup_s: float
    duration_s: float
    games: int
    channels: int
    engine_s: float
    scale_games: int
    scale_rate: float
    scale_s: float
    kind_s: float


PLANS = {
    "full": Plan(rounds=3, warmup_s=2, duration_s=8, games=64, channels=4, engine_s=3,
                 scale_games=5000, scale_rate=100, scale_s=10, kind_s=5),
    "quick": Plan(rounds=1, warmup_s=0.7, duration_s=2.5, games=64, channels=4, engine_s=0.3,
                  scale_games=1000, scale_rate=100, scale_s=2, kind_s=1),
    "smoke": Plan(rounds=1, warmup_s=0.3, duration_s=0.5, games=4, channels=1, engine_s=0.05,
                  scale_games=20, scale_rate=20, scale_s=0.5, kind_s=0.3),
}


def action_load(port: int, plan: Plan, server_kind: str, kind: str = "war",
                duration_s: float | None = None, pid: int | None = None) -> dict[str, Any]:
    """The action load against one server; with ``pid``, also the server's CPU per action."""
    warmup_s = plan.warmup_s if duration_s is None else min(plan.warmup_s, 1.0)
    return load({"mode": "actions", "server": server_kind, "target": f"127.0.0.1:{port}",
                 "kind": kind, "games": plan.games, "seats": 2, "channels": plan.channels,
                 "warmup_s": warmup_s, "duration_s": duration_s or plan.duration_s,
                 "server_pid": pid})


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the rounds themselves kept under ``rounds``)."""
    merged: dict[str, Any] = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = [r[key] for r in runs if r[key] is not None]
            merged[key] = statistics.median(values) if values else None
    merged["rounds"] = runs
    return merged


def run(plan: Plan, profile: bool) -> dict[str, Any]:
    from tapis_engine.registry import GAMES

    durable_store = sqlite_available()
    steps = 3 + len(GAMES) + int(profile)
    step = 0

    def begin(what: str) -> None:
        nonlocal step
        step += 1
        progress(f"[{step}/{steps}] {what}")

    results: dict[str, Any] = {"notes": []}
    sides = ["bare", "memory"] + (["sqlite"] if durable_store else [])
    begin(f"War actions, {plan.games} games in flight, 2 streams each: "
          f"{' / '.join(sides)} alternating, {plan.rounds} round(s)")
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    per_kind: dict[str, Any] = {}
    wanted = {side: ("bare", "") if side == "bare" else ("tapis", side) for side in sides}
    wanted["scale"] = ("tapis", "memory")
    with servers(wanted) as running:
        for number in range(plan.rounds):
            for side in sides:
                port, pid = running[side]
                figures = action_load(port, plan, "bare" if side == "bare" else "tapis",
                                      pid=pid)
                runs[side].append(figures)
                progress(f"    round {number + 1} {side:>6}: {figures['actions_per_s']} "
                         f"actions/s, submit p50 {figures['submit_p50_ms']} ms, "
                         f"event p99 {figures['event_p99_ms']} ms, server CPU "
                         f"{figures['server_cpu_us_per_action']} µs/action")
        for kind in sorted(GAMES):
            if kind == "war":
                continue
            begin(f"{kind} actions (GetGame to pick, then SubmitAction), --store memory")
            per_kind[kind] = action_load(running["memory"][0], plan, "tapis", kind, plan.kind_s)
            progress(f"    {per_kind[kind]['actions_per_s']} actions/s")
        begin(f"scale: {plan.scale_games} games, two streams each, {plan.scale_rate} actions/s")
        port, pid = running["scale"]
        scale = load({"mode": "scale", "target": f"127.0.0.1:{port}", "server_pid": pid,
                      "games": plan.scale_games, "streams_per_channel": 500,
                      "rate_per_s": plan.scale_rate, "duration_s": plan.scale_s,
                      "settle_s": min(3.0, plan.scale_s / 2)})
        progress(f"    {scale['streams_open']} streams open, {scale['rss_kib_per_game']} "
                 f"KiB/game, submit p99 {scale['submit_p99_ms']} ms")
    bare, war = median_of(runs["bare"]), median_of(runs["memory"])
    per_kind = {"war": war, **per_kind}
    durable = median_of(runs["sqlite"]) if durable_store else None
    if not durable_store:
        results["notes"].append("durable_throughput_ratio: tapis_service.sqlite_store does not "
                                "exist yet; measured automatically once it does")
    if profile:
        begin(f"profiling the server under the War load into {PROFILE}")
        with servers({"profiled": ("tapis", "memory")}, profile=PROFILE) as running:
            action_load(running["profiled"][0], plan, "tapis")
    begin("engine: random play in-process")
    engine_figures = engine.run(plan.engine_s)
    for kind, figures in engine_figures.items():
        progress(f"    {kind}: {figures['us_per_action']} µs/action")

    server_cpu = war["server_cpu_us_per_action"]
    results.update({
        "server_cpu_ratio": ratio(server_cpu, bare["server_cpu_us_per_action"]),
        "engine_share": ratio(engine_figures["war"]["us_per_action"], server_cpu, 3),
        "action_throughput_ratio": ratio(war["actions_per_s"], bare["actions_per_s"]),
        "action_p50_ratio": ratio(war["submit_p50_ms"], bare["submit_p50_ms"]),
        "event_p99_ratio": ratio(war["event_p99_ms"], bare["event_p99_ms"]),
        "engine_us_per_action": {k: v["us_per_action"] for k, v in engine_figures.items()},
        "games_held": scale["games"] if scale["streams_open"] == 2 * scale["games"] else 0,
        "rss_kib_per_game": scale["rss_kib_per_game"],
        "action_p99_ms_at_scale": scale["submit_p99_ms"],
        "durable_throughput_ratio": None if durable is None
        else ratio(durable["actions_per_s"], war["actions_per_s"]),
        "detail": {"bare": bare, "service": per_kind, "durable": durable,
                   "engine": engine_figures, "scale": scale},
    })
    return results


TARGETS: dict[str, tuple[str, float]] = {
    "server_cpu_ratio": ("<=", 1.25), "engine_share": ("<=", 0.05),
    "action_throughput_ratio": (">=", 0.75), "action_p50_ratio": ("<=", 1.3),
    "event_p99_ratio": ("<=", 2.0),
    "rss_kib_per_game": ("<=", 100.0), "action_p99_ms_at_scale": ("<=", 50.0),
    "durable_throughput_ratio": (">=", 0.8),
}


def _verdict(value: float | None, target: tuple[str, float]) -> str:
    if value is None:
        return "n/a"
    op, bound = target
    return "met" if (value >= bound if op == ">=" else value <= bound) else "missed"


def table(results: dict[str, Any]) -> str:
    """The markdown table of the run."""
    d = results["detail"]
    bare, war, scale = d["bare"], d["service"]["war"], d["scale"]
    rows = [("figure", "bare grpc.aio", "Tapis", "key", "target", "")]

    def row(name: str, base: Any, ours: Any, key: str) -> None:
        value = results[key]
        rows.append((name, str(base), str(ours), f"`{key}` = {value}",
                     " ".join(map(str, TARGETS[key])), _verdict(value, TARGETS[key])))

    row("server CPU µs per action (every thread, /proc)", bare["server_cpu_us_per_action"],
        war["server_cpu_us_per_action"], "server_cpu_ratio")
    row(f"actions/s (War, {bare['games']} games × 2 streams)",
        bare["actions_per_s"], war["actions_per_s"],
        "action_throughput_ratio")
    row("SubmitAction p50 ms", bare["submit_p50_ms"], war["submit_p50_ms"], "action_p50_ratio")
    rows.append(("SubmitAction p99 ms", str(bare["submit_p99_ms"]), str(war["submit_p99_ms"]),
                 "", "", ""))
    rows.append(("stream messages per action (all seats)",
                 str(bare["stream_messages_per_action"]), str(war["stream_messages_per_action"]),
                 "", "", ""))
    rows.append(("submit→event p50 ms", str(bare["event_p50_ms"]), str(war["event_p50_ms"]),
                 "", "", ""))
    row("submit→event p99 ms", bare["event_p99_ms"], war["event_p99_ms"], "event_p99_ratio")
    for kind, figures in d["service"].items():
        if kind != "war":
            rows.append((f"actions/s ({kind}, GetGame then SubmitAction)", "",
                         str(figures["actions_per_s"]), "", "", ""))
    for kind, figures in d["engine"].items():
        rows.append((f"engine µs/action ({kind}; {figures['games_per_s']} games/s)", "",
                     str(figures["us_per_action"]), f"`engine_us_per_action.{kind}`", "", ""))
    row("engine share of the server's CPU per War action", "",
        d["engine"]["war"]["us_per_action"], "engine_share")
    rows.append(("games held (2 open streams each)", "", str(scale["games"]),
                 f"`games_held` = {results['games_held']}", ">= 5000",
                 "met" if results["games_held"] >= 5000 else "missed"))
    row("RSS KiB per game", "", scale["rss_kib_per_game"], "rss_kib_per_game")
    row("SubmitAction p99 ms at that size", "", scale["submit_p99_ms"],
        "action_p99_ms_at_scale")
    durable = d["durable"]
    row("actions/s, --store sqlite", "", durable["actions_per_s"] if durable else "n/a",
        "durable_throughput_ratio")
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
             for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="shorter runs (under a minute)")
    size.add_argument("--smoke", action="store_true", help="a tiny run (a few seconds)")
    parser.add_argument("--profile", action="store_true",
                        help=f"profile the server under the War load into {PROFILE.name}")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    raise_fd_limit()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    began = time.perf_counter()
    load_before = os.getloadavg()
    results = run(PLANS[mode], args.profile)
    results["mode"] = mode
    results["machine"] = {"cpus": os.cpu_count(), "loadavg_before": load_before,
                          "loadavg_after": os.getloadavg()}
    results["seconds"] = round(time.perf_counter() - began, 1)
    print(table(results))
    machine = results["machine"]
    print(f"\n{machine['cpus']} CPUs; load average {machine['loadavg_before'][0]:.1f} before, "
          f"{machine['loadavg_after'][0]:.1f} after (other work on this machine counts too).")
    for note in results["notes"]:
        print(f"\nNote: {note}")
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
