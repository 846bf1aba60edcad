"""Measure the cost of the durable store: appends per second and their latency.

    .venv/bin/python -m tapis_bench.store_commits [--writers 32] [--appends 200] [--rounds 3]

``writers`` concurrent tasks (like concurrent players) each await ``appends`` journal writes
in turn, as the host does before answering. Compared: the memory store, and SQLite in WAL mode
with synchronous FULL or NORMAL, with group commit or one transaction per write, and the group
commit as it was before issue 35 (one wake-up of the loop per write, not per batch). The
configurations take turns, ``rounds`` times; each line gives the medians over the rounds, with
the process's CPU per append (since the commit moved onto the loop, all of it the loop's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tapis_service.stores import sqlite_jobs
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import MemoryStore, Store, StoreError

ENTRY = {"input": {"input": "Act", "seat": 1, "action": {"kind": "reveal"}},
         "now_ms": 1_700_000_000_000, "request_id": "0123456789abcdef0123456789abcdef"}


class WakeupPerWrite(SqliteStore):
    """The writer before issue 35: each write's awaitable settled by a wake-up of its own."""

    def _settle(self, batch: Sequence[sqlite_jobs.Job],
                outcomes: Sequence[StoreError | None]) -> None:
        for job, outcome in zip(batch, outcomes, strict=True):
            if job.future is not None and job.loop is not None:
                job.loop.call_soon_threadsafe(sqlite_jobs.settle_all,
                                              [(job.future, outcome)])


async def run(store: Store, writers: int, appends: int) -> dict[str, float]:
    latencies: list[float] = []

    async def writer(number: int) -> None:
        game_id = f"game-{number}"
        await store.created(game_id, {"kind": "war"})
        for index in range(1, appends + 1):
            started = time.perf_counter()
            await store.appended(game_id, index, ENTRY, 1)
            latencies.append(time.perf_counter() - started)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(writer(n) for n in range(writers)))
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    latencies.sort()
    return {"cpu_us_per_append": round(cpu / (writers * (appends + 1)) * 1e6, 1),
            "appends_per_s": round(writers * appends / seconds),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3)}


async def main_async(args: argparse.Namespace) -> None:
    configurations: list[tuple[str, str | None, int, type[SqliteStore]]] = [
        ("memory", None, 0, SqliteStore),
        ("sqlite WAL synchronous=FULL, group commit", "FULL", 0, SqliteStore),
        ("sqlite WAL synchronous=FULL, group commit, a wake-up per write (before issue 35)",
         "FULL", 0, WakeupPerWrite),
        ("sqlite WAL synchronous=NORMAL, group commit", "NORMAL", 0, SqliteStore),
        ("sqlite WAL synchronous=FULL, one commit per write", "FULL", 1, SqliteStore)]
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in configurations}
    for _ in range(args.rounds):
        for name, synchronous, max_batch, kind in configurations:
            with tempfile.TemporaryDirectory(dir=args.dir) as data_dir:
                store: Store
                if synchronous is None:
                    store = MemoryStore()
                else:
                    store = kind(Path(data_dir), synchronous=synchronous, max_batch=max_batch)
                result = await run(store, args.writers, args.appends)
                if isinstance(store, SqliteStore):
                    result["writes_per_commit"] = round(
                        (args.writers * (args.appends + 1)) / max(store.commits, 1), 1)
                    store.close()
            rounds[name].append(result)
    for name, results in rounds.items():
        medians: dict[str, Any] = {key: statistics.median(r[key] for r in results)
                                   for key in results[0]}
        print(json.dumps({"store": name, "writers": args.writers, **medians}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to put the files (default: /tmp)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
