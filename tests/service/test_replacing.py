"""ReplaceSeat at the host: the table actor revokes the seat's tokens and ends its streams at
once, hands the seat to its new holder (name, player, generation) and remembers the request id;
a restart rebuilds all of it from the journal. A refusal changes nothing."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.war import Reveal, WarOptions
from tapis_service.codec import convert
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables import compaction
from tapis_service.tables.host import GameHost
from tapis_service.tables.ownership import Ownership, seat_token
from tapis_service.tables.session import Session
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of

OWNED = Ownership("backend-a", "private", ("u-1", "u-2"), ("Ada", "u-2"))


async def seated(host: GameHost, bots: tuple[str | None, ...] = (None, None)
                 ) -> tuple[Session, list[str]]:
    """A War table of backend-a's, its person seats claimed (as a backend's create does)."""
    session = await host.create("war", 2, 9, 0, list(bots), WarOptions(target_points=10_000),
                                None, None, ownership=OWNED)
    tokens = []
    for seat in (0, 1):
        if bots[seat] is None:
            tokens.append((await host.join(session.game_id, seat, OWNED.names[seat],
                                           f"\0reserved:{seat}"))[2])
    return session, tokens


def refused(error: pytest.ExceptionInfo[ServiceError]) -> tuple[grpc.StatusCode, str]:
    return error.value.code, error.value.reason


async def test_the_actor_revokes_the_seat_hands_it_over_and_answers_a_retry_alike() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session, (old, other) = await seated(host)
    mine, theirs, watching = (host.subscribe(session, seat, 0)[0] for seat in (0, 1, None))
    version = session.table.version
    _, replaced = await host.actor.replace(session, 0, "u-9", "Linus", "r-1")
    assert (replaced.seat, replaced.generation, replaced.player_id, replaced.name) == (
        0, 1, "u-9", "Linus")
    new = replaced.token(host.tokens.key, session.game_id)
    assert new == seat_token(host.tokens.key, session.game_id, 0, 1)
    with pytest.raises(ServiceError) as revoked:
        host.seat_of(session, old)
    assert refused(revoked) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED")
    assert host.seat_of(session, new) == 0 and host.seat_of(session, other) == 1
    # the seat's stream ends (after what was published before); the others get the event
    assert mine.revoked and mine.closed and mine.pending[-1] is None
    assert all(item is None or not any(isinstance(e.event.body, tbl.SeatReplaced)
                                       for e in item[0]) for item in mine.pending)
    for stream in (theirs, watching):
        assert not stream.revoked
        assert isinstance(stream.pending[-1][0][-1].event.body, tbl.SeatReplaced)
    assert session.names == ["Linus", "u-2"]
    assert session.ownership.player_ids == ("u-9", "u-2")
    assert session.ownership.names == ("Linus", "u-2")
    assert session.table.seats[0].taken_over and session.table.version == version + 1
    # a retry: the same answer, no second input
    _, again = await host.actor.replace(session, 0, "someone-else", "", "r-1")
    assert again == replaced and session.table.version == version + 1
    # the next replace of the seat: the next generation; without a player, nobody's
    _, kicked = await host.actor.replace(session, 0, "", "", "r-2")
    assert (kicked.generation, kicked.token(host.tokens.key, session.game_id)) == (2, "")
    with pytest.raises(ServiceError):
        host.seat_of(session, new)
    assert session.names[0] == "" and session.ownership.player_ids == ("", "u-2")
    await host.close()


def holders(events: list[pb.Event]) -> list[tuple[str, int, str]]:
    """(body, seat, name given) of each SeatClaimed and SeatReplaced of ``events``."""
    return [(body, getattr(e, body).seat, getattr(e, body).display_name) for e in events
            if (body := e.WhichOneof("body")) in ("seat_claimed", "seat_replaced")]


async def test_each_holder_event_names_the_holder_of_its_time() -> None:
    """A SeatClaimed names who claimed the seat and a SeatReplaced whom it gave the seat to
    (nobody: ""), whoever holds it since; so do their bytes once their game's events are
    compacted, and the events framed again after (a stream's queued change)."""
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await host.create("war", 2, 9, 0, [None, None], WarOptions(target_points=10),
                                None, None)
    await host.join(session.game_id, 0, "Al", "")
    await host.actor.replace(session, 0, "u-9", "Bea", "")
    await host.actor.replace(session, 0, "", "", "")  # before the game starts: still logged
    assert session.names == ["", ""] and not session.table.started
    history = [("seat_claimed", 0, "Al"), ("seat_replaced", 0, "Bea"),
               ("seat_replaced", 0, "")]
    logged = list(session.events)
    assert holders([convert.event(session, e, None) for e in logged]) == history
    await host.join(session.game_id, 1, "Cy", "")  # the game starts: the claims compacted
    assert session.table.started and session.events[0].sequence > len(history) + 1
    compacted = [event for raw, _ in compaction.replay(session.compacted, None, 0, 100)
                 for event in pb.StreamEventsResponse.FromString(raw).events]
    assert holders(compacted) == [*history, ("seat_claimed", 1, "Cy")]
    assert holders([convert.event(session, e, None) for e in logged]) == history
    await host.close()


@pytest.mark.parametrize(("seat", "player", "name", "expected"), [
    (2, "u-9", "", (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),
    (1, "u-9", "", (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),  # a bot's
    (0, "u-2", "", (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),  # held
    (0, "", "Nobody", (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_CONFIG")),
])
async def test_a_refused_replace_changes_nothing(
        seat: int, player: str, name: str, expected: tuple[grpc.StatusCode, str]) -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session, (token, *_) = await seated(host, (None, "basic") if seat == 1 else (None, None))
    before = (session.table, list(session.names), session.ownership)
    with pytest.raises(ServiceError) as raised:
        await host.actor.replace(session, seat, player, name, "r-1")
    assert refused(raised) == expected
    assert (session.table, session.names, session.ownership) == before
    assert host.seat_of(session, token) == 0 and not session.replace_requests
    await host.close()


async def test_a_restart_rebuilds_the_replacements_from_the_journal(tmp_path: Path) -> None:
    clock = ManualClock()
    host = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    session, (old, other) = await seated(host)
    me = session.table.state.to_move
    await host.actor.submit(session, me, tbl.Act(me, Reveal()), "", None)
    _, first = await host.actor.replace(session, 1, "u-7", "Grace", "r-1")
    _, second = await host.actor.replace(session, 1, "u-8", "", "r-2")
    key, game_id = host.tokens.key, session.game_id
    await host.close()

    restarted = GameHost(TEST_SETTINGS, clock, SqliteStore(tmp_path, synchronous="OFF"))
    await restarted.recover()
    reloaded = live_of(restarted)[game_id]
    assert reloaded.table == session.table
    assert reloaded.names == ["Ada", "u-8"] and reloaded.ownership == session.ownership
    assert reloaded.generations == {1: 2}
    assert reloaded.replace_requests == {"r-1": first, "r-2": second}
    for revoked in (other, first.token(key, game_id)):
        with pytest.raises(ServiceError) as raised:
            restarted.seat_of(reloaded, revoked)
        assert refused(raised) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED")
    assert restarted.seat_of(reloaded, second.token(key, game_id)) == 1
    assert restarted.seat_of(reloaded, old) == 0
    _, again = await restarted.actor.replace(reloaded, 1, "u-8", "", "r-2")
    assert again == second and reloaded.table.version == session.table.version
    await restarted.close()
