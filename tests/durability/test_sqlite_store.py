"""The SQLite store: committed before the awaitable completes, in order, group-committed;
its schema versioned, migrated at open, a newer one refused."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tapis_service.stores import sqlite_store
from tapis_service.stores.sqlite_store import (
    FILE_NAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    SqliteStore,
    schema_version,
)
from tapis_service.stores.store import (
    CommitUnknown,
    SchemaTooNew,
    StoreCorrupt,
    StoreInUse,
    StoreUnavailable,
)
from tests.support.process import ServerProcess


def must(pending: asyncio.Future[None] | None) -> asyncio.Future[None]:
    assert pending is not None, "inside a running loop the store returns an awaitable"
    return pending


def committed(data_dir: Path, sql: str) -> list[tuple[object, ...]]:
    """What another connection (another process, after a crash) would read."""
    reader = sqlite3.connect(data_dir / FILE_NAME)
    try:
        return reader.execute(sql).fetchall()
    finally:
        reader.close()


async def test_an_append_is_committed_when_its_awaitable_completes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    await must(store.created("g", {"kind": "war"}))
    await must(store.appended("g", 1, {"input": {"input": "Claim", "seat": 0}}))
    assert committed(tmp_path, "SELECT idx FROM journal WHERE game_id = 'g'") == [(1,)]
    assert committed(tmp_path, "PRAGMA journal_mode") == [("wal",)]
    store.close()


async def test_concurrent_appends_are_group_committed_in_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    pending = [must(store.created(f"g{n}", {"kind": "war", "n": n})) for n in range(20)]
    pending += [must(store.appended(f"g{n}", i, {"i": i}))
                for i in range(1, 51) for n in range(20)]
    await asyncio.gather(*pending)
    assert store.commits < len(pending)  # several writes per transaction
    loaded = await store.load()
    assert [game_id for game_id, *_ in loaded] == [f"g{n}" for n in range(20)]
    assert all(journal == [{"i": i} for i in range(1, 51)] for *_, journal in loaded)
    store.close()


async def test_a_steps_writes_are_one_commit_on_the_loop_and_each_gets_its_own_outcome(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writes queued in one step of the loop: one transaction, committed by the loop
    itself (no other thread wakes it), each write with its own outcome."""
    loop = asyncio.get_running_loop()
    wakeups: list[object] = []
    plain = loop.call_soon_threadsafe
    monkeypatch.setattr(loop, "call_soon_threadsafe",
                        lambda *args, **kw: (wakeups.append(args[0]), plain(*args, **kw))[1])
    store = SqliteStore(tmp_path)
    pending = [must(store.created(f"g{n}", {"kind": "war"})) for n in range(10)]
    pending += [must(store.appended(f"g{n}", 1, {"i": 1})) for n in range(10)]
    hole = must(store.appended("g0", 3, {"i": 3}))  # input 2 is missing: refused alone
    await asyncio.gather(*pending)
    with pytest.raises(StoreUnavailable):
        await hole
    assert store.commits == 1 and wakeups == []
    assert committed(tmp_path, "SELECT COUNT(*) FROM journal") == [(10,)]
    store.close()


@pytest.mark.parametrize(("settings", "steps", "batches"), [
    ({}, [8, 8, 8], [24]),  # each step behind adds writes: one batch; then a step adds none
    ({}, [8], [8]),  # nothing behind: handed over after one step more
    ({"gather_max": 12}, [8, 8, 8], [16, 8]),  # 16 writes: no more gathering
    ({"gather_s": 0}, [8, 8, 8], [16, 8]),  # its time is up after one step
    ({}, [3, 8, 8], [3, 16]),  # a step of few writes: handed over at once (the thread's)
])
async def test_a_batch_of_many_writes_gathers_the_writes_of_the_next_steps(
        tmp_path: Path, settings: dict[str, float], steps: list[int], batches: list[int]
        ) -> None:
    """A step of ``inline_at`` writes or more is handed over once the steps right behind it
    added theirs, while each adds some, up to ``gather_max`` writes and ``gather_s`` seconds
    (here an hour unless set, so that no test rests on how fast the loop turns): one
    transaction, one fsync, for the requests a busy loop read meanwhile. A step of fewer
    writes is handed over at once. Every write is committed in order either way."""
    handed: list[int] = []
    store = SqliteStore(tmp_path, handed=handed.append,
                        **{"gather_s": 3600.0, **settings})  # type: ignore[arg-type]
    await asyncio.gather(*(must(store.created(f"g{n}", {"kind": "war"})) for n in range(8)))
    handed.clear()
    commits = store.commits
    writes: list[asyncio.Future[None]] = []
    sent = [0] * 8

    def queue(count: int) -> None:  # the next input of each of ``count`` tables
        for n in range(count):
            sent[n] += 1
            writes.append(must(store.appended(f"g{n}", sent[n], {"i": sent[n]})))

    first = steps[0]
    queue(first)
    await asyncio.sleep(0)  # the step's callbacks, the hand-off's first
    assert handed == ([first] if first < store.inline_at else [])
    if first < store.inline_at:  # the thread's: committed before the next steps are queued
        await asyncio.gather(*writes)
    for count in steps[1:]:
        queue(count)
        await asyncio.sleep(0)
    await asyncio.gather(*writes)
    assert handed == batches
    assert store.commits - commits == len(batches)
    assert committed(tmp_path, "SELECT COUNT(*) FROM journal") == [(sum(steps),)]
    store.close()


async def test_a_step_of_few_writes_goes_to_the_writer_thread_and_none_overtakes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of fewer than ``inline_at`` writes is committed by the writer thread (which
    wakes the loop for its answers); a step of many queued while the thread still holds a
    batch goes to the thread too, behind it: input 2 onwards would be refused (no
    predecessor) had the loop committed them first."""
    loop = asyncio.get_running_loop()
    wakeups: list[object] = []
    plain = loop.call_soon_threadsafe
    monkeypatch.setattr(loop, "call_soon_threadsafe",
                        lambda *args, **kw: (wakeups.append(args[0]), plain(*args, **kw))[1])
    gate, entered = asyncio.Event(), asyncio.Event()

    async def hold(stage: str) -> None:
        entered.set()
        await gate.wait()

    store = SqliteStore(tmp_path, inline_at=4)
    await must(store.created("g", {"kind": "war"}))  # one write: the thread's
    assert wakeups and store.commits == 1
    store.failpoint = hold
    first = must(store.appended("g", 1, {"i": 1}))  # one write: the thread's, held there
    await asyncio.wait_for(entered.wait(), 10)
    store.failpoint = None
    many = [must(store.appended("g", index, {"i": index})) for index in range(2, 12)]
    await asyncio.sleep(0)  # the step of ten is handed over: to the thread, behind input 1
    assert not any(write.done() for write in many)
    gate.set()
    await asyncio.gather(first, *many)
    assert committed(tmp_path, "SELECT idx FROM journal ORDER BY idx") \
        == [(index,) for index in range(1, 12)]
    store.close()


async def test_the_thread_counts_a_hand_off_settled_only_once_its_last_batch_is(
        tmp_path: Path) -> None:
    """With ``max_batch``, one hand-off can take the writer thread two transactions: a step of
    many writes queued while the second is held still goes to the thread, behind it."""
    gate, second = asyncio.Event(), asyncio.Event()
    calls = [0]

    async def hold_the_second(stage: str) -> None:
        calls[0] += 1
        if calls[0] == 2:
            second.set()
            await gate.wait()

    store = SqliteStore(tmp_path, max_batch=2, inline_at=4)
    await must(store.created("g", {"kind": "war"}))
    store.failpoint = hold_the_second
    first = [must(store.appended("g", index, {"i": index})) for index in (1, 2, 3)]
    await asyncio.wait_for(second.wait(), 10)  # inputs 1 and 2 committed; 3 held
    await asyncio.gather(*first[:2])
    for _ in range(5):  # any word from the thread has reached the loop
        await asyncio.sleep(0)
    many = [must(store.appended("g", index, {"i": index})) for index in range(4, 14)]
    await asyncio.sleep(0)
    assert not any(write.done() for write in many)  # behind input 3, in the thread
    store.failpoint = None
    gate.set()
    await asyncio.gather(*first, *many)
    assert committed(tmp_path, "SELECT idx FROM journal ORDER BY idx") \
        == [(index,) for index in range(1, 14)]
    store.close()


async def test_close_commits_what_is_queued_and_dropped_games_are_gone(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    for n in range(3):
        store.created(f"g{n}", {"kind": "war"})
        store.appended(f"g{n}", 1, {"i": 1})
    store.snapshot("g0", 1, {"format": 1, "index": 1, "table": {}, "finished": True})
    store.dropped("g1")
    store.close()
    reopened = SqliteStore(tmp_path)
    stored = await reopened.load()
    loaded = {game_id: (snapshot, journal) for game_id, _, snapshot, journal in stored}
    assert sorted(loaded) == ["g0", "g2"]
    snapshot = loaded["g0"][0]
    assert snapshot is not None and snapshot["index"] == 1 and snapshot["checksum_ok"]
    assert committed(tmp_path, "SELECT finished FROM games ORDER BY game_id") == [(1,), (0,)]
    reopened.close()


def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    with pytest.raises(StoreInUse, match="another tapis-server is using"):
        SqliteStore(tmp_path)
    store.close()
    SqliteStore(tmp_path).close()  # free again once closed


# --- the schema version -----------------------------------------------------------------------


def versions(data_dir: Path) -> list[int]:
    return [row[0] for row in committed(data_dir, "SELECT version FROM tapis_schema "
                                                  "ORDER BY version")]


def test_a_new_file_is_at_this_servers_schema_version(tmp_path: Path) -> None:
    SqliteStore(tmp_path).close()
    SqliteStore(tmp_path).close()  # opening again applies nothing twice
    assert versions(tmp_path) == list(range(1, SCHEMA_VERSION + 1))


async def test_a_file_from_before_the_schema_version_is_adopted_with_its_games(
        tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / FILE_NAME)  # as servers before the version wrote it
    old.executescript(MIGRATIONS[0])
    old.execute("INSERT INTO games VALUES ('g', 1, '{\"kind\":\"war\"}', 0)")
    old.execute("INSERT INTO journal VALUES ('g', 1, '{\"i\":1}')")
    old.commit()
    assert schema_version(old) == 0
    old.close()
    store = SqliteStore(tmp_path)
    assert versions(tmp_path) == list(range(1, SCHEMA_VERSION + 1))
    reader = sqlite3.connect(tmp_path / FILE_NAME)
    assert schema_version(reader) == SCHEMA_VERSION
    reader.close()
    loaded = await store.load()
    assert [(game_id, journal) for game_id, _, _, journal in loaded] == [("g", [{"i": 1}])]
    await must(store.appended("g", 2, {"i": 2}))
    store.close()


def test_a_missing_migration_is_applied_once_in_order(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    SqliteStore(tmp_path).close()
    newer = (*MIGRATIONS, "ALTER TABLE games ADD COLUMN note TEXT")
    monkeypatch.setattr(sqlite_store, "MIGRATIONS", newer)
    monkeypatch.setattr(sqlite_store, "SCHEMA_VERSION", len(newer))
    SqliteStore(tmp_path).close()
    SqliteStore(tmp_path).close()  # a second ALTER would fail: it is not run again
    assert versions(tmp_path) == list(range(1, len(newer) + 1))
    assert "note" in [row[1] for row in committed(tmp_path, "PRAGMA table_info(games)")]


def test_a_failed_migration_changes_nothing(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    SqliteStore(tmp_path).close()
    broken = (*MIGRATIONS, "ALTER TABLE games ADD COLUMN note TEXT; NOT SQL")
    monkeypatch.setattr(sqlite_store, "MIGRATIONS", broken)
    monkeypatch.setattr(sqlite_store, "SCHEMA_VERSION", len(broken))
    with pytest.raises(StoreCorrupt):
        SqliteStore(tmp_path)
    assert versions(tmp_path) == list(range(1, len(MIGRATIONS) + 1))
    assert "note" not in [row[1] for row in committed(tmp_path, "PRAGMA table_info(games)")]


def test_a_newer_schema_is_refused_and_the_server_says_so_in_one_line(tmp_path: Path) -> None:
    SqliteStore(tmp_path).close()
    newer = sqlite3.connect(tmp_path / FILE_NAME)
    newer.execute("INSERT INTO tapis_schema (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    newer.commit()
    newer.close()
    with pytest.raises(SchemaTooNew, match=f"version {SCHEMA_VERSION + 1}, newer than"):
        SqliteStore(tmp_path)
    refused = subprocess.run(ServerProcess(tmp_path).command(), capture_output=True,
                             timeout=60, check=False)
    stderr = refused.stderr.decode()
    assert refused.returncode == 2, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("tapis-server:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "refusing to start" in lines[0] and "newer than this server's" in lines[0]
    assert versions(tmp_path)[-1] == SCHEMA_VERSION + 1  # the file is left as it was


# --- a failed commit --------------------------------------------------------------------------


def failing_commit(code: int) -> Callable[[str], None]:
    """A failpoint that makes the next COMMIT fail with SQLite's error ``code``."""
    armed = [True]

    async def failpoint(stage: str) -> None:
        if stage == "commit" and armed:
            armed.clear()
            error = sqlite3.OperationalError("injected")
            error.sqlite_errorcode = code  # type: ignore[attr-defined]
            raise error
    return failpoint


@pytest.mark.parametrize(("code", "outcome"), [
    (sqlite3.SQLITE_FULL, StoreUnavailable),  # nothing of it could be written
    (sqlite3.SQLITE_IOERR_FSYNC, CommitUnknown),  # it may be on the disk, or not
    (sqlite3.SQLITE_IOERR_WRITE, CommitUnknown)])
async def test_a_commit_that_fails_says_whether_it_may_have_been_applied(
        tmp_path: Path, code: int, outcome: type[Exception]) -> None:
    store = SqliteStore(tmp_path, failpoint=failing_commit(code))
    outcomes = await asyncio.gather(must(store.created("g", {"kind": "war"})),
                                    must(store.appended("g", 1, {"i": 1})),
                                    return_exceptions=True)
    assert [type(o) for o in outcomes] == [outcome, outcome], outcomes
    assert await store.load_game("g") is None  # read again: what the file holds decides
    await must(store.created("g", {"kind": "war"}))  # the writer goes on
    store.close()


async def test_a_resting_table_is_listed_and_not_loaded_until_it_is_woken(
        tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    for game_id in ("a", "b", "c"):
        await must(store.created(game_id, {"kind": "war"}))
    await must(store.appended("a", 1, {"i": 1}))
    await must(store.rested("a", {"status": "over"}))
    await must(store.rested("c", {"status": "over"}))
    raw = sqlite3.connect(tmp_path / FILE_NAME)
    raw.execute("UPDATE games SET listing = 'not json' WHERE game_id = 'c'")
    raw.commit()
    raw.close()
    assert [game_id for game_id, *_ in await store.load()] == ["b"]
    assert await store.resting() == [("a", {"status": "over"}), ("c", None)]
    assert await store.load_game("a") == ({"kind": "war"}, None, [{"i": 1}])
    await must(store.woken("a"))
    assert [game_id for game_id, *_ in await store.load()] == ["a", "b"]
    assert [game_id for game_id, _ in await store.resting()] == ["c"]
    store.close()
