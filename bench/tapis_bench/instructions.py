"""Our code's cost per War action counted, not timed: the in-process load under callgrind.

The CPU time of a few µs changes drowns in this shared machine's noise (two runs of the same
server differ by ±20 µs per action). Valgrind's callgrind counts the instructions a program
runs and simulates its caches: the same code and inputs give the same counts, whatever else
the machine does. This runs ``tapis_bench.inprocess``'s tables (64 seeded War games, both
seats streaming, on uvloop) under callgrind, with counting switched on only around
``--rounds`` rounds of one action per table (after 6 rounds of warm-up), and prints per
action: instructions (``Ir``), first-level cache misses (instructions and data) and last-level
misses of a deliberately small simulated cache (8 KiB first level, 128 KiB last level: our
code runs cold in the server, between grpc's own work, and a small cache makes it pay for
every line it touches), and ``est_cycles`` = Ir + 10 × first-level + 60 × last-level misses.

    python -m tapis_bench.instructions [--rounds 4]      # needs valgrind (Debian: valgrind)

Compare two code trees by running it with ``PYTHONPATH`` naming each tree's ``service``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

CACHES = ("--I1=8192,2,64", "--D1=8192,2,64", "--LL=131072,8,64")
WARM_UP_ROUNDS = 6


async def _child(rounds: int) -> None:
    """The measured program: READY after the warm-up, then the rounds once a line arrives."""
    from tapis_bench.inprocess import Tables

    tables = Tables()
    await tables.open()
    for _ in range(WARM_UP_ROUNDS):
        await tables.one_round()
    print("READY", flush=True)
    sys.stdin.readline()
    actions = 0
    for _ in range(rounds):
        actions += (await tables.one_round())[0]
    print(f"DONE {actions}", flush=True)
    sys.stdin.readline()
    tables.close()


def _run_child(rounds: int) -> None:
    import uvloop

    from tapis_bench.inprocess import as_in_the_server

    as_in_the_server()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_child(rounds))


def measure(rounds: int) -> dict[str, Any]:
    """Run the child under callgrind; the counts per action."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("tapis_bench.instructions needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        child = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=yes", *CACHES,
             f"--callgrind-out-file={out}", sys.executable, "-m", "tapis_bench.instructions",
             "--child", "--rounds", str(rounds)],
            env={**os.environ, "PYTHONHASHSEED": "0"}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert child.stdin is not None and child.stdout is not None
        if not child.stdout.readline().startswith("READY"):
            raise SystemExit("the measured program did not start")
        subprocess.run(["callgrind_control", "-i", "on", str(child.pid)], check=True,
                       capture_output=True)
        child.stdin.write("\n")
        child.stdin.flush()
        actions = int(child.stdout.readline().split()[1])
        subprocess.run(["callgrind_control", "-i", "off", str(child.pid)], check=True,
                       capture_output=True)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=120)
        with open(out, encoding="utf-8") as profile:
            text = profile.read()
    events = re.search(r"^events: (.*)$", text, re.M)
    totals = re.search(r"^totals: (.*)$", text, re.M)
    assert events is not None and totals is not None
    counts = dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=True))
    first = counts["I1mr"] + counts["D1mr"] + counts["D1mw"]
    last = counts["ILmr"] + counts["DLmr"] + counts["DLmw"]
    return {"actions": actions,
            "instructions_per_action": round(counts["Ir"] / actions),
            "l1_misses_per_action": round(first / actions),
            "ll_misses_per_action": round(last / actions),
            "est_cycles_per_action": round((counts["Ir"] + 10 * first + 60 * last) / actions)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _run_child(args.rounds)
        return
    print(json.dumps(measure(args.rounds)))


if __name__ == "__main__":
    main()
