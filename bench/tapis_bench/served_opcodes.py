"""The served War action's Python work, counted by function: opcodes run by the server process.

``tapis_bench.opcodes`` counts our code called in-process, without grpc; this counts what the
server's event loop runs in Python for each served action, grpc.aio's Python side included
(its servicer dispatch, ``context.write``, the call's coroutine): a real server process (memory
store, ``--log-level warning``) under the load of ``make bench`` (``tapis_bench.load``: War
tables, both seats' streams open, one action in flight per table). A ``sys.settrace`` opcode
tracer in the server is switched on by a signal once the tables are warm, and off again once
the last counted action is answered and delivered; the server then writes its counts. The
tracer makes the server slow but not different, so the counts hardly move from run to run or
with the host's load (how much grpc batches per wake-up still moves them by a little).

``--compare PYTHON`` (another tree's ``.venv/bin/python``, as for ``served_instructions``)
counts that tree's server too, one after the other, and prints the functions whose opcodes per
action differ the most: where one tree's request path does more than the other's.

``--bare`` counts the bare grpc.aio server (``tapis_bench.bare``) under the same load: what
grpc.aio and asyncio run in Python for any server (a task and an ``asyncio.wait`` per call),
and the bare server's own ``asyncio.Queue``.

    python -m tapis_bench.served_opcodes [--games 64] [--seconds 10] [--top 40]
                                         [--compare PYTHON] [--bare | --websocket]
                                         [--store memory|sqlite]

``--websocket`` counts the same load over the player WebSocket (``tapis_bench.load``'s
WebSocket driver) instead of gRPC.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from types import FrameType
from typing import Any

FLAGS = ["--log-level", "warning", "--allow-stacked-decks",
         "--create-rate", "0", "--keyless-create-rate", "0", "--join-rate", "0",
         "--list-rate", "0", "--keyless-max-tables", "0"]


class _Tracer:
    """Opcodes and calls by (file, function) while on; the counts written to ``out`` once
    switched off. Runs in the server (stdlib only: any tree's interpreter runs it)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.opcodes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._keys: dict[Any, str] = {}

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        key = self._keys.get(code)
        if key is None:
            name = "/".join(code.co_filename.split("/")[-2:])
            key = self._keys[code] = f"{name}:{code.co_name}"
        if event == "opcode":
            self.opcodes[key] += 1
        elif event == "call":
            self.calls[key] += 1
            frame.f_trace_opcodes = True
        return self.trace

    def switch(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGUSR1:
            sys.settrace(self.trace)
            return
        sys.settrace(None)
        with open(self.out, "w", encoding="utf-8") as written:
            json.dump({"opcodes": self.opcodes, "calls": self.calls}, written)


def serve(out: str, argv: list[str]) -> None:
    """The server (``tapis_service.process.main``, or with ``--bare PORT`` the bare one) with the
    tracer on SIGUSR1, off on SIGUSR2."""
    tracer = _Tracer(out)
    signal.signal(signal.SIGUSR1, tracer.switch)
    signal.signal(signal.SIGUSR2, tracer.switch)
    if argv[0] == "--bare":
        from tapis_bench.bare import main as bare_main

        bare_main(argv[1:])
        return
    from tapis_service.process.main import main as server_main

    server_main(argv)


async def _drive(server: str, target: str, games: int, warmup_s: float, seconds: float,
                 pid: int) -> int:
    """Open ``games`` tables, warm up, then count ``seconds`` of actions; the actions counted
    (``server`` "websocket": over the player WebSocket at ``target``)."""
    from tapis_bench import load

    config = {"games": games, "seats": 2, "channels": 2, "kind": "war"}
    rec, stop, gate = load.Recorder(), asyncio.Event(), load.Gate(is_open=False)
    tasks: list[asyncio.Task[None]] = []
    if server == "websocket":
        channels: list[Any] = []
        drivers = await load.start_ws_games(config, target, rec, stop, tasks, gate)
    else:
        channels, drivers = await load.start_games(config, target, server, rec, stop, tasks,
                                                   gate)
    gate.open()
    await asyncio.sleep(warmup_s)
    await gate.close()
    os.kill(pid, signal.SIGUSR1)
    await asyncio.sleep(0.2)  # the server's loop takes the signal at its next wake-up
    rec.measuring = True
    gate.open()
    await asyncio.sleep(seconds)
    await gate.close()
    rec.measuring = False
    os.kill(pid, signal.SIGUSR2)
    await load.shut_down(stop, drivers, tasks, channels)
    return rec.actions


def measure(python: str, games: int, warmup_s: float, seconds: float,
            bare: bool = False, websocket: bool = False, store: str = "memory"
            ) -> dict[str, Any]:
    """Opcodes per served action by function, for the server run by ``python`` (``bare``:
    the bare grpc.aio server, ``tapis_bench.bare``; ``websocket``: Tapis's actions over its
    player WebSocket; ``store``: the server's, sqlite in a data directory of the run's own)."""
    from tapis_bench.procs import free_port, wait_ready

    port, ws_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as folder:
        arguments = ["--bare", str(port)] if bare else [
            "--port", str(port), *FLAGS, "--store", store,
            *(["--data-dir", os.path.join(folder, "data")] if store == "sqlite" else [])]
        if websocket:
            arguments += ["--ws-port", str(ws_port)]
        out = os.path.join(folder, "opcodes.json")
        server = subprocess.Popen(
            [python, __file__, "--serve", out, *arguments],
            env={**os.environ, "PYTHONHASHSEED": "0"}, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, server, timeout_s=60)
            if websocket:
                from tapis_bench.served_instructions import _wait_listening

                _wait_listening(ws_port, timeout_s=60)
            side = "bare" if bare else "websocket" if websocket else "tapis"
            target = f"ws://127.0.0.1:{ws_port}/ws" if websocket else f"127.0.0.1:{port}"
            actions = asyncio.run(_drive(side, target, games, warmup_s, seconds, server.pid))
            deadline = time.monotonic() + 30
            while not os.path.exists(out) and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(0.5)
            with open(out, encoding="utf-8") as written:
                counts = json.load(written)
        finally:
            server.terminate()
            server.wait(timeout=60)
    per = max(actions, 1)
    return {"python": python, "server": side, "actions": actions,
            "opcodes_per_action": round(sum(counts["opcodes"].values()) / per, 1),
            "by_function": {key: [round(n / per, 2), round(counts["calls"].get(key, 0) / per, 2)]
                            for key, n in counts["opcodes"].items()}}


def _print(result: dict[str, Any], top: int) -> None:
    print(f"{result['python']} ({result['server']}): {result['opcodes_per_action']} opcodes "
          "per served action "
          f"({result['actions']} actions)")
    rows = sorted(result["by_function"].items(), key=lambda row: -row[1][0])[:top]
    print(f"{'opcodes':>8} {'calls':>6}  function")
    for key, (opcodes, calls) in rows:
        print(f"{opcodes:8.1f} {calls:6.2f}  {key}")


def _print_difference(this: dict[str, Any], other: dict[str, Any], top: int) -> None:
    print(f"\nthis tree − {other['python']}: "
          f"{this['opcodes_per_action'] - other['opcodes_per_action']:+.1f} opcodes per action")
    mine, theirs = this["by_function"], other["by_function"]
    keys = sorted(set(mine) | set(theirs),
                  key=lambda k: -abs(mine.get(k, [0, 0])[0] - theirs.get(k, [0, 0])[0]))
    print(f"{'diff':>8} {'this':>8} {'other':>8}  function (calls: this / other)")
    for key in keys[:top]:
        a, b = mine.get(key, [0, 0]), theirs.get(key, [0, 0])
        print(f"{a[0] - b[0]:+8.1f} {a[0]:8.1f} {b[0]:8.1f}  {key} ({a[1]} / {b[1]})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.served_opcodes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    parser.add_argument("--compare", metavar="PYTHON",
                        help="another tree's interpreter: its server counted too")
    parser.add_argument("--bare", action="store_true",
                        help="count the bare grpc.aio server (tapis_bench.bare) instead")
    parser.add_argument("--websocket", action="store_true",
                        help="count Tapis's actions over its player WebSocket instead of gRPC")
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory",
                        help="the server's store (sqlite: a data directory of the run's own)")
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = [measure(python, args.games, args.warmup, args.seconds, args.bare, args.websocket,
                       args.store)
               for python in (args.python, *([args.compare] if args.compare else []))]
    if args.json:
        print(json.dumps(results))
        return
    for result in results:
        _print(result, args.top)
        print()
    if len(results) == 2:
        _print_difference(results[0], results[1], args.top)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        del sys.path[0]  # this file's folder: its modules must not shadow the server's imports
        serve(sys.argv[2], sys.argv[3:])
    else:
        main()
