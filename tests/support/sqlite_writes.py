"""The SQLite writer's tests' helpers: the plain way an append was written before issue 35.3
(one statement in a savepoint per write), failpoints, and a file read by another connection."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.stores.sqlite_writer import Failpoint

PLAIN_APPEND = """INSERT INTO journal SELECT ?1, ?2, ?3
WHERE (?2 = 1 AND EXISTS (SELECT 1 FROM games WHERE game_id = ?1))
   OR EXISTS (SELECT 1 FROM journal WHERE game_id = ?1 AND idx = ?2 - 1)"""
"""The plain way: one statement, in a savepoint per write (the writer before issue 35.3)."""


def rows(data_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    reader = sqlite3.connect(data_dir / FILE_NAME)
    try:
        return reader.execute(sql).fetchall()
    finally:
        reader.close()


def plain_outcomes(connection: sqlite3.Connection,
                   appends: list[tuple[str, int, str]]) -> list[str]:
    """Each append the plain way, in one transaction: its outcome's name."""
    outcomes = []
    connection.execute("BEGIN")
    for params in appends:
        connection.execute("SAVEPOINT job")
        try:
            changed = connection.execute(PLAIN_APPEND, params).rowcount
            outcomes.append("ok" if changed else "StoreUnavailable")
        except sqlite3.IntegrityError:
            outcomes.append("JournalConflict")
            connection.execute("ROLLBACK TO job")
        connection.execute("RELEASE job")
    connection.execute("COMMIT")
    return outcomes


def plain_journal() -> sqlite3.Connection:
    """The plain way's own database (in memory): the games and their journal, as the store's
    file had them before issue 35.3."""
    plain = sqlite3.connect(":memory:", isolation_level=None)
    plain.executescript("CREATE TABLE games (game_id TEXT PRIMARY KEY);"
                        "CREATE TABLE journal (game_id TEXT NOT NULL, idx INTEGER NOT NULL, "
                        "entry TEXT NOT NULL, PRIMARY KEY (game_id, idx)) WITHOUT ROWID;")
    return plain


async def append_a_seeded_batch(store: SqliteStore, plain: sqlite3.Connection,
                                held: asyncio.Event, draw: random.Random,
                                sent: dict[str, int], steps: dict[int, int]) -> None:
    """2-12 appends to the tables of ``sent`` (each one's highest index sent so far), each the
    table's last index plus a step drawn from ``steps`` (step: weight; 1 is the next input, 2 a
    hole, 0 and -1 repeats), queued while ``held`` holds the writer's COMMIT: the same outcome
    for every append as the plain way's."""
    appends = []
    for _ in range(draw.randint(2, 12)):
        game = draw.choice(list(sent))
        index = sent[game] + draw.choices(list(steps), weights=list(steps.values()))[0]
        sent[game] = max(sent[game], index)
        appends.append((game, max(index, 1), '{"i":1}'))
    held.clear()
    pending = [store.appended(game, index, {"i": 1}) for game, index, _ in appends]
    held.set()
    outcomes = await asyncio.gather(*pending, return_exceptions=True)
    assert [name(outcome) for outcome in outcomes] == plain_outcomes(plain, appends)


def holding(gate: asyncio.Event) -> Failpoint:
    """A failpoint that holds each COMMIT until ``gate`` is set (bounded)."""
    async def hold(stage: str) -> None:
        await asyncio.wait_for(gate.wait(), 10)
    return hold


def name(outcome: BaseException | None) -> str:
    return "ok" if outcome is None else type(outcome).__name__


def failing_commit(code: int, armed: list[bool],
                   before: Callable[[], object] | None = None) -> Failpoint:
    """A failpoint that fails each COMMIT while ``armed[0]`` with SQLite's error ``code``;
    ``before`` runs first (the COMMIT itself: an fsync that failed after the data got there)."""
    async def failpoint(stage: str) -> None:
        if stage == "commit" and armed[0]:
            armed[0] = False
            if before is not None:
                before()
            error = sqlite3.OperationalError("injected")
            error.sqlite_errorcode = code
            raise error
    return failpoint


def traced(store: SqliteStore) -> list[str]:
    """The statements the store's writer runs from now on."""
    statements: list[str] = []
    store._connection.set_trace_callback(statements.append)
    return statements
