"""The SQLite writer's tests' helpers: the plain way an append was written before issue 35.3
(one statement in a savepoint per write), failpoints, and a file read by another connection."""

from __future__ import annotations

import sqlite3
import threading
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


def holding(gate: threading.Event) -> Failpoint:
    """A failpoint that holds each COMMIT until ``gate`` is set (bounded)."""
    def hold(stage: str) -> None:
        gate.wait(10)
    return hold


def name(outcome: BaseException | None) -> str:
    return "ok" if outcome is None else type(outcome).__name__


def failing_commit(code: int, armed: list[bool],
                   before: Callable[[], object] | None = None) -> Failpoint:
    """A failpoint that fails each COMMIT while ``armed[0]`` with SQLite's error ``code``;
    ``before`` runs first (the COMMIT itself: an fsync that failed after the data got there)."""
    def failpoint(stage: str) -> None:
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
