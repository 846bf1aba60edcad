"""Where a served action's CPU goes: server CPU per action by part, Tapis beside bare.

    python -m tapis_bench.parts [--seconds 8] [--rate 250] [--output bench/parts.json]

The method (issue 13), for each server in turn (bare, then Tapis ``--store memory``), under the
War action load of ``make bench`` (64 games, 2 streams each):

1. The server's CPU per action, every thread, from ``/proc/PID/stat`` over the load's measured
   window (as ``make bench`` reads it).
2. Each thread's share of that CPU, from ``/proc/PID/task/TID/stat`` over the sampling window;
   threads other than the main one (grpc's poller and C-core event-engine threads) are rows of
   their own, by thread name.
3. The main thread's share split by part: py-spy (``--native``, idle samples dropped) samples its
   stacks, and each stack is given to one part by the rules in ``PARTS``; a part's µs per action
   = main-thread µs per action × its fraction of the samples.

py-spy is a dev tool, not a dependency: ``pip install py-spy`` first (root, or ptrace allowed).
Prints the table (markdown) and writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tapis_bench.procs import load, progress, servers

OUTPUT = Path(__file__).resolve().parent.parent / "parts.json"

GC = re.compile(r"\b(gc_collect_main|collect_with_callback|gc_collect_generations|"
                r"_PyObject_GC_Link|gc_collect)\b")
RULES: list[tuple[str, re.Pattern[str]]] = [
    # (part, what a frame of it looks like): a stack goes to the part of its innermost frame
    # that matches a rule (the first rule that matches that frame); collector frames anywhere
    # make it "gc"
    ("engine step", re.compile(r"/tapis_engine/")),
    ("structlog binding", re.compile(r"_Bound|bind_contextvars|reset_contextvars|"
                                     r"bound_contextvars|_bind_log")),
    ("per-action info line", re.compile(r"/structlog/|/orjson|tapis_service/logs")),
    ("prometheus", re.compile(r"/prometheus_client/")),
    ("token hashing", re.compile(r"token_hash|hashlib|_hashlib|\bhmac\b")),
    ("protobuf conversion", re.compile(r"tapis_service/convert\.py|tapis_service/codec/adapters/|"
                                       r"tapis_service/wire\.py|/google/protobuf/|"
                                       r"_message\.(cpython|abi3)|/google/_upb/|_pb2\.py")),
    ("fan-out and stream loop", re.compile(r"\b(publish|_publish|offer|StreamEvents|"
                                           r"subscribe|unsubscribe|_stream_backlog)\b \(|"
                                           r"tapis_bench/bare\.py")),
    ("host/session logic", re.compile(r"tapis_service/(host|session|clock|ratelimit|store|"
                                      r"recovery|gctune)\.py")),
    ("servicer glue", re.compile(r"tapis_service/(servicer|errors|server)\.py")),
    ("limits (call guard, size checks, stream caps)",
     re.compile(r"tapis_service/(callguard|limits|streams|housekeeping)\.py")),
    ("asyncio wake-ups", re.compile(r"/asyncio/|_asyncio|uvloop|selectors\.py")),
    ("grpc (Cython), main thread", re.compile(r"grpc/")),
]


def part_of(frames: list[str]) -> str:
    """The part one sampled main-thread stack (outermost frame first) is given to."""
    if any(GC.search(frame) for frame in frames):
        return "gc"
    for frame in reversed(frames):
        for name, pattern in RULES:
            if pattern.search(frame):
                return name
    return "other (interpreter, libc)"


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each thread of ``pid``, keyed by ``TID name``."""
    ticks = os.sysconf("SC_CLK_TCK")
    figures: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        figures[f"{tid} {name}"] = (int(fields[11]) + int(fields[12])) / ticks
    return figures


def sample(pid: int, seconds: float, rate: int, into: Path) -> None:
    spy = Path(sys.executable).parent / "py-spy"
    subprocess.run([str(spy) if spy.exists() else "py-spy", "record", "--pid", str(pid),
                    "--native", "--threads",
                    "--full-filenames", "--rate", str(rate), "--format", "raw",
                    "--duration", str(max(1, int(seconds))), "--output", str(into)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main_thread_parts(raw: Path, pid: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not frames[0].startswith(f"thread ({pid})"):
            continue
        counts[part_of(frames[1:])] += int(count)
    return counts


def measure(side: str, port: int, pid: int, seconds: float, rate: int,
            keep: Path | None = None) -> dict[str, Any]:
    """One server under the action load: µs per action by part."""
    warmup = 2.0
    config = {"mode": "actions", "server": "bare" if side == "bare" else "tapis",
              "target": f"127.0.0.1:{port}", "kind": "war", "games": 64, "seats": 2,
              "channels": 4, "warmup_s": warmup, "duration_s": seconds, "server_pid": pid}
    figures: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: figures.update(load(config)))
    runner.start()
    time.sleep(warmup + 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stacks.txt"
        before = thread_cpu(pid)
        sample(pid, seconds - 1.0, rate, raw)
        after = thread_cpu(pid)
        counts = main_thread_parts(raw, pid)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{side}.txt").write_bytes(raw.read_bytes())
    runner.join()
    per_action = figures["server_cpu_us_per_action"]
    spent = {t: after[t] - before.get(t, 0.0) for t in after}
    total = sum(spent.values()) or 1.0
    main_name = next(t for t in spent if t.startswith(f"{pid} "))
    main_us = per_action * spent[main_name] / total
    parts: dict[str, float] = {}
    samples = sum(counts.values()) or 1
    for name, count in counts.items():
        parts[name] = round(main_us * count / samples, 1)
    others: dict[str, float] = {}
    for thread, seconds_used in spent.items():
        if thread != main_name:
            name = thread.split(" ", 1)[1]
            others[name] = others.get(name, 0.0) + seconds_used
    for name, seconds_used in others.items():
        parts[f"thread {name}"] = round(per_action * seconds_used / total, 1)
    return {"server_cpu_us_per_action": per_action, "actions_per_s": figures["actions_per_s"],
            "main_thread_us_per_action": round(main_us, 1), "samples": samples,
            "parts_us_per_action": dict(sorted(parts.items(), key=lambda kv: -kv[1]))}


def table(results: dict[str, Any]) -> str:
    bare, ours = results["bare"]["parts_us_per_action"], results["tapis"]["parts_us_per_action"]
    names = list(dict.fromkeys([*ours, *bare]))
    lines = ["| part (server CPU µs per action) | bare grpc.aio | Tapis |", "|---|---|---|"]
    for name in names:
        lines.append(f"| {name} | {bare.get(name, '')} | {ours.get(name, '')} |")
    totals = [results[side]["server_cpu_us_per_action"] for side in ("bare", "tapis")]
    lines.append(f"| **total (every thread, /proc)** | {totals[0]} | {totals[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.parts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--keep-stacks", type=Path, default=None,
                        help="also keep each server's sampled stacks (py-spy raw) in this folder")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    with servers({"bare": ("bare", ""), "tapis": ("tapis", "memory")}) as running:
        for side in ("bare", "tapis"):
            progress(f"sampling {side} under the War load for {args.seconds} s")
            results[side] = measure(side, *running[side], args.seconds, args.rate,
                                    args.keep_stacks)
    results["machine"] = {"cpus": os.cpu_count(), "loadavg_before": load_before,
                          "loadavg_after": os.getloadavg()}
    print(table(results))
    print(f"\nload average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after",
          file=sys.stderr)
    args.output.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
