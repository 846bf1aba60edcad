"""Turn timers stand still while nobody can play (docs/rulings.md): a table served again after a
restart, a store outage or a takeover gives each person it awaits a whole turn from then."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_engine import table as tbl
from tapis_engine.war import RULES as WAR
from tapis_engine.war import Reveal
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.checksums import canonical_json, checksum
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import StoreUnavailable
from tapis_service.tables.host import GameHost
from tests.support.calls import new_war, view_of
from tests.support.driver import all_events
from tests.support.server import TEST_SETTINGS, Harness, Restartable, ServerFactory
from tests.support.tables import live_of

TURN = 30_000
MINUTE = 60_000


def _on(stub: object) -> Harness:
    """What the calls' helpers read of a harness: its stub."""
    return cast(Harness, SimpleNamespace(stub=stub))


async def _restarted(servers: Restartable, clock: ManualClock, down_ms: int
                     ) -> tuple[pb_grpc.GameServiceStub, Harness]:
    """The server stopped, down ``down_ms`` by ``clock``, and started again."""
    await servers.stop()
    clock.advance(down_ms)
    stub = await servers.start(clock)
    return stub, _on(stub)


def _deadlines(view: pb.GameView) -> dict[int, int]:
    return {d.seat: d.expire_time.ToMilliseconds() for d in view.deadlines}


async def test_a_restart_longer_than_a_turn_gives_the_person_awaited_a_whole_turn(
        tmp_path: Path) -> None:
    """Down ten minutes with a 30 s turn: without the resume the bot took the seat at once."""
    servers = Restartable(tmp_path)
    clock = ManualClock(1_000_000)
    try:
        stub = await servers.start(clock)
        h = _on(stub)
        game_id, tokens = await new_war(h, target=50, turn_ms=TURN)
        before = await view_of(h, game_id)
        first = before.awaiting_seats[0]
        assert _deadlines(before) == {first: 1_000_000 + TURN}
        stub, h = await _restarted(servers, clock, 10 * MINUTE)
        back = clock.now_ms()
        clock.advance(0)  # whatever timer the restart armed fires now
        view = await view_of(h, game_id, tokens[first])
        assert not view.seats[first].bot_controlled
        assert view.version == before.version  # no move was made
        assert _deadlines(view) == {first: back + TURN}
        resumed = (await all_events(stub, game_id, before.last_sequence, view.last_sequence))
        assert [e.WhichOneof("body") for e in resumed] == ["turn_timers_resumed"]
        assert {d.seat: d.expire_time.ToMilliseconds()
                for d in resumed[0].turn_timers_resumed.deadlines} == {first: back + TURN}
        # a restart at once changes nothing: the journal replays the same deadline
        stub, h = await _restarted(servers, clock, 0)
        again = await view_of(h, game_id)
        assert (again.last_sequence, _deadlines(again)) == (view.last_sequence,
                                                            {first: back + TURN})
        clock.advance(TURN - 1)
        assert not (await view_of(h, game_id)).seats[first].bot_controlled
        clock.advance(1)  # the whole turn has run: the timer fires, from the resume
        assert (await view_of(h, game_id)).seats[first].bot_controlled
    finally:
        await servers.stop()


async def test_a_server_restarting_faster_than_a_turn_times_the_person_out_at_last(
        tmp_path: Path) -> None:
    """A crash loop of 20 s with a 30 s turn: each restart used to give the person who left a
    whole turn again, so the table waited for ever. The clocks stop for ``MAX_RESUMES``
    interruptions of a turn; the next restart keeps the deadline, and it fires."""
    servers = Restartable(tmp_path)
    clock = ManualClock(1_000_000)
    try:
        stub = await servers.start(clock)
        h = _on(stub)
        game_id, _ = await new_war(h, target=50, turn_ms=TURN)
        first = (await view_of(h, game_id)).awaiting_seats[0]
        deadlines = []
        for _ in range(tbl.MAX_RESUMES + 2):
            stub, h = await _restarted(servers, clock, 20_000)
            clock.advance(0)  # whatever timer the restart armed fires now
            view = await view_of(h, game_id)
            if view.seats[first].bot_controlled:
                break
            deadlines.append(_deadlines(view)[first])
        resumed_at = 1_000_000 + 20_000 * tbl.MAX_RESUMES
        assert deadlines[-1] == resumed_at + TURN  # the last whole turn, from the last resume
        assert len(deadlines) == tbl.MAX_RESUMES + 1  # a restart that kept it, then...
        assert view.seats[first].bot_controlled  # ...one after it had run: timed out at once
        assert clock.now_ms() >= resumed_at + TURN
    finally:
        await servers.stop()


async def test_a_snapshot_written_before_the_interruptions_count_still_loads(
        tmp_path: Path) -> None:
    """A snapshot taken just after a ``Resume`` by a server before the count: the replayed table
    counts one interruption, the snapshot none. It loads (not quarantined), with the count."""
    servers = Restartable(tmp_path)
    clock = ManualClock(1_000_000)
    try:
        h = _on(await servers.start(clock))
        game_id, _ = await new_war(h, target=50, turn_ms=TURN)
        first = (await view_of(h, game_id)).awaiting_seats[0]
        await servers.stop()
        with sqlite3.connect(tmp_path / "tapis.sqlite3") as db:
            inputs = db.execute("SELECT count(*) FROM journal WHERE game_id = ?",
                                (game_id,)).fetchone()[0]
        clock.advance(TURN)  # the resume is input inputs + 1: snapshotted with it
        await servers.start(clock, snapshot_every=inputs + 1)
        await servers.stop()
        with sqlite3.connect(tmp_path / "tapis.sqlite3") as db:
            index, text = db.execute("SELECT idx, data FROM snapshots WHERE game_id = ?",
                                     (game_id,)).fetchone()
            data = json.loads(text)
            assert index == inputs + 1 and data["table"].pop("resumes") == 1
            text = canonical_json(data)  # as the server before the count wrote it
            db.execute("UPDATE snapshots SET data = ?, checksum = ? WHERE game_id = ?",
                       (text, checksum(text), game_id))
        h = _on(await servers.start(clock))
        view = await view_of(h, game_id)  # loaded, not quarantined
        assert _deadlines(view) == {first: 1_000_000 + 2 * TURN}
        assert servers.running is not None
        assert live_of(servers.running.host)[game_id].table.resumes == 1
    finally:
        await servers.stop()


async def test_a_table_rebuilt_after_an_outage_resumes_its_timers_on_the_open_streams(
        make_server: ServerFactory, tmp_path: Path) -> None:
    """While the store was out the table refused every move: its person gets a whole turn from
    the rebuild, and a stream that stayed open through it is told."""
    clock = ManualClock(5_000_000)
    h = await make_server(clock=clock, store=SqliteStore(tmp_path, synchronous="OFF"),
                          store_retry_ms=600_000)
    game_id, _ = await new_war(h, target=50, turn_ms=TURN)
    before = await view_of(h, game_id)
    first = before.awaiting_seats[0]
    stream = h.stub.StreamEvents(pb.StreamEventsRequest(
        game_id=game_id, after_sequence=before.last_sequence))
    host = h.host
    host.healing.store_failed(live_of(host)[game_id], StoreUnavailable("outage"))
    host.healing.stop()
    clock.advance(2 * MINUTE)  # the outage outlasts the turn
    await host.healing._rebuild(game_id)
    clock.advance(0)
    view = await view_of(h, game_id)
    assert not view.seats[first].bot_controlled
    assert _deadlines(view) == {first: 5_000_000 + 2 * MINUTE + TURN}
    async for response in stream:
        assert [e.WhichOneof("body") for e in response.events] == ["turn_timers_resumed"]
        break
    stream.cancel()


async def test_a_table_adopted_by_another_node_resumes_its_timers_on_the_adopters_clock(
        tmp_path: Path) -> None:
    """Two hosts on one store, as two nodes on one database: B dies with a person awaited; A,
    whose clock is a minute ahead of B's, adopts the table later than the turn would have
    run on B's clock. The person still has a whole turn, on A's clock."""
    b_clock, a_clock = ManualClock(0), ManualClock(MINUTE)
    store = SqliteStore(tmp_path, synchronous="OFF")
    settings = replace(TEST_SETTINGS, abandon_after_s=0, unjoined_ttl_s=0)
    a, b = GameHost(settings, a_clock, store), GameHost(settings, b_clock, store)
    session = await b.create(kind="war", seats=2, seed=1, turn_time_ms=TURN, bots=[None, None],
                             options=replace(WAR.default_options(), target_points=50),
                             stacked_deck=None, stacked_first=None)
    game_id = session.game_id
    for seat in (0, 1):
        await b.join(game_id, seat, f"p{seat}")
    session = b.get(game_id)
    seat = next(iter(WAR.to_act(session.table.state)))
    await b.actor.submit(session, seat, tbl.Act(seat, Reveal()), "r1", None)
    awaited = next(iter(WAR.to_act(b.get(game_id).table.state)))
    assert b.get(game_id).table.deadlines == ((awaited, TURN),)
    b.tables.stop()  # B dies
    a_clock.advance(10_000)  # A's clock: 70 s, past B's deadline by 40 s
    adopted = await a.adopt(game_id, 2)
    assert adopted is not None and adopted.table.deadlines == ((awaited, 70_000 + TURN),)
    await a.actor.settle()  # the resume committed
    a_clock.advance(0)
    assert not a.get(game_id).table.seats[awaited].taken_over
    await a.close()
    # the journal keeps it: read back once more, the same deadline, no second resume
    c = GameHost(settings, ManualClock(70_000), store)
    again = await c.adopt(game_id, 3)
    assert again is not None and again.table.deadlines == ((awaited, 70_000 + TURN),)
    assert sum(isinstance(e.event.body, tbl.TurnTimersResumed) for e in again.events) == 1
    await c.close()
    store.close()
