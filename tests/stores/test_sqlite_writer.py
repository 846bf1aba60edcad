"""The SQLite writer's shortcuts equal the plain way: an append is a check then a plain INSERT
(no check for an input whose predecessor the writer saw committed), and only a job with a change
followed by other statements gets a savepoint of its own."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import CommitUnknown, JournalConflict, StoreUnavailable
from tests.support.sqlite_writes import (
    append_a_seeded_batch,
    failing_commit,
    holding,
    plain_journal,
    rows,
    traced,
)


@pytest.mark.parametrize("seed", range(8))
async def test_appends_in_batches_end_as_the_plain_way_ends_them(tmp_path: Path,
                                                                  seed: int) -> None:
    """Seeded batches of appends, mostly each table's next input, with holes, repeats and an
    unknown table, each batch held until it is all queued: the same outcome for every append,
    the same journal after."""
    draw = random.Random(seed)
    games = ["g0", "g1", "g2"]
    plain = plain_journal()
    held = asyncio.Event()
    store = SqliteStore(tmp_path / "store", failpoint=holding(held))
    held.set()
    for game in games[:2]:  # g2 is never created
        await store.created(game, {"kind": "war"})
        plain.execute("INSERT INTO games VALUES (?)", (game,))
    sent = dict.fromkeys(games, 0)
    for _ in range(12):  # mostly the next input; some holes and repeats
        await append_a_seeded_batch(store, plain, held, draw, sent, {1: 8, 2: 1, 0: 1})
    assert rows(tmp_path / "store", "SELECT game_id, idx, entry FROM journal ORDER BY 1, 2") \
        == plain.execute("SELECT game_id, idx, entry FROM journal ORDER BY 1, 2").fetchall()
    store.close()


async def test_a_refused_job_changes_nothing_and_takes_no_neighbour_with_it(
        tmp_path: Path) -> None:
    held = asyncio.Event()
    store = SqliteStore(tmp_path, failpoint=holding(held))
    held.set()
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    held.clear()
    jobs: dict[str, Any] = {
        # a change, then a check that fails: the change is undone (a savepoint)
        "change_then_check": store._submit([
            ("INSERT INTO meta VALUES ('a', '1')", (), ""),
            ("SELECT 1 FROM games WHERE game_id = 'nowhere'", (), "no such game")]),
        # two changes, the second refused by SQLite: the first is undone (a savepoint)
        "two_changes": store._submit([
            ("INSERT INTO meta VALUES ('b', '1')", (), ""),
            ("INSERT INTO meta VALUES ('b', '2')", (), "")]),
        # a check, then one change refused by SQLite: undone by SQLite itself (no savepoint)
        "conflict": store.appended("g", 1, {"i": "again"}),
        "neighbour": store.appended("g", 2, {"i": 2}),
        "hole": store.appended("g", 4, {"i": 4}),
    }
    held.set()
    outcomes = dict(zip(jobs, await asyncio.gather(*jobs.values(), return_exceptions=True),
                        strict=True))
    assert isinstance(outcomes["change_then_check"], StoreUnavailable)
    assert isinstance(outcomes["two_changes"], JournalConflict)
    assert isinstance(outcomes["conflict"], JournalConflict)
    assert outcomes["neighbour"] is None
    assert isinstance(outcomes["hole"], StoreUnavailable)
    assert rows(tmp_path, "SELECT key FROM meta WHERE key IN ('a', 'b')") == []
    assert rows(tmp_path, "SELECT idx, entry FROM journal ORDER BY idx") \
        == [(1, '{"i":1}'), (2, '{"i":2}')]
    store.close()



# --- the inputs the writer vouches for (its memory of what is committed) --------------------


async def test_an_input_after_one_seen_committed_is_inserted_without_a_read(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    await store.created("g", {"kind": "war"})
    statements = traced(store)
    for index in range(1, 5):
        await store.appended("g", index, {"i": index})
    reads = [sql for sql in statements if sql.startswith("SELECT")]
    assert reads == ["SELECT 1 FROM games WHERE game_id = 'g'"]  # input 1's only
    assert sum(sql.startswith("INSERT INTO journal") for sql in statements) == 4
    store.close()


async def test_the_inputs_of_a_failed_commit_are_never_vouched_for(tmp_path: Path) -> None:
    armed = [False]
    store = SqliteStore(tmp_path, failpoint=failing_commit(sqlite3.SQLITE_FULL, armed))
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    armed[0] = True
    with pytest.raises(StoreUnavailable):
        await store.appended("g", 2, {"i": 2})  # its commit fails: 2 is not in the file
    with pytest.raises(StoreUnavailable, match="input 2 is not committed"):
        await store.appended("g", 3, {"i": 3})
    await store.appended("g", 2, {"i": "again"})
    await store.appended("g", 3, {"i": 3})
    assert rows(tmp_path, "SELECT idx, entry FROM journal ORDER BY idx") \
        == [(1, '{"i":1}'), (2, '{"i":"again"}'), (3, '{"i":3}')]
    store.close()


async def test_a_commit_in_doubt_that_reached_the_disk_is_read_back(tmp_path: Path) -> None:
    armed, box = [False], list[SqliteStore]()
    store = SqliteStore(tmp_path, failpoint=failing_commit(
        sqlite3.SQLITE_IOERR_FSYNC, armed, lambda: box[0]._connection.execute("COMMIT")))
    box.append(store)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    armed[0] = True
    with pytest.raises(CommitUnknown):
        await store.appended("g", 2, {"i": 2})  # in doubt, and in fact committed
    with pytest.raises(JournalConflict):
        await store.appended("g", 2, {"i": "again"})
    await store.appended("g", 3, {"i": 3})  # its predecessor is found in the file
    assert rows(tmp_path, "SELECT idx FROM journal ORDER BY idx") == [(1,), (2,), (3,)]
    store.close()


async def test_a_dropped_table_is_forgotten(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    await store.appended("g", 2, {"i": 2})
    await store.dropped("g")
    await store.created("g", {"kind": "war"})
    with pytest.raises(StoreUnavailable, match="input 2 is not committed"):
        await store.appended("g", 3, {"i": 3})
    await store.appended("g", 1, {"i": "new"})
    assert rows(tmp_path, "SELECT idx, entry FROM journal") == [(1, '{"i":"new"}')]
    store.close()


@pytest.mark.parametrize("max_batch", [0, 3])
async def test_the_writes_of_one_step_of_the_loop_are_one_batch_in_order(
        tmp_path: Path, max_batch: int) -> None:
    """What one step of the loop queues reaches the writer together (one transaction, or
    ``max_batch`` at a time), in the order queued, a snapshot behind its input; what is
    queued when the store closes is committed."""
    store = SqliteStore(tmp_path, max_batch=max_batch)
    await asyncio.gather(*(store.created(f"g{i}", {"kind": "war"}) for i in range(4)))
    statements, commits = traced(store), store.commits
    writes = [store.appended(f"g{i}", 1, {"i": i}) for i in range(4)]
    writes.append(store.snapshot("g3", 1, {"format": 1}))
    await asyncio.gather(*writes)
    assert store.commits - commits == (1 if not max_batch else 2)
    inserted = [sql.split("'")[1] for sql in statements if sql.startswith(("INSERT INTO journal",
                                                                           "INSERT OR REPLACE"))]
    assert inserted == ["g0", "g1", "g2", "g3", "g3"]
    store.appended("g0", 2, {"i": 0})
    store.close()  # before the loop's next step: handed to the writer by the close
    assert rows(tmp_path, "SELECT COUNT(*) FROM journal") == [(5,)]


async def test_a_first_input_whose_commit_was_in_doubt_is_looked_for_in_the_inbox(
        tmp_path: Path) -> None:
    """The inbox has no index (schema 4): the writer reads it only for the tables that may have
    inputs there. A commit in doubt puts its tables among them, so the retry of a table's
    first input that did reach the disk is refused, never put in twice."""
    armed, box = [False], list[SqliteStore]()
    store = SqliteStore(tmp_path, failpoint=failing_commit(
        sqlite3.SQLITE_IOERR_FSYNC, armed, lambda: box[0]._connection.execute("COMMIT")))
    box.append(store)
    await store.created("g", {"kind": "war"})
    armed[0] = True
    with pytest.raises(CommitUnknown):
        await store.appended("g", 1, {"i": 1})  # in doubt, and in the inbox in fact
    statements = traced(store)
    with pytest.raises(JournalConflict):
        await store.appended("g", 1, {"i": "again"})
    assert any("FROM journal WHERE" in sql for sql in statements)  # both parts read
    await store.appended("g", 2, {"i": 2})
    assert rows(tmp_path, "SELECT idx, entry FROM journal ORDER BY idx") == [
        (1, '{"i":1}'), (2, '{"i":2}')]
    store.close()


async def test_a_table_with_no_input_in_the_inbox_is_looked_for_in_the_tree_alone(
        tmp_path: Path) -> None:
    """An input the writer cannot vouch for (its table not seen since the store opened) is
    checked in the tree, by its key, without reading the inbox, which holds none of its
    inputs (the store folds the inbox when it opens)."""
    store = SqliteStore(tmp_path)
    await store.created("g", {"kind": "war"})
    await store.created("h", {"kind": "war"})
    for index in (1, 2):
        await store.appended("g", index, {"i": index})
    store.close()
    store = SqliteStore(tmp_path)  # folded: g's inputs in the tree
    await store.appended("h", 1, {"i": 1})  # h in the inbox now, g still not
    statements = traced(store)
    await store.appended("g", 3, {"i": 3})
    with pytest.raises(JournalConflict):
        await store.appended("h", 1, {"i": "again"})  # h may have inputs in the inbox
    checks = [sql for sql in statements if "SELECT" in sql]
    assert [sql.split(" FROM ")[1].split(" ")[0] for sql in checks] == [
        "journal_folded",  # g's 2, in the tree alone
        "journal_folded",  # g's 3 in it? (unless)
        "games",  # h's creation record
        "journal",  # h's 1 in either part? (unless: the inbox read)
    ]
    store.close()


async def test_a_snapshot_of_an_input_the_writer_saw_committed_reads_nothing(
        tmp_path: Path) -> None:
    """A snapshot needs its input committed: the writer knows it for an input it committed
    (or puts in the same batch); otherwise the file is read, and a snapshot of an input it
    does not hold is refused."""
    store = SqliteStore(tmp_path)
    await store.created("g", {"kind": "war"})
    statements = traced(store)
    await store.appended("g", 1, {"i": 1})
    await asyncio.gather(store.appended("g", 2, {"i": 2}),
                         store.snapshot("g", 2, {"format": 1, "state": "two"}))
    await store.snapshot("g", 1, {"format": 1, "state": "one"})
    reads = [sql for sql in statements if sql.startswith("SELECT")]
    assert reads == ["SELECT 1 FROM games WHERE game_id = 'g'"]  # input 1's only
    with pytest.raises(StoreUnavailable, match="input 3 is not committed"):
        await store.snapshot("g", 3, {"format": 1, "state": "three"})
    store.close()
    store = SqliteStore(tmp_path)  # a writer that has seen nothing: the file is read
    await store.snapshot("g", 2, {"format": 1, "state": "two again"})
    with pytest.raises(StoreUnavailable, match="input 3 is not committed"):
        await store.snapshot("g", 3, {"format": 1, "state": "three"})
    store.close()
    assert rows(tmp_path, "SELECT idx FROM snapshots") == [(2,)]
