"""`make bench`: every Tapis benchmark, side by side with the bare grpc.aio baseline.

The bare server runs on the event loop Tapis runs on (uvloop): ``server_cpu_ratio`` compares
like with like; the same bare server on plain asyncio takes its turns too, and
``server_cpu_ratio_asyncio_bare`` is recorded beside it. Tapis over its player WebSocket (a
memory server of its own, each seat on a socket) takes the same turns: ``websocket`` in the
results.

    python -m tapis_bench            the full run (a few minutes)
    python -m tapis_bench --quick    shorter runs (under a minute)
    python -m tapis_bench --smoke    a tiny run that checks every figure is produced
    python -m tapis_bench --profile  also profile the server (pyinstrument) under the action load
    python -m tapis_bench --compare TREE
                                     another tree's server (e.g. a worktree of main, set up
                                     with its own `make setup`) in the same War load turns

Prints a markdown table, writes bench/results.json and prints the JSON as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tapis_bench import engine
from tapis_bench.procs import free_port, load, progress, servers, sqlite_available
from tapis_bench.stats import raise_fd_limit, ratio

RESULTS = Path(__file__).resolve().parent.parent / "results.json"
PROFILE = Path(__file__).resolve().parent.parent / "profile.txt"


@dataclass(frozen=True)
class Plan:
    """How long and how big each benchmark runs."""

    rounds: int
    """The cluster benchmark's rounds: each of its servers measured alone this many times,
    ``duration_s`` each (each figure is the median over the rounds)."""
    warmup_s: float
    duration_s: float
    turns: int
    """The War load's servers (bare, memory, SQLite) take turns this many times, ``turn_s``
    each, under one load generator (``load.run_interleaved``)."""
    turn_s: float
    games: int
    channels: int
    engine_s: float
    scale_games: int
    scale_rate: float
    scale_s: float
    kind_s: float
    curve: tuple[int, ...]
    """Smaller table counts measured beside ``scale_games`` for the cost-growth curve."""
    curve_s: float


PLANS = {
    "full": Plan(rounds=5, warmup_s=2, duration_s=8, turns=20, turn_s=2.0, games=64,
                 channels=4, engine_s=3,
                 scale_games=20_000, scale_rate=400, scale_s=60, kind_s=5,
                 curve=(1000, 5000), curve_s=20),
    "quick": Plan(rounds=1, warmup_s=0.7, duration_s=2.5, turns=3, turn_s=0.8, games=64,
                  channels=4, engine_s=0.3,
                  scale_games=1000, scale_rate=200, scale_s=5, kind_s=1,
                  curve=(200,), curve_s=3),
    "smoke": Plan(rounds=1, warmup_s=0.3, duration_s=0.5, turns=1, turn_s=0.3, games=4,
                  channels=1, engine_s=0.05,
                  scale_games=20, scale_rate=20, scale_s=0.5, kind_s=0.3, curve=(), curve_s=0.5),
}
CURVE_PNG = Path(__file__).resolve().parents[2] / "docs" / "scale_curve.png"
"""Where a full run draws the cost-growth curve (quicker runs draw it beside results.json)."""


def scale_run(games: int, rate: float, seconds: float) -> dict[str, Any]:
    """One fresh server holding ``games`` War tables, both seats' streams open, under
    ``rate`` actions/s open-loop for ``seconds``; its metrics port gives the collector pauses."""
    metrics_port = free_port()
    # one load generator stands in for every player: one address, so the per-address stream
    # cap (issue 10's limits) is raised to what the run opens
    flags = ["--metrics-port", str(metrics_port), "--max-streams-per-peer", str(2 * games + 100)]
    with servers({"scale": ("tapis", "memory")}, extra_args={"scale": flags}) as running:
        port, pid = running["scale"]
        figures = load({"mode": "scale", "target": f"127.0.0.1:{port}", "server_pid": pid,
                        "metrics_port": metrics_port, "games": games,
                        "streams_per_channel": 500, "rate_per_s": rate,
                        "duration_s": seconds, "settle_s": min(3.0, seconds / 2)})
    progress(f"    {figures['streams_open']} streams open (set-up {figures['setup_s']} s), "
             f"{figures['rss_kib_per_game']} KiB/game, submit p50 {figures['submit_p50_ms']} / "
             f"p99 {figures['submit_p99_ms']} / max {figures['submit_max_ms']} ms, "
             f"longest gc pause {figures['server_max_gc_pause_ms']} ms, longest server loop "
             f"lag {figures['server_gc_pauses']['at_end'].get('loop_lag_max_ms')} ms, "
             f"generator loop lag {figures['generator_max_loop_lag_ms']}")
    return figures


def scale_figures(scale: dict[str, Any]) -> dict[str, Any]:
    """The ``scale_20k`` object of the JSON (named for the full run's size)."""
    held = scale["games"] if scale["streams_open"] == 2 * scale["games"] else 0
    return {"games": scale["games"], "games_held": held, "streams_open": scale["streams_open"],
            "rate_per_s": round(scale["actions"] / scale["seconds"], 1),
            "seconds": scale["seconds"],
            "rss_kib_per_game": scale["rss_kib_per_game"],
            "action_p50_ms_at_scale": scale["submit_p50_ms"],
            "action_p99_ms_at_scale": scale["submit_p99_ms"],
            "action_max_ms_at_scale": scale["submit_max_ms"],
            "max_gc_pause_ms": scale["server_max_gc_pause_ms"],
            "rss_growth_ratio": scale["rss_growth_ratio"],
            "server_max_loop_lag_ms": scale["server_gc_pauses"]["at_end"].get("loop_lag_max_ms"),
            "generator_max_loop_lag_ms": scale["generator_max_loop_lag_ms"][0]}


def curve_point(point: dict[str, Any]) -> dict[str, Any]:
    return {"games": point["games"], "p50_ms": point["submit_p50_ms"],
            "p99_ms": point["submit_p99_ms"], "max_ms": point["submit_max_ms"],
            "rss_mib": round(max(point["rss_held_kib"], point["rss_after_kib"]) / 1024, 1),
            "rss_kib_per_game": point["rss_kib_per_game"],
            "max_gc_pause_ms": point["server_max_gc_pause_ms"]}


def draw_curve(points: list[dict[str, Any]], path: Path) -> None:
    """The cost-growth curve (latency and RSS against tables held) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    games = [p["games"] for p in points]
    figure, latency = plt.subplots(figsize=(7, 4.4), dpi=100)
    for key, style in (("p50_ms", "o-"), ("p99_ms", "s-"), ("max_ms", "^--")):
        latency.plot(games, [p[key] for p in points], style, label=f"SubmitAction {key[:-3]}")
    latency.set_xscale("log")
    latency.set_yscale("log")
    latency.set_xlabel("War tables held (two open streams each)")
    latency.set_ylabel("SubmitAction latency, ms (log scale)")
    memory = latency.twinx()
    memory.plot(games, [p["rss_mib"] for p in points], "k:", marker="d", label="RSS (MiB)")
    memory.set_ylabel("server RSS, MiB")
    lines = latency.get_legend_handles_labels()[0] + memory.get_legend_handles_labels()[0]
    latency.legend(lines, [str(line.get_label()) for line in lines], loc="upper center",
                   bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize="small")
    latency.set_title("Cost growth with tables held (one server process)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def action_load(port: int, plan: Plan, server_kind: str, kind: str = "war",
                duration_s: float | None = None, pid: int | None = None) -> dict[str, Any]:
    """The action load against one server; with ``pid``, also the server's CPU per action."""
    warmup_s = plan.warmup_s if duration_s is None else min(plan.warmup_s, 1.0)
    return load({"mode": "actions", "server": server_kind, "target": f"127.0.0.1:{port}",
                 "kind": kind, "games": plan.games, "seats": 2, "channels": plan.channels,
                 "warmup_s": warmup_s, "duration_s": duration_s or plan.duration_s,
                 "server_pid": pid})


def _by_turn(ours: dict[str, Any], theirs: dict[str, Any]) -> list[float]:
    """Server CPU per action of ``ours`` ÷ ``theirs``, turn by turn (neighbouring turns)."""
    out: list[float] = []
    for mine, bare in zip(ours["rounds"], theirs["rounds"], strict=True):
        value = ratio(mine["server_cpu_us_per_action"], bare["server_cpu_us_per_action"])
        if value is not None:
            out.append(value)
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def run(plan: Plan, profile: bool, compare: Path | None = None,
        cluster_run: bool = True) -> dict[str, Any]:
    """Every figure; ``compare``: another source tree (with its own ``make setup``) whose
    server takes its turns in the same War load (``compare`` in the results)."""
    from tapis_engine.registry import GAMES

    durable_store = sqlite_available()
    steps = 2 + int(cluster_run) + len(GAMES) + int(profile) \
        + (len(plan.curve) + 1 if plan.scale_games else 0)
    step = 0

    def begin(what: str) -> None:
        nonlocal step
        step += 1
        progress(f"[{step}/{steps}] {what}")

    results: dict[str, Any] = {"notes": []}
    # the bare server on the loop Tapis runs on (uvloop), and on plain asyncio beside it
    # the player WebSocket: a memory server of its own, played over its --ws-port
    sides = ["bare", "bare_asyncio", "memory", "websocket"] \
        + (["sqlite"] if durable_store else []) + (["compared"] if compare is not None else [])
    begin(f"War actions, {plan.games} games in flight, 2 streams each: "
          f"{' / '.join(sides)} taking {plan.turns} turns of {plan.turn_s} s each")
    per_kind: dict[str, Any] = {}
    wanted = {side: ("bare", "") if side == "bare" else ("bare-asyncio", "")
              if side == "bare_asyncio" else ("tapis", "memory")
              if side in ("compared", "websocket") else ("tapis", side) for side in sides}
    pythons = {} if compare is None else {"compared": str(compare / ".venv" / "bin" / "python")}
    ws_port = free_port()
    with servers(wanted, pythons=pythons,
                 extra_args={"websocket": ["--ws-port", str(ws_port)]}) as running:
        together = load({
            "mode": "interleaved", "kind": "war", "games": plan.games, "seats": 2,
            "channels": plan.channels, "warmup_s": plan.warmup_s, "turns": plan.turns,
            "turn_s": plan.turn_s,
            "sides": [{"name": side, "server_pid": running[side][1], **(
                {"server": "websocket", "target": f"ws://127.0.0.1:{ws_port}/ws"}
                if side == "websocket" else
                {"server": "tapis" if wanted[side][0] == "tapis" else "bare",
                 "target": f"127.0.0.1:{running[side][0]}"})} for side in sides]})
        for side in sides:
            figures = together[side]
            turns = ", ".join(str(t["server_cpu_us_per_action"]) for t in figures["rounds"])
            progress(f"    {side:>6}: {figures['actions_per_s']} actions/s, submit p50 "
                     f"{figures['submit_p50_ms']} ms, event p99 {figures['event_p99_ms']} ms, "
                     f"server CPU {figures['server_cpu_us_per_action']} µs/action, of it "
                     f"{figures['server_system_us_per_action']} in the kernel (turns: {turns})")
        for kind in sorted(GAMES):
            if kind == "war":
                continue
            begin(f"{kind} actions (GetGame to pick, then SubmitAction), --store memory")
            per_kind[kind] = action_load(running["memory"][0], plan, "tapis", kind, plan.kind_s)
            progress(f"    {per_kind[kind]['actions_per_s']} actions/s")
    bare, war = together["bare"], together["memory"]
    per_kind = {"war": war, **per_kind}
    durable = together["sqlite"] if durable_store else None
    if not durable_store:
        results["notes"].append("durable_throughput_ratio: tapis_service.stores.sqlite_store "
                                "does not exist yet; measured automatically once it does")
    if profile:
        begin(f"profiling the server under the War load into {PROFILE}")
        with servers({"profiled": ("tapis", "memory")}, profile=PROFILE) as running:
            action_load(running["profiled"][0], plan, "tapis")
    scale: dict[str, Any] | None = None
    curve: list[dict[str, Any]] = []
    if plan.scale_games:
        for size in plan.curve:
            begin(f"cost growth: {size} games, two streams each, {plan.scale_rate} actions/s "
                  f"for {plan.curve_s} s")
            curve.append(scale_run(size, plan.scale_rate, plan.curve_s))
        begin(f"scale: {plan.scale_games} games, two streams each, {plan.scale_rate} actions/s "
              f"for {plan.scale_s} s")
        scale = scale_run(plan.scale_games, plan.scale_rate, plan.scale_s)
        curve.append(scale)
    cluster_figures: dict[str, Any] = {}
    if cluster_run:
        begin("cluster: 1 and 2 nodes over an embedded PostgreSQL, relayed calls, failover")
        from tapis_bench import cluster  # issue 11

        cluster_figures = cluster.run(plan, progress)
    begin("engine: random play in-process")
    engine_figures = engine.run(plan.engine_s)
    for kind, figures in engine_figures.items():
        progress(f"    {kind}: {figures['us_per_action']} µs/action")
    from tapis_bench import inprocess

    service = inprocess.run(plan.engine_s)
    progress(f"    our code, in-process (servicer, host, engine, fan-out; no transport): "
             f"{service['service_us_per_action']} µs/War action (runs {service['runs_us']})")

    server_cpu = war["server_cpu_us_per_action"]
    by_turn = _by_turn(war, bare)  # memory ÷ bare (uvloop), turn by turn
    bare_asyncio = together["bare_asyncio"]
    by_turn_asyncio = _by_turn(war, bare_asyncio)
    if compare is not None:
        compared = together["compared"]
        by_turn_compared = _by_turn(compared, bare)
        results["compare"] = {
            "tree": str(compare),
            "server_cpu_us_per_action": compared["server_cpu_us_per_action"],
            "server_cpu_ratio": ratio(compared["server_cpu_us_per_action"],
                                      bare["server_cpu_us_per_action"]),
            "server_cpu_ratio_by_round": by_turn_compared,
            "server_cpu_ratio_median_of_rounds": _median(by_turn_compared),
            "actions_per_s": compared["actions_per_s"]}
    websocket = together["websocket"]
    results["websocket"] = {
        key: websocket[key] for key in ("server_cpu_us_per_action", "actions_per_s",
                                        "submit_p50_ms", "submit_p99_ms", "event_p50_ms",
                                        "event_p99_ms", "client_cpu_us_per_action")}
    results["websocket"].update(
        grpc_cpu_ratio=ratio(websocket["server_cpu_us_per_action"], server_cpu),
        grpc_cpu_ratio_median_of_rounds=_median(_by_turn(websocket, war)),
        bare_cpu_ratio=ratio(websocket["server_cpu_us_per_action"],
                             bare["server_cpu_us_per_action"]))
    results.update({
        "server_cpu_ratio": ratio(server_cpu, bare["server_cpu_us_per_action"]),
        "server_cpu_ratio_by_round": by_turn,
        "server_cpu_ratio_median_of_rounds": _median(by_turn),
        "server_cpu_ratio_asyncio_bare": ratio(server_cpu,
                                               bare_asyncio["server_cpu_us_per_action"]),
        "server_cpu_ratio_asyncio_bare_median_of_rounds": _median(by_turn_asyncio),
        "engine_share": ratio(engine_figures["war"]["us_per_action"], server_cpu, 3),
        "action_throughput_ratio": ratio(war["actions_per_s"], bare["actions_per_s"]),
        "action_p50_ratio": ratio(war["submit_p50_ms"], bare["submit_p50_ms"]),
        "event_p99_ratio": ratio(war["event_p99_ms"], bare["event_p99_ms"]),
        "engine_us_per_action": {k: v["us_per_action"] for k, v in engine_figures.items()},
        "service_us_per_action": service["service_us_per_action"],
        "scale_20k": None if scale is None else scale_figures(scale),
        "cost_growth": [curve_point(point) for point in curve],
        "durable_throughput_ratio": None if durable is None
        else ratio(durable["actions_per_s"], war["actions_per_s"]),
        "detail": {"bare": bare, "bare_asyncio": bare_asyncio, "service": per_kind,
                   "websocket": websocket,
                   "durable": durable,
                   "engine": engine_figures, "scale": scale, "curve": curve},
    })
    results.update(cluster_figures)
    return results


TARGETS: dict[str, tuple[str, float]] = {
    # the gRPC ratios and the durable one: issue 35's bars
    "server_cpu_ratio": ("<=", 1.4), "engine_share": ("<=", 0.05),
    "action_throughput_ratio": (">=", 0.7), "action_p50_ratio": ("<=", 1.45),
    "event_p99_ratio": ("<=", 2.0),
    "scale_20k.rss_kib_per_game": ("<=", 60.0), "scale_20k.action_p99_ms_at_scale": ("<=", 20.0),
    "scale_20k.max_gc_pause_ms": ("<=", 50.0), "scale_20k.rss_growth_ratio": ("<=", 1.05),
    "durable_throughput_ratio": (">=", 0.9),
}


def _verdict(value: float | None, target: tuple[str, float]) -> str:
    if value is None:
        return "n/a"
    op, bound = target
    return "met" if (value >= bound if op == ">=" else value <= bound) else "missed"


def table(results: dict[str, Any]) -> str:
    """The markdown table of the run."""
    d = results["detail"]
    bare, war = d["bare"], d["service"]["war"]
    rows = [("figure", "bare grpc.aio", "Tapis", "key", "target", "")]

    def row(name: str, base: Any, ours: Any, key: str) -> None:
        value = results[key]
        rows.append((name, str(base), str(ours), f"`{key}` = {value}",
                     " ".join(map(str, TARGETS[key])), _verdict(value, TARGETS[key])))

    row("server CPU µs per action (every thread, /proc; both on uvloop)",
        bare["server_cpu_us_per_action"], war["server_cpu_us_per_action"], "server_cpu_ratio")
    turns = results["server_cpu_ratio_by_round"]
    if turns:
        rows.append((f"the same, turn by turn ({len(turns)} turns): median (range)", "", "",
                     f"`server_cpu_ratio_median_of_rounds` = "
                     f"{results['server_cpu_ratio_median_of_rounds']} "
                     f"({min(turns)}-{max(turns)})", "", ""))
    rows.append(("server CPU µs per action, the bare server on plain asyncio",
                 str(d["bare_asyncio"]["server_cpu_us_per_action"]),
                 str(war["server_cpu_us_per_action"]),
                 f"`server_cpu_ratio_asyncio_bare` = {results['server_cpu_ratio_asyncio_bare']}",
                 "recorded", ""))
    compared = results.get("compare")
    if compared is not None:
        rows.append((f"server CPU µs per action, Tapis from {compared['tree']}",
                     str(bare["server_cpu_us_per_action"]),
                     str(compared["server_cpu_us_per_action"]),
                     f"`compare.server_cpu_ratio` = {compared['server_cpu_ratio']} "
                     f"(median of turns {compared['server_cpu_ratio_median_of_rounds']})",
                     "recorded", ""))
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
    ws = results["websocket"]
    rows.append(("server CPU µs per action, Tapis over its player WebSocket (same turns)",
                 str(bare["server_cpu_us_per_action"]), str(ws["server_cpu_us_per_action"]),
                 f"`websocket.grpc_cpu_ratio` = {ws['grpc_cpu_ratio']} (÷ Tapis over gRPC; "
                 f"÷ bare: {ws['bare_cpu_ratio']})", "recorded", ""))
    rows.append(("the WebSocket side: actions/s, SubmitAction p50 / p99 ms, event p99 ms", "",
                 f"{ws['actions_per_s']}, {ws['submit_p50_ms']} / {ws['submit_p99_ms']}, "
                 f"{ws['event_p99_ms']}", "`websocket.*`", "", ""))
    for kind, figures in d["service"].items():
        if kind != "war":
            rows.append((f"actions/s ({kind}, GetGame then SubmitAction)", "",
                         str(figures["actions_per_s"]), "", "", ""))
    for kind, figures in d["engine"].items():
        rows.append((f"engine µs/action ({kind}; {figures['games_per_s']} games/s)", "",
                     str(figures["us_per_action"]), f"`engine_us_per_action.{kind}`", "", ""))
    row("engine share of the server's CPU per War action", "",
        d["engine"]["war"]["us_per_action"], "engine_share")
    rows.append(("our code µs per War action, in-process (no transport)", "",
                 str(results["service_us_per_action"]), "`service_us_per_action`", "", ""))
    at_scale = results["scale_20k"]
    if at_scale is not None:
        held = at_scale["games_held"]
        rows.append((f"games held (2 open streams each, {at_scale['rate_per_s']} actions/s "
                     f"for {at_scale['seconds']} s)", "", str(at_scale["games"]),
                     f"`scale_20k.games_held` = {held}", ">= 20000",
                     "met" if held >= 20_000 else "missed"))
        for name, key in (("RSS KiB per game", "rss_kib_per_game"),
                          ("SubmitAction p99 ms at that size", "action_p99_ms_at_scale"),
                          ("longest collector pause ms (set-up and play)", "max_gc_pause_ms"),
                          ("RSS at the end ÷ RSS once all were held", "rss_growth_ratio")):
            target = TARGETS[f"scale_20k.{key}"]
            rows.append((name, "", str(at_scale[key]), f"`scale_20k.{key}` = {at_scale[key]}",
                         " ".join(map(str, target)), _verdict(at_scale[key], target)))
        rows.append(("SubmitAction max ms at that size", "",
                     str(at_scale["action_max_ms_at_scale"]), "", "", ""))
    for point in results["cost_growth"]:
        rows.append((f"cost growth at {point['games']} games: p50 / p99 / max ms, RSS MiB", "",
                     f"{point['p50_ms']} / {point['p99_ms']} / {point['max_ms']}, "
                     f"{point['rss_mib']}", "", "", ""))
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
    parser.add_argument("--skip-scale", action="store_true",
                        help="leave out the scale run and the cost-growth curve")
    parser.add_argument("--scale-games", type=int, default=None,
                        help="tables held in the scale run (full run: 20,000)")
    parser.add_argument("--scale-s", type=float, default=None,
                        help="seconds of load in the scale run (full run: 60)")
    parser.add_argument("--compare", type=Path, default=None, metavar="TREE",
                        help="another source tree (a git worktree with its own `make setup`) "
                        "whose server takes its turns in the same War load: its "
                        "server_cpu_ratio beside this tree's")
    parser.add_argument("--turns", type=int, default=None,
                        help="turns each server takes in the War load (full run: 20)")
    parser.add_argument("--skip-cluster", action="store_true",
                        help="leave out the cluster benchmarks")
    parser.add_argument("--curve-png", type=Path, default=None,
                        help="where to draw the curve (full run: docs/scale_curve.png)")
    args = parser.parse_args(argv)
    raise_fd_limit()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    began = time.perf_counter()
    load_before = os.getloadavg()
    plan = PLANS[mode]
    if args.skip_scale:
        plan = replace(plan, scale_games=0)
    if args.scale_games is not None:
        plan = replace(plan, scale_games=args.scale_games)
    if args.scale_s is not None:
        plan = replace(plan, scale_s=args.scale_s)
    if args.turns is not None:
        plan = replace(plan, turns=args.turns)
    results = run(plan, args.profile, args.compare, cluster_run=not args.skip_cluster)
    if results["cost_growth"]:
        png = args.curve_png or (CURVE_PNG if mode == "full" else
                                 args.output.parent / "scale_curve.png")
        draw_curve(results["cost_growth"], png)
        results["curve_png"] = str(png)
    results["mode"] = mode
    results["machine"] = {"cpus": os.cpu_count(), "loadavg_before": load_before,
                          "loadavg_after": os.getloadavg()}
    results["seconds"] = round(time.perf_counter() - began, 1)
    print(table(results))
    if "postgres_throughput_ratio" in results:
        from tapis_bench import cluster

        print("\n" + cluster.table(results))
    machine = results["machine"]
    print(f"\n{machine['cpus']} CPUs; load average {machine['loadavg_before'][0]:.1f} before, "
          f"{machine['loadavg_after'][0]:.1f} after (other work on this machine counts too).")
    for note in results["notes"]:
        print(f"\nNote: {note}")
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
