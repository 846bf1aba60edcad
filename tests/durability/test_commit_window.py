"""Timers that come due while an input is applied but not yet committed (its SQLite COMMIT held
by a failpoint, the ManualClock moved past their time).

A turn timer armed for the previous state: the ``Timeout`` of the seat that just moved is
refused and the table is armed for the state applied (never left without a timer); the next
seat's deadline, passed meanwhile, plays its ``Timeout`` on top, journaled behind the input and
published only once both are committed, in order; a COMMIT that fails takes both back and the
table is rebuilt from what was committed before them. A bot's timer armed for the previous state
does not play on the state applied before that state is committed (published, seen by the
people at the table): its reaction time starts again from the commit, as it does on a store that
commits at once."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from tapis_engine import table as tbl
from tapis_engine.war import Reveal, WarOptions
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.stores.store import MemoryStore, Store
from tapis_service.tables.host import GameHost
from tapis_service.tables.session import Session
from tests.support.server import TEST_SETTINGS

WAIT_S = 20.0
TURN_MS = 1_000
REACTION_MS = 1_000


class Gate:
    """The SQLite writer's failpoint: holds each COMMIT while closed; fails it when
    ``failing`` (as SQLite fails on a full disk)."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.entered = asyncio.Event()
        self.failing = False

    async def __call__(self, where: str) -> None:
        self.entered.set()
        await asyncio.wait_for(self.open.wait(), WAIT_S)
        if self.failing:
            raise sqlite3.OperationalError("database or disk is full")

    def close(self) -> None:
        self.open.clear()
        self.entered.clear()

    async def held(self) -> None:
        await asyncio.wait_for(self.entered.wait(), WAIT_S)


def journal(data_dir: Path, game_id: str) -> list[str]:
    """The inputs journaled for ``game_id``, in order (their names)."""
    import json

    stored = sqlite3.connect(data_dir / FILE_NAME)
    try:
        rows = stored.execute("SELECT entry FROM journal WHERE game_id = ? ORDER BY idx",
                              (game_id,)).fetchall()
    finally:
        stored.close()
    return [json.loads(row[0]).get("input", {}).get("input", "?") for row in rows]


async def settled(session: Session) -> None:
    async with asyncio.timeout(WAIT_S):
        while session.writes or session.durable_sequence < session.last_sequence:
            await asyncio.sleep(0.001)


async def two_people(tmp_path: Path, gate: Gate, **settings: object
                     ) -> tuple[GameHost, ManualClock, Session]:
    clock = ManualClock()
    host = GameHost(replace(TEST_SETTINGS, **settings), clock,  # type: ignore[arg-type]
                    SqliteStore(tmp_path, synchronous="OFF", failpoint=gate))
    session = await host.create("war", 2, 5, TURN_MS, [None, None], WarOptions(), None, None)
    for seat in (0, 1):
        await host.join(session.game_id, seat, f"p{seat}")
    return host, clock, session


def to_move(session: Session) -> int:
    (seat,) = session.rules.to_act(session.table.state)
    return int(seat)


async def test_turn_timers_due_while_an_input_commits_fire_in_order_and_keep_the_table_armed(
        tmp_path: Path) -> None:
    gate = Gate()
    host, clock, session = await two_people(tmp_path, gate)
    mover = to_move(session)
    other = 1 - mover
    assert session.table.deadline_of(mover) == clock.now_ms() + TURN_MS
    published = session.published_sequence
    journaled = journal(tmp_path, session.game_id)

    gate.close()
    clock.advance(TURN_MS - 10)  # the mover acts 10 ms before its deadline
    move = asyncio.ensure_future(
        host.actor.submit(session, mover, tbl.Act(mover, Reveal()), "r1", None))
    await gate.held()  # applied; its COMMIT held
    applied_at = clock.now_ms()
    version = session.table.version
    clock.advance(20)  # the mover's former deadline passes: its Timeout is refused
    assert session.table.version == version, "no Timeout for the seat that just moved"
    assert (other, applied_at + TURN_MS) in session.deadline_timers, "armed for the new state"
    clock.advance(TURN_MS)  # the other seat's deadline passes too, still uncommitted
    assert session.table.version == version + 1, "its Timeout is played on top"
    assert session.table.seats[other].taken_over
    assert session.published_sequence == published, "nothing published before the commit"

    gate.open.set()
    await move
    await settled(session)
    assert journal(tmp_path, session.game_id)[len(journaled):][:2] == ["Act", "Timeout"]
    assert session.published_sequence == session.last_sequence
    await host.close()


async def test_a_failed_commit_under_a_server_move_takes_both_back(tmp_path: Path) -> None:
    gate = Gate()
    host, clock, session = await two_people(tmp_path, gate, store_retry_ms=1)
    mover = to_move(session)
    published = session.published_sequence
    journaled = journal(tmp_path, session.game_id)
    gate.close()
    clock.advance(TURN_MS - 10)
    move = asyncio.ensure_future(
        host.actor.submit(session, mover, tbl.Act(mover, Reveal()), "r1", None))
    await gate.held()
    clock.advance(TURN_MS + 20)  # the other seat's Timeout is applied on top
    assert session.table.seats[1 - mover].taken_over
    gate.failing = True
    gate.open.set()
    with pytest.raises(ServiceError) as refused:
        await move
    assert refused.value.reason == "STORE_UNAVAILABLE"
    assert session.published_sequence == published, "neither was published"
    gate.failing = False
    async with asyncio.timeout(WAIT_S):
        while host.tables.session(session.game_id) is None:
            await asyncio.sleep(0.001)
    assert journal(tmp_path, session.game_id) == journaled, "neither was kept, no hole"
    rebuilt = host.tables.session(session.game_id)
    assert rebuilt is not None and rebuilt is not session
    assert to_move(rebuilt) == mover and not rebuilt.table.seats[1 - mover].taken_over
    assert rebuilt.deadline_timers, "the rebuilt table is armed"
    await host.close()


async def person_and_bot(store: Store, clock: ManualClock) -> tuple[GameHost, Session]:
    """A War table of a person (seat 0) and a bot whose reaction time is exactly 1 s, the
    bot to reveal (its timer armed from the person's committed reveal)."""
    host = GameHost(replace(TEST_SETTINGS, bot_delay_ms=REACTION_MS, bot_delay_spread=0.0),
                    clock, store)
    session = await host.create("war", 2, 5, 0, [None, "basic"], WarOptions(), None, None)
    await host.join(session.game_id, 0, "p0")
    while to_move(session) != 1:  # the bot's turn
        await host.actor.submit(session, 0, tbl.Act(0, Reveal()), "", None)
        clock.advance(REACTION_MS)
        await settled(session)
    assert 1 in session.bot_timers
    return host, session


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_bot_reacts_to_an_input_from_its_commit_never_before(
        tmp_path: Path, kind: str) -> None:
    """The backend replaces the person's seat 400 ms into the bot's reaction time: the bot
    reveals a whole reaction time after the replacement is committed (seen at the table),
    not on the replacement's uncommitted state at the time armed before it."""
    clock = ManualClock()
    gate = Gate()
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(
        tmp_path, synchronous="OFF", failpoint=gate)
    host, session = await person_and_bot(store, clock)
    version = session.table.version
    clock.advance(400)
    gate.close()
    replaced = asyncio.ensure_future(host.actor.replace(session, 0, "p2", "Bo", ""))
    if kind == "sqlite":
        await gate.held()
        clock.advance(REACTION_MS)  # past the bot's first time, the replacement uncommitted
        assert session.table.version == version + 1, \
            "no bot move on a state not yet committed"
    committed_at = clock.now_ms()
    gate.open.set()
    await replaced
    await settled(session)
    clock.advance(REACTION_MS - 1)
    assert session.table.version == version + 1, "the bot waits its reaction from the commit"
    clock.advance(1)
    assert clock.now_ms() == committed_at + REACTION_MS
    assert session.table.version == version + 2, "then it reveals"
    await settled(session)
    await host.close()
