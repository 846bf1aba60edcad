"""The served War action counted, not timed: a real server process under callgrind.

``tapis_bench.instructions`` counts our code in-process, without grpc or the WebSocket; this
counts the whole server process (every thread: our code, grpc's, picows's, the interpreter's)
under the very load of ``make bench`` (``tapis_bench.load``: War tables, both seats' streams
open, one action in flight per table). The server runs under valgrind's callgrind with counting
off; the tables are opened and warmed up; counting is switched on, the tables act for
``--seconds`` (valgrind's time: the server runs ~50 times slower), their gate closes (every
action in flight answered, its events delivered), and counting is switched off: instructions
(``Ir``) per action, in all and on the main thread (the event loop: our code, grpc's Python
side, the interpreter).

Load on the machine changes how long it takes, not what the code does, but how much grpc
batches per wake-up does change with it: counts of one tree move by several per cent from one
run to the next. Compare trees in the same run: ``--compare`` runs each tree's server at the
same time as this tree's, under a load generator of its own, and prints every tree's counts.

    python -m tapis_bench.served_instructions [--side grpc|websocket|bare]
                                              [--compare PYTHON ...]
                                              [--store memory|sqlite] [--cache-sim]

``--side bare`` counts the bare grpc.aio server (``tapis_bench.bare``) under the same load: the
counts of Tapis over gRPC ÷ these are ``server_cpu_ratio`` counted instead of timed.

With ``--cache-sim`` callgrind also simulates the caches and the branch predictor, and the main
thread's misses per action are printed too (``I1mr`` instruction-cache, ``D1mr``/``D1mw`` data
misses, ``Bcm``/``Bim`` mispredicted conditional and indirect branches): two trees can run the
same number of instructions and still differ in time by these (a few per cent seen here).

With ``--store sqlite`` the server journals to a data directory of the run's own: the writer
thread's instructions count in the total (its fsyncs, being kernel time, do not).

``PYTHON`` is another tree's ``.venv/bin/python`` (set up with its own ``make setup``), as for
``make bench ARGS="--compare TREE"``.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from tapis_bench.procs import free_port, wait_ready
from tapis_service.cluster.launcher import wait_serving

FLAGS = ["--log-level", "warning", "--allow-stacked-decks",
         "--create-rate", "0", "--keyless-create-rate", "0", "--join-rate", "0",
         "--list-rate", "0", "--keyless-max-tables", "0"]


async def _drive(side: str, target: str, games: int, warmup_s: float, seconds: float,
                 pid: int) -> int:
    """Open ``games`` tables, warm up, then count ``seconds`` of actions; the actions counted."""
    from tapis_bench import load

    config = {"games": games, "seats": 2, "channels": 2, "kind": "war"}
    rec, stop, gate = load.Recorder(), asyncio.Event(), load.Gate(is_open=False)
    tasks: list[asyncio.Task[None]] = []
    if side == "websocket":
        channels: list[Any] = []
        drivers = await load.start_ws_games(config, target, rec, stop, tasks, gate)
    else:
        channels, drivers = await load.start_games(config, target,
                                                   "bare" if side == "bare" else "tapis", rec,
                                                   stop, tasks, gate)
    gate.open()
    await asyncio.sleep(warmup_s)
    await gate.close()
    _control(pid, "on")
    rec.measuring = True
    gate.open()
    await asyncio.sleep(seconds)
    await gate.close()
    rec.measuring = False
    _control(pid, "off")
    await load.shut_down(stop, drivers, tasks, channels)
    return rec.actions


def _wait_listening(port: int, timeout_s: float) -> None:
    """Until something accepts TCP connections on ``port``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _control(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True,
                   capture_output=True)


SIMULATED = ("I1mr", "D1mr", "D1mw", "Bcm", "Bim")
"""The simulated misses reported with ``--cache-sim`` (callgrind's event names)."""


def measure(python: str, side: str, games: int, warmup_s: float,
            seconds: float, cache_sim: bool = False, store: str = "memory") -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("tapis_bench.served_instructions needs valgrind "
                         "(apt-get install valgrind)")
    port, ws_port = free_port(), free_port()
    extra = ["--ws-port", str(ws_port)] if side == "websocket" else []
    with tempfile.TemporaryDirectory() as folder:
        extra += ["--store", store]
        if store == "sqlite":  # the data directory is this run's, deleted with the profile
            extra += ["--data-dir", os.path.join(folder, "data")]
        command = ([python, "-m", "tapis_bench.bare", str(port)] if side == "bare"
                   else [python, "-m", "tapis_service.process.main", "--port", str(port), *FLAGS,
                         *extra])
        out = os.path.join(folder, "callgrind.out")
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
             *(["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []),
             f"--callgrind-out-file={out}", *command],
            env={**os.environ, "PYTHONHASHSEED": "0"}, stderr=subprocess.DEVNULL)
        try:
            if side == "bare":
                wait_ready(port, server, timeout_s=300)
            else:  # SERVING: a call before it is answered "the server is starting"
                wait_serving(f"127.0.0.1:{port}", server, 300)
            if side == "websocket":  # with a data directory it opens after the recovery
                _wait_listening(ws_port, timeout_s=300)
            target = f"ws://127.0.0.1:{ws_port}/ws" if side == "websocket" \
                else f"127.0.0.1:{port}"
            actions = asyncio.run(_drive(side, target, games, warmup_s, seconds, server.pid))
        finally:
            server.terminate()
            server.wait(timeout=300)
        deadline = time.monotonic() + 60
        while not glob.glob(out + "*") and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1)
        by_thread: dict[int, int] = {}
        misses: dict[str, int] = {}
        for path in sorted(glob.glob(out + "*")):
            with open(path, encoding="utf-8") as profile:
                text = profile.read()
            found = re.search(r"^totals: ([\d ]+)", text, re.M)
            thread = re.search(r"^thread: (\d+)", text, re.M)
            events = re.search(r"^events: (.+)$", text, re.M)
            if found is not None:
                totals = [int(value) for value in found.group(1).split()]
                number = int(thread.group(1)) if thread else 1
                by_thread[number] = totals[0]
                if number == 1 and events is not None:
                    misses = dict(zip(events.group(1).split(), totals, strict=False))
            if os.environ.get("KEEP_CALLGRIND"):
                shutil.copy(path, os.environ["KEEP_CALLGRIND"] + path[len(out):])
    main_thread = by_thread.get(1, 0)
    return {"side": side, "store": store, "python": python, "games": games,
            "actions": actions,
            "instructions_per_action": round(sum(by_thread.values()) / actions),
            "main_thread_instructions_per_action": round(main_thread / actions),
            "threads": len(by_thread),
            **{f"main_thread_{name}_per_action": round(misses[name] / actions)
               for name in SIMULATED if name in misses}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.served_instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=("grpc", "websocket", "bare"), default="grpc",
                        help="Tapis over gRPC or its WebSocket, or the bare grpc.aio server "
                             "(tapis_bench.bare: the baseline of server_cpu_ratio)")
    parser.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    parser.add_argument("--compare", action="append", default=[], metavar="PYTHON",
                        help="another tree's interpreter: its server counted in the same run")
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory",
                        help="the server's store (sqlite: a data directory of the run's own)")
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--cache-sim", action="store_true",
                        help="also count simulated cache misses and mispredicted branches")
    args = parser.parse_args(argv)
    if not args.compare:
        print(json.dumps(measure(args.python, args.side, args.games, args.warmup, args.seconds,
                                 args.cache_sim, args.store)))
        return
    runs = [subprocess.Popen(
        [sys.executable, "-m", "tapis_bench.served_instructions", "--python", python,
         "--side", args.side, "--store", args.store, "--games", str(args.games),
         "--warmup", str(args.warmup),
         "--seconds", str(args.seconds), *(["--cache-sim"] if args.cache_sim else [])],
        stdout=subprocess.PIPE, text=True)
        for python in (args.python, *args.compare)]
    for run in runs:
        out, _ = run.communicate()
        print(out.strip())


if __name__ == "__main__":
    main()
