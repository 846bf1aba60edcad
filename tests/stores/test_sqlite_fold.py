"""The SQLite journal in two parts (schemas 3 and 4): inputs by arrival in ``journal_inbox``, folded
into the by-table tree ``journal_folded`` in bulk; ``journal`` the view of both. Across folds
the writer ends every write as the one-table journal ended it, a retry after a commit in doubt
is refused wherever the first copy went, every reader (``load_game``, ``load``,
``tapis-admin``) reads both parts, and a version-2 file is migrated with its rows."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
from pathlib import Path

import pytest

from tapis_service.process import admin
from tapis_service.stores.joinkey import KEY_BYTES, KEY_NAME
from tapis_service.stores.sqlite_store import FILE_NAME, MIGRATIONS, SCHEMA_VERSION, SqliteStore
from tapis_service.stores.store import CommitUnknown, JournalConflict
from tests.support.sqlite_writes import (
    append_a_seeded_batch,
    failing_commit,
    holding,
    plain_journal,
    rows,
)

PARTS = ("journal_folded", "journal_inbox")


def parts(data_dir: Path) -> dict[str, list[tuple[str, int]]]:
    """(game, index) of each part of the journal."""
    return {part: [tuple(row) for row in rows(data_dir, f"SELECT game_id, idx FROM {part} "
                                                        "ORDER BY 1, 2")]
            for part in PARTS}


@pytest.mark.parametrize("seed", range(8))
async def test_appends_across_folds_end_as_the_plain_way_ends_them(tmp_path: Path,
                                                                   seed: int) -> None:
    """The seeded batches of ``test_sqlite_writer`` (holes, repeats, an unknown table), with
    a fold every few inputs: the same outcome for every append, the same journal after, never
    an input in both parts; after a close, all of it in the tree."""
    draw = random.Random(seed)
    games = ["g0", "g1", "g2"]
    plain = plain_journal()
    held = asyncio.Event()
    store = SqliteStore(tmp_path, failpoint=holding(held), fold_at=draw.randint(2, 4),
                        fold_per_table=0)
    held.set()
    opened = store.folds  # the fold at open
    for game in games[:2]:  # g2 is never created
        await store.created(game, {"kind": "war"})
        plain.execute("INSERT INTO games VALUES (?)", (game,))
    sent = dict.fromkeys(games, 0)
    split = False  # seen with inputs in both parts at once
    for _ in range(16):
        await append_a_seeded_batch(store, plain, held, draw, sent, {1: 16, 2: 1, 0: 1, -1: 1})
        await store.probe()  # behind the fold that batch may have started
        now = parts(tmp_path)
        assert not set(now["journal_folded"]) & set(now["journal_inbox"])
        split = split or all(now.values())
    expected = plain.execute("SELECT game_id, idx, entry FROM journal ORDER BY 1, 2").fetchall()
    assert rows(tmp_path, "SELECT game_id, idx, entry FROM journal ORDER BY 1, 2") == expected
    assert store.folds - opened >= 2 and split
    store.close()
    assert rows(tmp_path, "SELECT game_id, idx, entry FROM journal_folded ORDER BY 1, 2") \
        == expected
    assert rows(tmp_path, "SELECT COUNT(*) FROM journal_inbox") == [(0,)]


async def test_a_table_split_across_both_parts_is_read_whole(tmp_path: Path) -> None:
    """``load_game`` (a rested table woken) and ``load`` (recovery) read the tree and the
    inbox as one journal, in order."""
    store = SqliteStore(tmp_path, fold_at=3, fold_per_table=0)
    await store.created("g", {"kind": "war"})
    for index in range(1, 6):  # 1-3 folded once the inbox holds 3; 4 and 5 in the inbox
        await store.appended("g", index, {"i": index})
    assert parts(tmp_path) == {"journal_folded": [("g", 1), ("g", 2), ("g", 3)],
                               "journal_inbox": [("g", 4), ("g", 5)]}
    journal = [{"i": index} for index in range(1, 6)]
    assert await store.load_game("g") == ({"kind": "war"}, None, journal)
    assert await store.load() == [("g", {"kind": "war"}, None, journal)]
    await store.snapshot("g", 5, {"format": 1})  # an input of the inbox is committed too
    store.close()
    assert parts(tmp_path)["journal_inbox"] == []


def version_2_file(data_dir: Path) -> None:
    """A file as servers of schema version 2 wrote it, with a table and its inputs."""
    data_dir.mkdir()
    old = sqlite3.connect(data_dir / FILE_NAME)
    old.executescript("CREATE TABLE tapis_schema (version INTEGER PRIMARY KEY, "
                      "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);"
                      + MIGRATIONS[0] + MIGRATIONS[1]
                      + "INSERT INTO tapis_schema (version) VALUES (1), (2);")
    old.execute("INSERT INTO games VALUES ('g', 1, '{\"kind\":\"war\"}', 0, NULL)")
    old.executemany("INSERT INTO journal VALUES ('g', ?, ?)",
                    [(index, f'{{"i":{index}}}') for index in (1, 2, 3)])
    old.commit()
    old.close()


async def test_a_version_2_file_is_migrated_with_its_inputs(tmp_path: Path) -> None:
    version_2_file(tmp_path / "data")
    store = SqliteStore(tmp_path / "data")
    assert rows(tmp_path / "data", "SELECT version FROM tapis_schema") \
        == [(version,) for version in range(1, SCHEMA_VERSION + 1)]
    assert parts(tmp_path / "data")["journal_folded"] == [("g", 1), ("g", 2), ("g", 3)]
    assert await store.load_game("g") == ({"kind": "war"}, None,
                                          [{"i": 1}, {"i": 2}, {"i": 3}])
    with pytest.raises(JournalConflict):  # the tree's rows refuse a second copy
        await store.appended("g", 3, {"i": "again"})
    await store.appended("g", 4, {"i": 4})
    assert parts(tmp_path / "data")["journal_inbox"] == [("g", 4)]
    store.close()


async def test_a_version_3_file_is_migrated_with_its_inbox_folded_and_unkeyed(
        tmp_path: Path) -> None:
    """Schema 4 takes the inbox's unique index away: the inputs a version 3 server left in its
    inbox (killed before its fold) are moved into the tree first, and the new inbox has no
    index; a hand-written repeat on the view is still refused."""
    data = tmp_path / "data"
    version_2_file(data)
    old = sqlite3.connect(data / FILE_NAME)
    old.executescript(MIGRATIONS[2] + "INSERT INTO tapis_schema (version) VALUES (3);")
    old.executemany("INSERT INTO journal_inbox VALUES ('g', ?, ?)",
                    [(index, f'{{"i":{index}}}') for index in (4, 5)])
    old.commit()
    old.close()
    store = SqliteStore(data)
    assert rows(data, "SELECT version FROM tapis_schema") == [
        (version,) for version in range(1, SCHEMA_VERSION + 1)]
    assert parts(data) == {"journal_folded": [("g", index) for index in range(1, 6)],
                           "journal_inbox": []}
    assert rows(data, "SELECT name FROM sqlite_master WHERE tbl_name = 'journal_inbox' "
                      "AND type = 'index'") == []
    assert await store.load_game("g") == ({"kind": "war"}, None,
                                          [{"i": index} for index in range(1, 6)])
    await store.appended("g", 6, {"i": 6})
    store.close()
    raw = sqlite3.connect(data / FILE_NAME, isolation_level=None)
    raw.execute("INSERT INTO journal VALUES ('g', 7, '{}')")  # into the inbox
    for index in (5, 7):  # one in the tree, one in the inbox
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed"):
            raw.execute("INSERT INTO journal VALUES ('g', ?, '{}')", (index,))
    raw.close()
    assert parts(data)["journal_inbox"] == [("g", 7)]


@pytest.mark.parametrize(("reached", "folded"), [(True, False), (True, True), (False, False)])
async def test_a_retry_after_a_commit_in_doubt_is_applied_once(
        tmp_path: Path, reached: bool, folded: bool) -> None:
    """A COMMIT that failed with an I/O error: whether its input reached the disk (then in
    the inbox, or already folded into the tree) or not, the same input sent again is in the
    journal once: refused (``JournalConflict``) if the first copy is there, else accepted,
    and refused when sent a third time. The fold after it never meets a duplicate."""
    armed, box = [False], list[SqliteStore]()
    commit_anyway = (lambda: box[0]._connection.execute("COMMIT")) if reached else None
    store = SqliteStore(tmp_path, failpoint=failing_commit(sqlite3.SQLITE_IOERR_FSYNC, armed,
                                                           commit_anyway),
                        fold_at=2 if folded else 0, fold_per_table=0)
    box.append(store)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})  # the writer saw 1 committed: it vouches for 2
    armed[0] = True
    with pytest.raises(CommitUnknown):
        await store.appended("g", 2, {"i": 2})
    await store.probe()  # behind the fold that may follow it
    where = parts(tmp_path)
    if reached:
        assert ("g", 2) in where["journal_folded" if folded else "journal_inbox"]
        with pytest.raises(JournalConflict):
            await store.appended("g", 2, {"i": "again"})
    else:
        assert ("g", 2) not in where["journal_folded"] + where["journal_inbox"]
        await store.appended("g", 2, {"i": "again"})
        with pytest.raises(JournalConflict):
            await store.appended("g", 2, {"i": "third"})
    await store.appended("g", 3, {"i": 3})
    store.close()
    assert rows(tmp_path, "SELECT idx, entry FROM journal_folded ORDER BY idx") == [
        (1, '{"i":1}'), (2, '{"i":2}' if reached else '{"i":"again"}'), (3, '{"i":3}')]
    assert rows(tmp_path, "SELECT COUNT(*) FROM journal_inbox") == [(0,)]


async def test_admin_reads_both_parts_and_folds_nothing(tmp_path: Path) -> None:
    """``tapis-admin check`` and ``backup`` of a running server's directory whose inbox holds
    inputs: counted with the tree's, copied with them (the restored copy loads them), and the
    inbox left as it is; an input in both parts, or twice in the inbox, is a problem."""
    data = tmp_path / "data"
    store = SqliteStore(data, fold_at=4, fold_per_table=0)
    (data / KEY_NAME).write_bytes(os.urandom(KEY_BYTES))
    await store.created("g", {"kind": "war"})
    for index in range(1, 7):  # 1-4 folded, 5 and 6 in the inbox
        await store.appended("g", index, {"i": index})
    split = parts(data)
    assert len(split["journal_folded"]) == 4 and len(split["journal_inbox"]) == 2
    report = admin.check(data)
    assert report["problems"] == [] and report["counts"]["inputs"] == 6
    manifest = admin.backup(data, tmp_path / "backup")
    assert manifest["counts"]["inputs"] == 6
    assert parts(data) == split  # read, not folded
    store.close()
    admin.restore(tmp_path / "backup", tmp_path / "restored")
    restored = SqliteStore(tmp_path / "restored")
    assert await restored.load_game("g") == ({"kind": "war"}, None,
                                             [{"i": index} for index in range(1, 7)])
    restored.close()
    twice = sqlite3.connect(data / FILE_NAME)  # damage: a folded input in the inbox again
    twice.execute("INSERT INTO journal_inbox SELECT * FROM journal_folded WHERE idx = 2")
    twice.commit()
    twice.close()
    assert admin.check(data)["problems"] == [
        "1 journal inputs are both in the inbox and in the tree"]
    twice = sqlite3.connect(data / FILE_NAME)  # damage: an input in the inbox twice
    twice.execute("INSERT INTO journal_inbox VALUES ('g', 7, '{}'), ('g', 7, '{}')")
    twice.commit()
    twice.close()
    assert admin.check(data)["problems"] == [
        "1 journal inputs are both in the inbox and in the tree",
        "1 journal inputs are in the inbox more than once"]


async def test_a_fold_that_fails_moves_nothing_and_the_writer_goes_on(tmp_path: Path) -> None:
    """A fold refused (here by an input in both parts, which only damage makes) is rolled
    back whole: every input stays where it was, the writes go on, and the fold is tried again
    ``fold_at`` inputs later (not at each batch), when it moves everything."""
    store = SqliteStore(tmp_path, fold_at=2, fold_per_table=0)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    await store.appended("g", 2, {"i": 2})
    await store.probe()  # behind the fold of 1 and 2
    raw = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    raw.execute("INSERT INTO journal_inbox VALUES ('g', 1, '{\"i\":1}')")  # damage
    folds = store.folds
    await store.appended("g", 3, {"i": 3})
    await store.appended("g", 4, {"i": 4})  # the inbox holds 2 of the writer's: a fold, refused
    await store.probe()
    assert store.folds == folds
    assert parts(tmp_path) == {"journal_folded": [("g", 1), ("g", 2)],
                               "journal_inbox": [("g", 1), ("g", 3), ("g", 4)]}
    raw.execute("DELETE FROM journal_inbox WHERE idx = 1")  # repaired
    raw.close()
    await store.appended("g", 5, {"i": 5})  # 3 in the inbox: the next fold is due at 4
    await store.probe()
    assert store.folds == folds and len(parts(tmp_path)["journal_inbox"]) == 3
    await store.appended("g", 6, {"i": 6})
    await store.probe()
    assert store.folds == folds + 1
    assert parts(tmp_path) == {"journal_folded": [("g", index) for index in range(1, 7)],
                               "journal_inbox": []}
    store.close()


async def test_a_repeat_written_into_the_inbox_by_hand_is_damage_found_at_reading(
        tmp_path: Path) -> None:
    """The inbox has no key of its own (schema 4): a repeat written into it behind the
    writer's back is not refused there. It is found all the same: `tapis-admin check` says
    so, every fold meets the tree's key and moves nothing, and the table reads back damaged
    (quarantined by the server), never as a journal with the input twice."""
    store = SqliteStore(tmp_path)
    await store.created("g", {"kind": "war"})
    for index in (1, 2):
        await store.appended("g", index, {"i": index})
    raw = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    raw.execute("INSERT INTO journal_inbox VALUES ('g', 2, '{\"i\":2}')")  # behind its back
    raw.close()
    record, _snapshot, journal = await store.load_game("g") or ({}, None, [])
    assert "journal input 2 is there twice" in record["damaged"] and journal == []
    store.close()  # its fold refused: the inbox kept as it is
    assert parts(tmp_path)["journal_inbox"] == [("g", 1), ("g", 2), ("g", 2)]
    checked = admin.check(tmp_path)
    assert "1 journal inputs are in the inbox more than once" in checked["problems"]
    again = SqliteStore(tmp_path)
    assert (await again.load())[0][1]["damaged"].startswith("journal input 2 is there twice")
    again.close()


def test_hand_written_sql_on_the_view_acts_on_the_part_holding_the_row(tmp_path: Path) -> None:
    """``journal`` (the view) takes an operator's ``INSERT``, ``UPDATE`` and ``DELETE`` as the
    one table took them: an existing key refused, each change made in the part that holds the
    row (counted in ``total_changes``; SQLite counts no row of a view in ``rowcount``)."""
    version_2_file(tmp_path / "data")
    SqliteStore(tmp_path / "data").close()  # migrated: 1-3 in the tree
    raw = sqlite3.connect(tmp_path / "data" / FILE_NAME, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed"):
        raw.execute("INSERT INTO journal VALUES ('g', 2, '{}')")
    raw.execute("INSERT INTO journal VALUES ('g', 4, '{\"i\":4}')")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed"):
        raw.execute("INSERT INTO journal VALUES ('g', 4, '{}')")
    before = raw.total_changes
    raw.execute("UPDATE journal SET entry = '{\"i\":\"two\"}' WHERE idx = 2")
    raw.execute("UPDATE journal SET entry = '{\"i\":\"four\"}' WHERE idx = 4")
    raw.execute("DELETE FROM journal WHERE idx = 3")
    assert raw.total_changes - before == 3
    raw.close()
    assert parts(tmp_path / "data") == {"journal_folded": [("g", 1), ("g", 2)],
                                        "journal_inbox": [("g", 4)]}
    assert rows(tmp_path / "data", "SELECT idx, entry FROM journal ORDER BY idx") == [
        (1, '{"i":1}'), (2, '{"i":"two"}'), (4, '{"i":"four"}')]


async def test_with_many_tables_in_play_the_fold_waits_for_a_few_inputs_of_each(
        tmp_path: Path) -> None:
    """The inbox is folded at ``fold_at`` inputs, or at ``fold_per_table`` per table it holds
    inputs of when that is more: one table's inputs fold at ``fold_at`` (4); five tables', at
    3 each (15)."""
    store = SqliteStore(tmp_path, fold_at=4, fold_per_table=3)
    games = [f"g{number}" for number in range(5)]
    for game in games:
        await store.created(game, {"kind": "war"})
    opened, sent = store.folds, dict.fromkeys(games, 0)
    inbox: list[int] = []  # the inputs in the inbox after each one, while it is not folded

    async def one_more(game: str) -> None:
        sent[game] += 1
        await store.appended(game, sent[game], {"i": sent[game]})
        await store.probe()  # behind the fold it may have started
        inbox.append(len(parts(tmp_path)["journal_inbox"]))

    for _ in range(4):
        await one_more("g0")
    assert inbox == [1, 2, 3, 0] and store.folds - opened == 1
    inbox.clear()
    for game in games[1:] + games + games:  # 14 inputs of five tables: none folded
        await one_more(game)
    assert inbox == list(range(1, 15)) and store.folds - opened == 1
    await one_more("g4")  # the 15th: folded
    assert inbox[-1] == 0 and store.folds - opened == 2
    store.close()


async def test_a_folds_statement_journal_stays_in_memory(tmp_path: Path) -> None:
    """A fold moves the whole inbox in one statement, whose statement journal SQLite spilled
    into a file of its temporary directory past 64 KiB: every connection of the store keeps
    SQLite's temporary data in memory (``temp_store`` 2), and a fold of more than that goes
    through."""
    store = SqliteStore(tmp_path, fold_at=400, fold_per_table=0)
    reader = store._reader()
    assert [connection.execute("PRAGMA temp_store").fetchone()[0]
            for connection in (store._connection, reader)] == [2, 2]
    reader.close()
    await store.created("g", {"kind": "war"})
    for index in range(1, 401):  # ~80 KiB of entries, folded at the 400th
        await store.appended("g", index, {"pad": "x" * 200, "i": index})
    await store.probe()
    assert store.folds == 2 and parts(tmp_path)["journal_inbox"] == []  # at open, and this one
    assert len(parts(tmp_path)["journal_folded"]) == 400
    store.close()
