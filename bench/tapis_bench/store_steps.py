"""The SQLite store's CPU per journal input when each step of the loop brings a batch of them.

    .venv/bin/python -m tapis_bench.store_steps [--tables 50] [--per-step 19] [--steps 4000]
                                                [--warm 200] [--fold-at 512]
                                                [--fold-per-table 16] [--bare]

What the WebSocket server's store does under `make bench-peers`: each step of the loop queues
one input for each of ``--per-step`` tables drawn (seeded) from ``--tables``, and awaits them
all; a step of ``INLINE_AT`` writes or more is committed by the loop itself, one fsync for the
batch (19 a step at 50 tables, about 60 at 500, counted from that bench's receives and
fsyncs). After ``--warm`` steps, ``--steps`` more are timed: the process's CPU (user and
system, every thread: ``stats.cpu_split``) per input, and the wall time per step. The fold is
counted in: its settings are ``--fold-at`` and ``--fold-per-table`` (``sqlite_fold``). The
file is on the temporary directory's disk, as the bench's servers' data directories are.

Counted in the figure beyond the store: an entry dict per input and one ``asyncio.gather`` a
step (about 2 µs an input), the same in every configuration.

``--bare`` runs the same steps on SQLite alone, without the store: the file's schema
(``sqlite_store.MIGRATIONS``) and pragmas, each step's rows (the entry's text as the store
writes it, from a template) inserted into the inbox by one ``executemany`` in a transaction of
its own, the inbox folded by ``sqlite_fold.fold`` as often as the store folds it; no event
loop, no futures, no checks. What SQLite and the disk cost on this host at this batch size:
the floor under any durable action (docs/performance.md, "Group commit across the loop's
steps").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import tempfile
import time
import uuid
from typing import Any

from tapis_bench.stats import cpu_split
from tapis_service.stores import sqlite_fold, sqlite_store
from tapis_service.stores.checksums import canonical_json
from tapis_service.stores.sqlite_fold import FOLD_AT, FOLD_PER_TABLE
from tapis_service.stores.sqlite_store import SqliteStore


class Steps:
    """The load's steps, seeded: each, one input for each of ``per_step`` tables drawn from
    ``tables``, each table's inputs numbered from 1."""

    def __init__(self, tables: int, per_step: int) -> None:
        self.draw = random.Random(1)
        self.games = [str(uuid.UUID(int=self.draw.getrandbits(128), version=4))
                      for _ in range(tables)]
        self.per_step = per_step
        self.sent = dict.fromkeys(self.games, 0)
        self.requests = 0

    def next(self) -> list[tuple[str, int, int]]:
        """The next step's inputs: (table, the input's index, the request's number)."""
        inputs = []
        for game in self.draw.sample(self.games, self.per_step):
            self.sent[game] += 1
            self.requests += 1
            inputs.append((game, self.sent[game], self.requests))
        return inputs


def per_input(inputs: int, steps: int, cpu_before: tuple[float, float],
              started: float) -> dict[str, float]:
    """The CPU per input (all, user, system) and wall time per step since ``cpu_before``
    (``cpu_split``) and ``started`` (``time.perf_counter``), read now."""
    wall = time.perf_counter() - started
    user, system = (after - before for after, before
                    in zip(cpu_split(os.getpid()), cpu_before, strict=True))
    return {"cpu_us_per_input": round((user + system) / inputs * 1e6, 1),
            "user_us_per_input": round(user / inputs * 1e6, 1),
            "system_us_per_input": round(system / inputs * 1e6, 1),
            "wall_ms_per_step": round(wall / steps * 1e3, 3)}


async def measure(tables: int, per_step: int, steps: int, warm: int, fold_at: int,
                  fold_per_table: int) -> dict[str, Any]:
    load = Steps(tables, per_step)
    with tempfile.TemporaryDirectory(prefix="tapis-store-steps-") as folder:
        store = SqliteStore(folder, fold_at=fold_at, fold_per_table=fold_per_table)
        await asyncio.gather(*(store.created(game, {"kind": "war", "seats": 2})
                               for game in load.games))

        async def step() -> None:
            await asyncio.gather(*(store.appended(game, index, entry(index, request), 1)
                                   for game, index, request in load.next()))

        for _ in range(warm):
            await step()
        folds, commits = store.folds, store.commits
        cpu_before, started = cpu_split(os.getpid()), time.perf_counter()
        for _ in range(steps):
            await step()
        figures = per_input(steps * per_step, steps, cpu_before, started)
        figures.update(folds=store.folds - folds, commits=store.commits - commits)
        store.close()
    return {"tables": tables, "per_step": per_step, "steps": steps, "fold_at": fold_at,
            "fold_per_table": fold_per_table, **figures}


def entry(index: int, request: int) -> dict[str, Any]:
    """The journal entry of a War reveal, as the server writes one."""
    return {"input": {"input": "Act", "seat": index % 2, "action": {"kind": "reveal"}},
            "now_ms": 1_765_000_000_000 + request, "request_id": f"load-4242-{request}"}


ENTRY_TEXT = ('{{"input":{{"action":{{"kind":"reveal"}},"input":"Act","seat":{seat}}},'
              '"now_ms":{now},"request_id":"load-4242-{request}"}}')
"""``entry``'s canonical JSON, written without JSON (``--bare`` counts SQLite, not the text)."""


def entry_text(index: int, request: int) -> str:
    return ENTRY_TEXT.format(seat=index % 2, now=1_765_000_000_000 + request, request=request)


def measure_bare(tables: int, per_step: int, steps: int, warm: int, fold_at: int,
                 fold_per_table: int) -> dict[str, Any]:
    """``measure``'s steps on SQLite alone (``--bare``)."""
    assert entry_text(3, 7) == canonical_json(entry(3, 7))
    load = Steps(tables, per_step)
    inbox = folds = 0
    with tempfile.TemporaryDirectory(prefix="tapis-store-steps-") as folder:
        connection = sqlite3.connect(os.path.join(folder, sqlite_store.FILE_NAME),
                                     isolation_level=None)
        for pragma in ("journal_mode=WAL", f"synchronous={sqlite_store.SYNCHRONOUS}",
                       f"temp_store={sqlite_store.TEMP_STORE}"):
            connection.execute(f"PRAGMA {pragma}")
        for migration in sqlite_store.MIGRATIONS:
            connection.executescript(migration)
        connection.executemany("INSERT INTO games VALUES (?, ?, ?, 0, NULL)",
                               [(game, order, '{"kind":"war"}')
                                for order, game in enumerate(load.games, 1)])

        def step() -> None:
            nonlocal inbox, folds
            rows = [(game, index, entry_text(index, request))
                    for game, index, request in load.next()]
            connection.execute("BEGIN")
            connection.executemany(sqlite_fold.INSERT_INPUT, rows)
            connection.execute("COMMIT")
            inbox += per_step
            if fold_at and inbox >= max(fold_at, fold_per_table * tables):
                sqlite_fold.fold(connection)
                inbox, folds = 0, folds + 1

        for _ in range(warm):
            step()
        folds = 0
        cpu_before, started = cpu_split(os.getpid()), time.perf_counter()
        for _ in range(steps):
            step()
        figures = per_input(steps * per_step, steps, cpu_before, started)
        connection.close()
    return {"bare": True, "tables": tables, "per_step": per_step, "steps": steps,
            "fold_at": fold_at, "fold_per_table": fold_per_table, **figures, "folds": folds,
            "commits": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--per-step", type=int, default=19)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--warm", type=int, default=200)
    parser.add_argument("--fold-at", type=int, default=FOLD_AT)
    parser.add_argument("--fold-per-table", type=int, default=FOLD_PER_TABLE)
    parser.add_argument("--bare", action="store_true",
                        help="SQLite alone, without the store: the floor at this batch size")
    args = parser.parse_args()
    if not 0 < args.per_step <= args.tables:
        parser.error("--per-step must be between 1 and --tables")
    settings = (args.tables, args.per_step, args.steps, args.warm, args.fold_at,
                args.fold_per_table)
    figures = measure_bare(*settings) if args.bare else asyncio.run(measure(*settings))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
