"""The SQLite journal's WAL pages per commit: what a batch of appends writes and fsyncs.

    .venv/bin/python -m tapis_bench.wal_frames [--tables 50] [--warm 300] [--rounds 30]
                                               [--page-size 4096] [--fold-at 512]
                                               [--fold-per-table 8]

``--tables`` tables each get ``--warm`` inputs (one per table per round, each round awaited
whole, so a commit carries one input per table), then the WAL is checkpointed and
checkpoints are switched off, and ``--rounds`` more rounds are written. The WAL's frame headers
then say how many frames (pages) each commit wrote, and of which kind (B-tree leaf or interior
page). ``--page-size`` sets the page size of the new file (SQLite's default is 4096);
``--fold-at`` the inputs in the journal's inbox at which the writer folds it into the by-table
tree (``sqlite_fold``), ``--fold-per-table`` the inputs per table in it at which it does when
that is more: the frames of the folds in the measured rounds are counted in the
figures per input, and given apart (``folds``, ``frames_per_fold``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import secrets
import sqlite3
import struct
import tempfile
from pathlib import Path

from tapis_service.stores.sqlite_fold import FOLD_AT, FOLD_PER_TABLE
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore

ENTRY = {"input": {"input": "Act", "seat": 1, "action": {"kind": "reveal"}},
         "now_ms": 1_700_000_000_000, "request_id": "0123456789abcdef0123456789abcdef"}
WAL_HEADER, FRAME_HEADER = 32, 24
PAGE_KINDS = {2: "index interior", 5: "table interior", 10: "index leaf", 13: "table leaf"}


def frames(wal: Path, page_size: int) -> tuple[list[int], collections.Counter[str]]:
    """The frames of each commit in ``wal``, and its frames by page kind."""
    data = wal.read_bytes()
    kinds: collections.Counter[str] = collections.Counter()
    commits, offset, count = [], WAL_HEADER, 0
    while offset + FRAME_HEADER + page_size <= len(data):
        page_number, commit_size = struct.unpack(">II", data[offset:offset + 8])
        page = data[offset + FRAME_HEADER:offset + FRAME_HEADER + page_size]
        flag = page[100] if page_number == 1 else page[0]  # page 1 starts with the file header
        kinds[PAGE_KINDS.get(flag, "other")] += 1
        count += 1
        if commit_size != 0:
            commits.append(count)
            count = 0
        offset += FRAME_HEADER + page_size
    return commits, kinds


async def measure(tables: int, warm: int, rounds: int, page_size: int,
                  fold_at: int, fold_per_table: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder:
        with sqlite3.connect(Path(folder) / FILE_NAME) as new:  # before any table: takes effect
            new.execute(f"PRAGMA page_size={int(page_size)}")
            new.execute("VACUUM")
        store = SqliteStore(folder, fold_at=fold_at, fold_per_table=fold_per_table)
        ids = [secrets.token_hex(8) for _ in range(tables)]
        await asyncio.gather(*(store.created(game_id, {"kind": "war"}) for game_id in ids))
        for index in range(1, warm + 1):
            await asyncio.gather(*(store.appended(game_id, index, ENTRY) for game_id in ids))
        await store.probe()  # behind the fold the last round may have started: then idle
        size = int(store._connection.execute("PRAGMA page_size").fetchone()[0])
        store._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store._connection.execute("PRAGMA wal_autocheckpoint=0")
        folds = store.folds
        for index in range(warm + 1, warm + rounds + 1):
            await asyncio.gather(*(store.appended(game_id, index, ENTRY) for game_id in ids))
        folds = store.folds - folds
        per_commit, kinds = frames(Path(folder) / f"{FILE_NAME}-wal", size)
        store.close()
    total, commits = sum(kinds.values()), len(per_commit)
    biggest = sorted(per_commit)[commits - folds:]  # a fold writes more than a batch
    return {"tables": tables, "warm": warm, "page_size": size, "fold_at": fold_at,
            "fold_per_table": fold_per_table,
            "commits": commits, "folds": folds,
            "frames_per_commit": round(total / commits, 1),
            "frames_per_batch": round((total - sum(biggest)) / (commits - folds), 1),
            "frames_per_fold": round(sum(biggest) / folds, 1) if folds else None,
            "frames_per_input": round(total / (rounds * tables), 2),
            "kib_per_input": round(total * (size + FRAME_HEADER) / (rounds * tables) / 1024, 2),
            "per_commit_by_kind": {kind: round(count / commits, 1)
                                   for kind, count in sorted(kinds.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--page-size", type=int, default=4096)
    parser.add_argument("--fold-at", type=int, default=FOLD_AT)
    parser.add_argument("--fold-per-table", type=int, default=FOLD_PER_TABLE)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.tables, args.warm, args.rounds,
                                         args.page_size, args.fold_at,
                                         args.fold_per_table))))


if __name__ == "__main__":
    main()
