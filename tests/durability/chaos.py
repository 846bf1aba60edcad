"""Chaos run: `tapis-bot selfplay` against a durable server that is SIGKILLed and restarted.

    .venv/bin/python -m tests.durability.chaos --kind war --games 40 --kills 2

Starts `tapis-server --data-dir DIR` on a free port, starts `tapis-bot selfplay` against it,
and --kills times (at seeded random moments) kills the server with SIGKILL and restarts it on the
same port and directory. Prints one JSON line per kind: games finished, errors, kills, seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from tapis_engine.registry import GAMES
from tests.support.process import ServerProcess


async def chaos_run(kind: str, games: int, kills: int, seed: int, data_dir: Path,
                    kill_after_s: tuple[float, float]) -> dict[str, object]:
    rng = random.Random(seed)
    server = ServerProcess(data_dir)
    await server.start()
    started = time.perf_counter()
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapis_clients.bot", "--target", server.target,
        "selfplay", "--kind", kind, "--games", str(games), "--seed", str(seed),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    done = asyncio.ensure_future(bot.communicate())
    killed = 0
    downtime = 0.0
    try:
        for _ in range(kills):
            await asyncio.wait({done}, timeout=rng.uniform(*kill_after_s))
            if done.done():
                break
            server.kill()
            down = time.perf_counter()
            killed += 1
            await server.start()
            downtime += time.perf_counter() - down
        out, err = await done
    finally:
        server.stop()
    try:
        result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = {"kind": kind, "games": games, "finished": 0, "errors": -1,
                  "bot_stderr": err.decode()[-2000:]}
    result.update(kills=killed, restart_s=round(downtime / max(killed, 1), 2),
                  wall_s=round(time.perf_counter() - started, 1), bot_exit=bot.returncode)
    for line in err.decode().splitlines():
        if line.startswith("error:"):
            print(line, file=sys.stderr)
    return result


async def main_async(args: argparse.Namespace) -> int:
    kinds = [args.kind] if args.kind != "all" else sorted(GAMES)
    failures = 0
    for index, kind in enumerate(kinds):
        with tempfile.TemporaryDirectory(prefix=f"tapis-chaos-{kind}-") as data_dir:
            result = await chaos_run(kind, args.games, args.kills, args.seed + index,
                                     Path(data_dir), (args.min_s, args.max_s))
        print(json.dumps(result), flush=True)
        failures += int(result["finished"] != args.games or result["errors"] != 0
                        or result["kills"] != args.kills)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="all", help="a game kind, or all (every registered)")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-s", type=float, default=2.0, help="earliest kill after a start")
    parser.add_argument("--max-s", type=float, default=5.0, help="latest kill after a start")
    raise SystemExit(asyncio.run(main_async(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
