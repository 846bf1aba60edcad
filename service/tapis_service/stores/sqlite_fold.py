"""The SQLite journal in two parts (schemas 3 and 4), and the fold that moves one into the other.

New inputs go into ``journal_inbox``, a table in arrival order (its rowid) with no index: a
commit of one input for each of 50 tables writes the inbox's last pages, not a leaf of the
by-table tree per table (docs/performance.md, "The journal by arrival" and "The inbox without
a key"). The writer moves the inbox into ``journal_folded``, the by-table tree, in bulk
(``fold``): once it holds ``FOLD_AT`` rows, or ``FOLD_PER_TABLE`` rows per table it holds rows
of if that is more, when the store opens and when it closes. Every
reader reads the view ``journal``, both parts as one: an input is in exactly one of them (the
writer never puts one in the inbox that either part holds, and a fold moves the inbox whole,
in one transaction), so the view has the rows and the unique key the table ``journal`` had.
"""

from __future__ import annotations

import contextlib
import sqlite3

FOLD_AT = 512
"""Rows in the inbox at which the writer folds it into the tree (measured: docs/performance.md,
"The journal by arrival")."""
FOLD_PER_TABLE = 16
"""With many tables in play, the writer waits for this many rows per table in the inbox
(when that is more than ``FOLD_AT``): a fold writes a leaf of the tree for each table it
moves rows of, so it then writes each leaf once for several inputs, not once for each (at
500 tables: 1.05 pages per input written at ``FOLD_AT`` alone, 0.39 at 8 per table, 0.32 at
16; docs/performance.md, "Where a durable action's CPU goes, and the fold by tables in play"
and "The fold's statement journal, and its size by tables in play")."""

SCHEMA = """
    ALTER TABLE journal RENAME TO journal_folded;
    CREATE TABLE journal_inbox (
        game_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        entry TEXT NOT NULL,
        UNIQUE (game_id, idx)
    );
    CREATE VIEW journal (game_id, idx, entry) AS
        SELECT game_id, idx, entry FROM journal_folded
        UNION ALL SELECT game_id, idx, entry FROM journal_inbox;
    CREATE TRIGGER journal_insert INSTEAD OF INSERT ON journal BEGIN
        SELECT RAISE(ABORT, 'UNIQUE constraint failed: journal.game_id, journal.idx')
            WHERE EXISTS (SELECT 1 FROM journal_folded
                          WHERE game_id = NEW.game_id AND idx = NEW.idx);
        INSERT INTO journal_inbox (game_id, idx, entry) VALUES (NEW.game_id, NEW.idx, NEW.entry);
    END;
    CREATE TRIGGER journal_update INSTEAD OF UPDATE ON journal BEGIN
        UPDATE journal_folded SET game_id = NEW.game_id, idx = NEW.idx, entry = NEW.entry
            WHERE game_id = OLD.game_id AND idx = OLD.idx;
        UPDATE journal_inbox SET game_id = NEW.game_id, idx = NEW.idx, entry = NEW.entry
            WHERE game_id = OLD.game_id AND idx = OLD.idx;
    END;
    CREATE TRIGGER journal_delete INSTEAD OF DELETE ON journal BEGIN
        DELETE FROM journal_folded WHERE game_id = OLD.game_id AND idx = OLD.idx;
        DELETE FROM journal_inbox WHERE game_id = OLD.game_id AND idx = OLD.idx;
    END;
"""
"""Migration 3: the table ``journal`` becomes ``journal_folded`` (its rows stay where they are),
the inbox is added, and ``journal`` is the view of both. The view's triggers let a hand-written
``INSERT``, ``UPDATE`` or ``DELETE`` on ``journal`` (an operator's, a test's) act on the part
that holds the row; the server itself writes each part by name."""

UNKEYED_INBOX = """
    INSERT INTO journal_folded SELECT game_id, idx, entry FROM journal_inbox
        ORDER BY game_id, idx;
    DROP TABLE journal_inbox;
    CREATE TABLE journal_inbox (
        game_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        entry TEXT NOT NULL
    );
    DROP TRIGGER journal_insert;
    CREATE TRIGGER journal_insert INSTEAD OF INSERT ON journal BEGIN
        SELECT RAISE(ABORT, 'UNIQUE constraint failed: journal.game_id, journal.idx')
            WHERE EXISTS (SELECT 1 FROM journal
                          WHERE game_id = NEW.game_id AND idx = NEW.idx);
        INSERT INTO journal_inbox (game_id, idx, entry) VALUES (NEW.game_id, NEW.idx, NEW.entry);
    END;
"""
"""Migration 4: the inbox without a key of its own (its rows folded into the tree first). Its
unique index cost a leaf of the index per table in each commit, at random places: 2 µs of CPU
per input at 50 tables, 6-9 at 500, SQLite alone (docs/performance.md, "The inbox without a
key"). The writer keeps the inbox free of repeats instead: it is the file's only writer, it
put every row the inbox holds since the last fold, and it knows which tables those rows are
of (``GroupCommitWriter``). A hand-written ``INSERT`` on the view is still refused when
either part holds its key (the trigger reads the inbox)."""

INSERT_INPUT = "INSERT INTO journal_inbox VALUES (?, ?, ?)"
"""An input the writer vouches for: its predecessor is the table's last input it saw
committed, so no part holds it."""
INSERT_UNLESS_FOLDED = ("INSERT INTO journal_inbox SELECT ?1, ?2, ?3 WHERE NOT EXISTS "
                        "(SELECT 1 FROM journal_folded WHERE game_id = ?1 AND idx = ?2)")
"""An input the writer cannot vouch for, of a table with no input in the inbox: none if the tree
holds it."""
INSERT_UNLESS_STORED = ("INSERT INTO journal_inbox SELECT ?1, ?2, ?3 WHERE NOT EXISTS "
                        "(SELECT 1 FROM journal WHERE game_id = ?1 AND idx = ?2)")
"""...of a table that may have inputs in the inbox: none if either part holds it (the inbox
read whole: rare, a table whose commit was in doubt, or a repeat)."""
DROP_PARTS = ("journal_folded", "journal_inbox")
"""The tables a dropped game's journal is deleted from."""


def fold(connection: sqlite3.Connection) -> int:
    """Move every row of the inbox into the tree, in one transaction of its own (``BEGIN
    IMMEDIATE``: ``connection`` is the file's writer); the rows moved. On an error nothing is
    moved (rolled back) and it is raised."""
    try:
        connection.execute("BEGIN IMMEDIATE")
        moved = connection.execute(
            "INSERT INTO journal_folded SELECT game_id, idx, entry FROM journal_inbox "
            "ORDER BY game_id, idx").rowcount
        connection.execute("DELETE FROM journal_inbox")
        connection.execute("COMMIT")
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            if connection.in_transaction:
                connection.execute("ROLLBACK")
        raise
    return moved
