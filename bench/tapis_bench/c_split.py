"""Where a served War action's time goes at the C level: each server's CPU per action split by
shared object (grpc's Cython and core ``cygrpc``, the kernel, the interpreter, the compiled
hot path, libc, uvloop, ...), timed with ``perf``, the bare grpc.aio server beside Tapis.

Each side runs alone, in turn (``--rounds`` rounds, the order kept): a server process, the
War load of ``make bench`` against it (``tapis_bench.load``: 64 tables, both seats' streams
open, one action in flight per table, 4 connections), 3 s of warm-up, then ``--seconds``
measured under ``perf record -F 999 -p PID`` (no call graphs: grpc's core and uvloop are built
without frame pointers). Per side and round: actions/s, the server's CPU per action (every
thread, ``/proc``), its context switches per action (every thread, voluntary and not), its
read and write system calls and bytes per action (``/proc/PID/io``), and perf's samples per
object turned into µs per action.

Sides: ``bare`` (``tapis_bench.bare``), ``tapis`` (the memory server, as in
``served_instructions``), and ``spin``: the bare server whose ``Submit`` first runs a busy
loop of ``--spin-loops`` iterations of pure Python (~120 µs at 4,000 on this host; it touches
no memory): grpc's work per action at the action rate Tapis runs at, without Tapis's objects in
the caches. grpc's own CPU per action rises as the rate falls (fewer actions per wake-up), so
compare sides at a like rate.

    python -m tapis_bench.c_split [--sides bare,spin,tapis] [--rounds 2] [--seconds 8]
                                  [--spin-loops 4000]

Needs ``perf`` (Debian: linux-perf) and the right to profile the server (as root, or
``kernel.perf_event_paranoid`` <= 1). Timed on a shared host: record the load (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

OBJECTS = ("cygrpc", "[kernel.kallsyms]", "libpython3.11", "hotpath__mypyc", "libc", "loop",
           "_message", "libz")
"""The shared objects reported apart (by the start of their file name); the rest in ``other``."""
FLAGS = ["--log-level", "warning", "--allow-stacked-decks",
         "--create-rate", "0", "--keyless-create-rate", "0", "--join-rate", "0",
         "--list-rate", "0", "--keyless-max-tables", "0"]


def serve_spinning(port: int, loops: int) -> None:
    """The bare server, its ``Submit`` spinning ``loops`` iterations first."""
    from tapis_bench import bare

    plain = bare.Bare.submit

    async def submit(self: bare.Bare, request: bytes, context: Any) -> bytes:
        for _ in range(loops):
            pass
        return await plain(self, request, context)

    bare.Bare.submit = submit  # type: ignore[method-assign]
    bare.main([str(port)])


def _switches(pid: int) -> tuple[int, int]:
    """The process's context switches so far, every thread: (voluntary, involuntary)."""
    voluntary = involuntary = 0
    for path in glob.glob(f"/proc/{pid}/task/*/status"):
        with open(path, encoding="ascii") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary += int(line.split()[1])
    return voluntary, involuntary


def _io(pid: int) -> dict[str, int]:
    """The process's read and write system calls and bytes so far (``/proc/PID/io``: every
    thread's, sockets' included)."""
    with open(f"/proc/{pid}/io", encoding="ascii") as io:
        return {key: int(value) for key, value in (line.split(": ") for line in io)}


def _by_object(data: str) -> Counter[str]:
    """perf's samples by shared object."""
    report = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio",
         "-g", "none", "-F", "sample,dso"], capture_output=True, text=True, check=True).stdout
    samples: Counter[str] = Counter()
    for line in report.splitlines():
        found = re.match(r"\s*(\d+)\s+(\S+)", line)
        if found and not line.lstrip().startswith("#"):
            name = next((o for o in OBJECTS if found.group(2).startswith(o)), "other")
            samples[name] += int(found.group(1))
    return samples


async def _measure(side: str, port: int, pid: int, seconds: float, data: str) -> dict[str, Any]:
    from tapis_bench import load

    target = f"127.0.0.1:{port}"
    config = {"games": 64, "seats": 2, "channels": 4, "kind": "war"}
    rec, stop = load.Recorder(), asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    channels, drivers = await load.start_games(
        config, target, "tapis" if side == "tapis" else "bare", rec, stop, tasks)
    await asyncio.sleep(3)
    perf = subprocess.Popen(["perf", "record", "-F", "999", "-p", str(pid), "-o", data],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    switched, io = _switches(pid), _io(pid)
    cpu = load.cpu_seconds(pid)
    rec.measuring = True
    began = time.perf_counter()
    await asyncio.sleep(seconds)
    rec.measuring = False
    took = time.perf_counter() - began
    cpu = load.cpu_seconds(pid) - cpu
    voluntary, involuntary = (after - before for after, before in zip(_switches(pid), switched,
                                                                       strict=True))
    io = {key: value - io[key] for key, value in _io(pid).items()}
    perf.send_signal(signal.SIGINT)
    perf.wait()
    await load.shut_down(stop, drivers, tasks, channels, wait_s=5)
    actions = max(rec.actions, 1)
    samples = _by_object(data)  # one sample per ms of CPU (-F 999)
    return {"side": side, "actions_per_s": round(rec.actions / took, 1),
            "server_cpu_us_per_action": round(cpu / actions * 1e6, 1),
            "voluntary_switches_per_action": round(voluntary / actions, 2),
            "involuntary_switches_per_action": round(involuntary / actions, 2),
            **{f"{key}_per_action": round(io[key] / actions, 2)
               for key in ("syscr", "syscw", "rchar", "wchar")},
            "us_per_action_by_object": {name: round(samples[name] * 1000 / actions, 1)
                                        for name in (*OBJECTS, "other")}}


def run_side(side: str, seconds: float, loops: int, folder: str) -> dict[str, Any]:
    from tapis_bench.procs import free_port, wait_ready
    from tapis_service.cluster.launcher import wait_serving

    port = free_port()
    command = {"bare": [sys.executable, "-m", "tapis_bench.bare", str(port)],
               "spin": [sys.executable, "-m", "tapis_bench.c_split", "--serve-spin", str(port),
                        "--spin-loops", str(loops)],
               "tapis": [sys.executable, "-m", "tapis_service.process.main", "--port",
                         str(port), *FLAGS]}[side]
    server = subprocess.Popen(command)
    try:
        if side == "tapis":
            wait_serving(f"127.0.0.1:{port}", server, 60)
        else:
            wait_ready(port, server, timeout_s=60)
        return asyncio.run(_measure(side, port, server.pid, seconds,
                                    os.path.join(folder, f"{side}.data")))
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.c_split", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sides", default="bare,spin,tapis")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--spin-loops", type=int, default=4000)
    parser.add_argument("--serve-spin", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_spin is not None:
        serve_spinning(args.serve_spin, args.spin_loops)
        return
    if shutil.which("perf") is None:
        raise SystemExit("tapis_bench.c_split needs perf (Debian: apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(args.rounds):
            for side in args.sides.split(","):
                load_avg = os.getloadavg()[0]
                figures = run_side(side, args.seconds, args.spin_loops, folder)
                print(json.dumps({"round": round_number + 1, "load_avg": round(load_avg, 2),
                                  **figures}), flush=True)


if __name__ == "__main__":
    main()
