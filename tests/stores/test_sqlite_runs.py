"""The SQLite writer puts the inputs it vouches for in a batch into the inbox with one
statement (``sqlite_writer._Run``): what each input ends as is the plain way's, the refused
statement included (one at a time again, from what the writer knew before the run)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tests.support.sqlite_writes import holding, name, plain_journal, plain_outcomes, rows, traced


async def test_the_inputs_vouched_for_in_a_batch_are_one_statement(tmp_path: Path) -> None:
    held = threading.Event()
    store = SqliteStore(tmp_path, failpoint=holding(held))
    held.set()
    games = [f"g{number}" for number in range(5)]
    for game in games:
        await store.created(game, {"kind": "war"})
        await store.appended(game, 1, {"i": 1})
    statements = traced(store)
    held.clear()
    pending = [store.appended(game, index, {"i": index}) for index in (2, 3) for game in games]
    held.set()
    assert await asyncio.gather(*pending) == [None] * 10
    inserts = [sql for sql in statements if sql.startswith("INSERT")]
    assert len(inserts) == 1 and "json_each" in inserts[0]
    assert rows(tmp_path, "SELECT game_id, idx, entry FROM journal ORDER BY 1, 2") == [
        (game, index, f'{{"i":{index}}}') for game in games for index in (1, 2, 3)]
    store.close()


async def test_a_refused_run_ends_each_input_as_the_plain_way(tmp_path: Path) -> None:
    """A row the inbox holds, put there behind the writer's back (its memory lags): the run's
    one statement is refused, and the run goes in one input at a time; each input's outcome
    and the journal after are the plain way's."""
    held = threading.Event()
    store = SqliteStore(tmp_path, failpoint=holding(held))
    held.set()
    plain = plain_journal()
    for game in ("g", "h"):
        await store.created(game, {"kind": "war"})
        await store.appended(game, 1, {"i": 1})
        plain.execute("INSERT INTO games VALUES (?)", (game,))
        plain.execute("INSERT INTO journal VALUES (?, 1, ?)", (game, '{"i":1}'))
    behind = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    behind.execute("INSERT INTO journal_inbox VALUES ('g', 2, '{\"i\":\"behind\"}')")
    behind.close()
    plain.execute("INSERT INTO journal VALUES ('g', 2, '{\"i\":\"behind\"}')")
    appends = [("g", 2, '{"i":2}'), ("h", 2, '{"i":2}'), ("g", 3, '{"i":3}'),
               ("h", 3, '{"i":3}')]
    statements = traced(store)
    held.clear()
    pending = [store.appended(game, index, {"i": index}) for game, index, _ in appends]
    held.set()
    outcomes = await asyncio.gather(*pending, return_exceptions=True)
    assert [name(outcome) for outcome in outcomes] == plain_outcomes(plain, appends) \
        == ["JournalConflict", "ok", "ok", "ok"]
    tried = next(n for n, sql in enumerate(statements) if "json_each" in sql)  # as one, first
    reads = [sql for sql in statements[tried:] if sql.startswith("SELECT")]
    assert reads == ["SELECT 1 FROM journal WHERE game_id = 'g' AND idx = 2"]  # g 3's only:
    # one at a time from what the writer knew before the run (it vouches for g 2, h 2, h 3)
    assert rows(tmp_path, "SELECT game_id, idx, entry FROM journal ORDER BY 1, 2") \
        == plain.execute("SELECT game_id, idx, entry FROM journal ORDER BY 1, 2").fetchall()
    store.close()
