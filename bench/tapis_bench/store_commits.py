"""Measure the cost of the durable store: appends per second and their latency.

    .venv/bin/python -m tapis_bench.store_commits [--writers 32] [--appends 200]

``writers`` concurrent tasks (like concurrent players) each await ``appends`` journal writes
in turn, as the host does before answering. Compared: the memory store, and SQLite in WAL mode
with synchronous FULL or NORMAL, with group commit or one transaction per write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from tapis_service.sqlite_store import SqliteStore
from tapis_service.store import MemoryStore, Store

ENTRY = {"input": {"input": "Act", "seat": 1, "action": {"kind": "reveal"}},
         "now_ms": 1_700_000_000_000, "request_id": "0123456789abcdef0123456789abcdef"}


async def run(store: Store, writers: int, appends: int) -> dict[str, float]:
    latencies: list[float] = []

    async def writer(number: int) -> None:
        game_id = f"game-{number}"
        await store.created(game_id, {"kind": "war"})
        for index in range(1, appends + 1):
            started = time.perf_counter()
            await store.appended(game_id, index, ENTRY, 1)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer(n) for n in range(writers)))
    seconds = time.perf_counter() - started
    latencies.sort()
    return {"appends_per_s": round(writers * appends / seconds),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3)}


async def main_async(args: argparse.Namespace) -> None:
    configurations: list[tuple[str, str | None, int]] = [
        ("memory", None, 0), ("sqlite WAL synchronous=FULL, group commit", "FULL", 0),
        ("sqlite WAL synchronous=NORMAL, group commit", "NORMAL", 0),
        ("sqlite WAL synchronous=FULL, one commit per write", "FULL", 1)]
    for name, synchronous, max_batch in configurations:
        with tempfile.TemporaryDirectory(dir=args.dir) as data_dir:
            store: Store
            if synchronous is None:
                store = MemoryStore()
            else:
                store = SqliteStore(Path(data_dir), synchronous=synchronous,
                                    max_batch=max_batch)
            result = await run(store, args.writers, args.appends)
            if isinstance(store, SqliteStore):
                result["writes_per_commit"] = round(
                    (args.writers * (args.appends + 1)) / max(store.commits, 1), 1)
            store.close()
        print(json.dumps({"store": name, "writers": args.writers, **result}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--dir", default=None, help="where to put the files (default: /tmp)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
