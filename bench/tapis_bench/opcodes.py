"""Our code's interpreter work per War action, counted by function: Python opcodes run.

Inside the server our code runs cold, between grpc's and the kernel's work on the same core:
each opcode costs there several times what it costs in a warm loop ("Where the last fifth is"
in docs/performance.md's git history). The number of opcodes an action runs is therefore the
figure a change to the hot path has to lower. This counts them exactly: ``tapis_bench.inprocess``'s
tables (64 seeded War games, both seats streaming, on uvloop) under a ``sys.settrace`` opcode
tracer for ``--rounds`` rounds of one action per table, after 10 rounds of warm-up. The
tracer makes the code slow but not different, so the same tree gives the same counts on any
machine, in a few seconds (``tapis_bench.instructions`` counts machine instructions under
valgrind instead, and sees the C code too).

It prints the opcodes per action in all, and the functions that run the most, with their
calls per action. The harness's own lines (``tapis_bench/inprocess.py``, about 150 opcodes:
building each request, waking the streams' readers) are counted and shown like the others.

    python -m tapis_bench.opcodes [--rounds 5] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from types import FrameType
from typing import Any

Key = tuple[str, str]
WARM_UP_ROUNDS = 10


class Counts:
    """Opcodes and calls by (file, function), while tracing."""

    def __init__(self) -> None:
        self.opcodes: collections.Counter[Key] = collections.Counter()
        self.calls: collections.Counter[Key] = collections.Counter()
        self._keys: dict[Any, Key] = {}

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        key = self._keys.get(code)
        if key is None:
            key = self._keys[code] = ("/".join(code.co_filename.split("/")[-2:]), code.co_name)
        if event == "opcode":
            self.opcodes[key] += 1
        elif event == "call":
            self.calls[key] += 1
            frame.f_trace_opcodes = True
        return self.trace


async def _count(rounds: int) -> tuple[Counts, int]:
    from tapis_bench.inprocess import Tables

    tables = Tables()
    await tables.open()
    for _ in range(WARM_UP_ROUNDS):
        await tables.one_round()
    counts = Counts()
    actions = 0
    sys.settrace(counts.trace)
    try:
        for _ in range(rounds):
            actions += (await tables.one_round())[0]
    finally:
        sys.settrace(None)
        tables.close()
    return counts, actions


def run(rounds: int = 5, top: int = 40) -> dict[str, Any]:
    """Opcodes per action, in all and by function (the ``top`` ones)."""
    import uvloop

    from tapis_bench.inprocess import as_in_the_server

    as_in_the_server()
    counts, actions = uvloop.run(_count(rounds))
    per = max(actions, 1)
    return {
        "actions": actions,
        "opcodes_per_action": round(sum(counts.opcodes.values()) / per, 1),
        "by_function": [
            {"function": f"{path}:{name}", "opcodes": round(n / per, 1),
             "calls": round(counts.calls[(path, name)] / per, 2)}
            for (path, name), n in counts.opcodes.most_common(top)],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.opcodes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run(args.rounds, args.top)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['opcodes_per_action']} opcodes per action ({result['actions']} actions)")
    print(f"{'opcodes':>8} {'calls':>6}  function")
    for row in result["by_function"]:
        print(f"{row['opcodes']:8.1f} {row['calls']:6.2f}  {row['function']}")


if __name__ == "__main__":
    main()
