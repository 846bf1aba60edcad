"""Bataille end to end over a real channel to an in-process server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tapis.v1 import cards_pb2, war_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.store import COMMITTED
from tests.support.calls import REVEAL, STREAM_DEADLINE_S, auth, new_war, reason_of, view_of
from tests.support.driver import all_events, play_to_end
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of


async def test_full_game_between_two_clients(server: Harness) -> None:
    game_id, tokens = await new_war(server)
    actions = await play_to_end(server, game_id, tokens)
    view = await view_of(server, game_id, tokens[0])
    assert view.status == pb.GAME_STATUS_GAME_OVER
    assert max(view.war.points) == 3 or view.war.end_reason != war_pb2.WAR_END_REASON_TARGET
    assert view.version == 2 + actions  # two claims, then every action
    assert view.scoreboard.games_played == 1
    assert [a.WhichOneof("action") for a in view.legal_actions] == ["start_next_game"]
    events = await all_events(server.stub, game_id, 0, view.last_sequence, tokens[1])
    assert [e.sequence for e in events] == list(range(1, view.last_sequence + 1))
    assert events[-1].WhichOneof("body") == "game_ended"


async def test_stream_resumes_after_a_dropped_connection_without_gap_or_duplicate(
        server: Harness) -> None:
    game_id, tokens = await new_war(server, target=4)
    await play_to_end(server, game_id, tokens)
    last = (await view_of(server, game_id)).last_sequence
    first_part = await all_events(server.stub, game_id, 0, 7, tokens[0])
    # A new channel, as a client that lost its connection would open.
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.running.port}")
    try:
        from tapis.v1 import game_service_pb2_grpc as pb_grpc

        again = Harness(server.running, channel, pb_grpc.GameServiceStub(channel), server.clock)
        rest = await all_events(again.stub, game_id, first_part[-1].sequence, last, tokens[0])
    finally:
        await channel.close()
    sequences = [e.sequence for e in first_part + rest]
    assert sequences == list(range(1, last + 1))


async def test_live_stream_receives_events_as_they_happen(server: Harness) -> None:
    game_id, tokens = await new_war(server)
    start = (await view_of(server, game_id)).last_sequence
    reader = asyncio.ensure_future(all_events(server.stub, game_id, start, start + 2))
    await asyncio.sleep(0)  # let the stream open (the result does not depend on it)
    view = await view_of(server, game_id)
    seat = view.awaiting_seats[0]
    await server.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                   metadata=auth(tokens[seat]))
    other = 1 - seat
    await server.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                   metadata=auth(tokens[other]))
    events = await asyncio.wait_for(reader, 10)
    assert [e.sequence for e in events][:2] == [start + 1, start + 2]
    assert events[0].war.card_revealed.seat == seat


async def test_retry_with_the_same_request_id_is_applied_once(server: Harness) -> None:
    game_id, tokens = await new_war(server)
    view = await view_of(server, game_id)
    seat = view.awaiting_seats[0]
    request = pb.SubmitActionRequest(game_id=game_id, action=REVEAL, request_id="r-1")
    first = await server.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    second = await server.stub.SubmitAction(request, metadata=auth(tokens[seat]))
    assert first == second
    assert (await view_of(server, game_id)).version == view.version + 1


async def test_stale_expected_version_is_aborted_and_changes_nothing(server: Harness) -> None:
    game_id, tokens = await new_war(server)
    view = await view_of(server, game_id)
    seat = view.awaiting_seats[0]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=REVEAL, expected_version=view.version - 1),
            metadata=auth(tokens[seat]))
    assert refused.value.code() == grpc.StatusCode.ABORTED
    assert reason_of(refused.value) == "STALE_VERSION"
    assert (await view_of(server, game_id)).version == view.version
    ok = await server.stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=REVEAL, expected_version=view.version),
        metadata=auth(tokens[seat]))
    assert ok.version == view.version + 1


async def test_every_error_path_has_its_code_and_reason_and_changes_nothing(
        server: Harness, make_server: ServerFactory) -> None:
    game_id, tokens = await new_war(server)
    other_game, other_tokens = await new_war(server)
    view = await view_of(server, game_id)
    seat = view.awaiting_seats[0]
    waiting = 1 - seat
    stub = server.stub
    cases = [
        (stub.GetGame(pb.GetGameRequest(game_id="nope")), "NOT_FOUND", "GAME_NOT_FOUND"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL)),
         "UNAUTHENTICATED", "TOKEN_REQUIRED"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                           metadata=auth("forged")), "UNAUTHENTICATED", "INVALID_TOKEN"),
        (stub.GetGame(pb.GetGameRequest(game_id=game_id),
                      metadata=(("authorization", "Basic x"),)),
         "UNAUTHENTICATED", "INVALID_TOKEN"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                           metadata=auth(other_tokens[seat])),
         "PERMISSION_DENIED", "TOKEN_FOR_ANOTHER_GAME"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL, seat=waiting),
                           metadata=auth(tokens[seat])), "PERMISSION_DENIED", "NOT_YOUR_SEAT"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                           metadata=auth(tokens[waiting])),
         "FAILED_PRECONDITION", "NOT_YOUR_TURN"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id),
                           metadata=auth(tokens[seat])), "INVALID_ARGUMENT", "INVALID_ACTION"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=pb.Action()),
                           metadata=auth(tokens[seat])), "INVALID_ARGUMENT", "INVALID_ACTION"),
        (stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(war=war_pb2.WarAction())),
            metadata=auth(tokens[seat])), "INVALID_ARGUMENT", "INVALID_ACTION"),
        (stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
            metadata=auth(tokens[seat])), "FAILED_PRECONDITION", "GAME_NOT_OVER"),
        (stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(reclaim_seat=pb.ReclaimSeat())),
            metadata=auth(tokens[seat])), "FAILED_PRECONDITION", "SEAT_NOT_BOT_CONTROLLED"),
        (stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL,
                                                  request_id="x" * 500),
                           metadata=auth(tokens[seat])), "INVALID_ARGUMENT", "VALUE_TOO_LONG"),
        (stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0)),
         "FAILED_PRECONDITION", "NOT_ALLOWED_NOW"),
        (stub.JoinGame(pb.JoinGameRequest(game_id=game_id)), "FAILED_PRECONDITION",
         "NO_FREE_SEAT"),
        (stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=7)), "INVALID_ARGUMENT",
         "INVALID_ACTION"),
        (stub.CreateGame(pb.CreateGameRequest()), "INVALID_ARGUMENT", "INVALID_GAME_KIND"),
        (stub.CreateGame(pb.CreateGameRequest(kind=99)), "INVALID_ARGUMENT",  # type: ignore[arg-type]
         "INVALID_GAME_KIND"),
        (stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=3)),
         "INVALID_ARGUMENT", "INVALID_SEAT_COUNT"),
        (stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                              war=war_pb2.WarOptions(target_points=100_000))),
         "INVALID_ARGUMENT", "INVALID_OPTIONS"),
        (stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR,
            seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy="genius")])),
         "INVALID_ARGUMENT", "INVALID_OPTIONS"),
        (stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, stacked_deck=[cards_pb2.Card(rank=cards_pb2.RANK_ACE,
                                                                suit=cards_pb2.SUIT_SPADES)])),
         "INVALID_ARGUMENT", "INVALID_STACKED_DECK"),
        (stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, stacked_deck=[cards_pb2.Card(rank=cards_pb2.RANK_JOKER,
                                                                suit=cards_pb2.SUIT_SPADES)])),
         "INVALID_ARGUMENT", "INVALID_STACKED_DECK"),  # a card that does not exist
        (stub.ListGames(pb.ListGamesRequest(page_token="%%%")), "INVALID_ARGUMENT",
         "INVALID_PAGE_TOKEN"),
        *((stub.ListGames(pb.ListGamesRequest(kind=kind)),  # type: ignore[arg-type]
           "INVALID_ARGUMENT", "INVALID_GAME_KIND") for kind in (99, 5, -1)),
        (stub.ListGames(pb.ListGamesRequest(page_size=5000)), "INVALID_ARGUMENT",
         "INVALID_PAGE_SIZE"),
    ]
    for call, code, reason in cases:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert (refused.value.code().name, reason_of(refused.value)) == (code, reason), call
        assert refused.value.details()
    assert (await view_of(server, game_id)).version == view.version
    assert (await view_of(server, other_game)).version == view.version

    closed = await make_server(allow_stacked_decks=False)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await closed.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, stacked_deck=[cards_pb2.Card(rank=cards_pb2.RANK_ACE,
                                                                suit=cards_pb2.SUIT_SPADES)]))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == "STACKED_DECKS_DISABLED"


def _cards_in(message: object) -> list[tuple[int, int]]:
    """Every Card anywhere inside a message."""
    found: list[tuple[int, int]] = []

    def walk(m: object) -> None:
        if isinstance(m, cards_pb2.Card):
            found.append((m.rank, m.suit))
            return
        for field, value in m.ListFields():  # type: ignore[attr-defined]
            if field.message_type is None:
                continue
            for item in (value if field.is_repeated else [value]):
                walk(item)

    walk(message)
    return found


async def test_spectators_and_players_never_see_a_card_before_it_is_revealed(
        server: Harness) -> None:
    game_id, tokens = await new_war(server, target=6, seed=21)
    revealed: set[tuple[int, int]] = set()
    for _ in range(400):
        views = [await view_of(server, game_id)] + [await view_of(server, game_id, t)
                                                    for t in tokens]
        last = views[0].last_sequence
        for token in (None, *tokens):
            for event in await all_events(server.stub, game_id, 0, last, token):
                if event.war.WhichOneof("event") == "card_revealed":
                    c = event.war.card_revealed.card
                    revealed.add((c.rank, c.suit))
        for view in views:
            shown = _cards_in(view)
            assert set(shown) <= revealed
            for laid in list(view.war.trick) + list(view.war.last_trick):
                assert laid.face_up == laid.HasField("card")
        if views[0].status != pb.GAME_STATUS_IN_PROGRESS:
            break
        seat = views[0].awaiting_seats[0]
        await server.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                       metadata=auth(tokens[seat]))
    assert views[0].status == pb.GAME_STATUS_GAME_OVER
    spectator = await view_of(server, game_id)
    assert not spectator.HasField("your_seat") and not spectator.legal_actions


async def test_timeout_hands_the_seat_to_a_bot_until_reclaimed(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock)
    game_id, tokens = await new_war(h, target=50, turn_ms=1000)
    view = await view_of(h, game_id)
    first = view.awaiting_seats[0]
    assert [d.seat for d in view.deadlines] == [first]
    clock.advance(999)
    assert (await view_of(h, game_id)).version == view.version
    clock.advance(1)  # the timer runs out: the bot reveals for `first`, and keeps the seat
    view = await view_of(h, game_id, tokens[first])
    assert view.seats[first].bot_controlled
    assert [a.WhichOneof("action") for a in view.legal_actions] == ["reclaim_seat"]
    events = await all_events(h.stub, game_id, 0, view.last_sequence)
    assert any(e.WhichOneof("body") == "seat_taken_over" and e.seat_taken_over.until_reclaimed
               for e in events)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(tokens[first]))
    assert reason_of(refused.value) == "SEAT_BOT_CONTROLLED"
    # The other player reveals; the bot answers for `first` on its own.
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(tokens[1 - first]))
    clock.advance(0)
    view = await view_of(h, game_id)
    assert view.war.points[0] + view.war.points[1] == 1 or view.war.batailles == 1
    assert view.awaiting_seats == [1 - first] or view.war.batailles
    await h.stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(reclaim_seat=pb.ReclaimSeat())),
        metadata=auth(tokens[first]))
    view = await view_of(h, game_id, tokens[first])
    assert not view.seats[first].bot_controlled
    events = await all_events(h.stub, game_id, 0, view.last_sequence)
    assert events[-1].WhichOneof("body") == "seat_reclaimed"


async def test_series_summary_reaches_every_seat_and_the_next_game_starts(
        server: Harness) -> None:
    game_id, tokens = await new_war(server, target=2)
    await play_to_end(server, game_id, tokens)
    await server.stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
        metadata=auth(tokens[1]))
    view = await view_of(server, game_id, tokens[0])
    assert view.game_number == 2 and view.status == pb.GAME_STATUS_IN_PROGRESS
    await play_to_end(server, game_id, tokens)
    view = await view_of(server, game_id, tokens[0])
    assert view.scoreboard.games_played == 2
    assert sum(view.scoreboard.wins) + view.scoreboard.draws == 2
    for token in (*tokens, None):
        events = await all_events(server.stub, game_id, 0, view.last_sequence, token)
        ends = [e.game_ended for e in events if e.WhichOneof("body") == "game_ended"]
        assert [len(e.series) for e in ends] == [1, 2]
        assert ends[1].series[0] == ends[0].series[0]
        assert list(ends[1].scoreboard.wins) == list(view.scoreboard.wins)


async def test_create_with_the_same_request_id_returns_the_same_game(server: Harness) -> None:
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, request_id="create-1")
    first = await server.stub.CreateGame(request)
    second = await server.stub.CreateGame(request)
    assert first.game.game_id == second.game.game_id
    listing = await server.stub.ListGames(pb.ListGamesRequest())
    assert [g.game_id for g in listing.games] == [first.game.game_id]


async def test_list_games_pages_and_filters(server: Harness) -> None:
    created = [(await server.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)))
               .game.game_id for _ in range(5)]
    whole = (await server.stub.ListGames(pb.ListGamesRequest())).games
    ids = [g.game_id for g in sorted(whole, key=lambda g: (g.create_time.ToMilliseconds(),
                                                          g.game_id))]
    assert [g.game_id for g in whole] == ids and sorted(ids) == sorted(created)  # time, id
    page = await server.stub.ListGames(pb.ListGamesRequest(page_size=3))
    rest = await server.stub.ListGames(pb.ListGamesRequest(page_size=3,
                                                           page_token=page.next_page_token))
    assert [g.game_id for g in page.games] + [g.game_id for g in rest.games] == ids
    assert not rest.next_page_token
    assert all(g.open_seats == [0, 1] for g in page.games)
    other = await server.stub.ListGames(pb.ListGamesRequest(kind=pb.GAME_KIND_BOUTONS))
    assert not other.games
    wars = await server.stub.ListGames(pb.ListGamesRequest(kind=pb.GAME_KIND_WAR))
    assert [g.game_id for g in wars.games] == ids  # a kind named: its tables; none: all


async def test_a_game_against_the_computer_plays_itself_on_the_bot_side(
        server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=3, war=war_pb2.WarOptions(target_points=3),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    game_id = created.game.game_id
    joined = await server.stub.JoinGame(pb.JoinGameRequest(game_id=game_id))
    assert joined.seat == 0
    clock = server.clock
    assert isinstance(clock, ManualClock)
    for _ in range(500):
        clock.advance(0)
        view = await view_of(server, game_id, joined.seat_token)
        if view.status == pb.GAME_STATUS_GAME_OVER:
            break
        if 0 in view.awaiting_seats:
            await server.stub.SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=view.legal_actions[0]),
                metadata=auth(joined.seat_token))
    assert view.status == pb.GAME_STATUS_GAME_OVER


async def test_health_and_reflection(server: Harness) -> None:
    health = health_pb2_grpc.HealthStub(server.channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(service="tapis.v1.GameService"))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    responses = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    names = []
    async for response in responses:
        names = [s.name for s in response.list_services_response.service]
        break
    assert "tapis.v1.GameService" in names
    symbol = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="tapis.v1.GameService")]))
    async for response in symbol:
        assert response.file_descriptor_response.file_descriptor_proto
        break


async def test_graceful_shutdown_reports_not_serving(make_server: ServerFactory) -> None:
    h = await make_server()
    health = health_pb2_grpc.HealthStub(h.channel)
    await h.running.health.enter_graceful_shutdown()
    answer = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_a_retried_join_returns_the_same_seat_and_token(server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    game_id = created.game.game_id
    request = pb.JoinGameRequest(game_id=game_id, request_id="5b1e2c0a")
    first = await server.stub.JoinGame(request)
    second = await server.stub.JoinGame(request)
    assert (first.seat, first.seat_token) == (second.seat, second.seat_token)
    assert (await view_of(server, game_id)).status == pb.GAME_STATUS_WAITING_FOR_PLAYERS
    other = await server.stub.JoinGame(pb.JoinGameRequest(game_id=game_id))
    assert other.seat == 1 - first.seat and other.seat_token != first.seat_token


class GatedStore:
    """A store whose writes complete only when the test says so."""

    keeps_journal = True

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[None]] = []

    def created(self, game_id: str, record: object) -> Awaitable[None]:
        return COMMITTED

    def appended(self, game_id: str, index: int, entry: object,
                 epoch: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def snapshot(self, game_id: str, index: int, data: object, epoch: int) -> Awaitable[None]:
        return COMMITTED

    def dropped(self, game_id: str, epoch: int) -> Awaitable[None]:
        return COMMITTED

    async def load(self) -> list[object]:
        return []

    def close(self) -> None:
        return None

    def release(self) -> None:
        for future in self.pending:
            if not future.done():
                future.set_result(None)


async def test_no_stream_sees_an_event_before_its_action_is_committed(
        make_server: ServerFactory) -> None:
    store = GatedStore()
    h = await make_server(clock=ManualClock(), store=store)
    created = await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seed=1))
    game_id = created.game.game_id
    session = live_of(h.host)[game_id]
    stream = h.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), timeout=STREAM_DEADLINE_S)
    first_join = asyncio.ensure_future(
        h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0)))
    while len(store.pending) < 1:
        await asyncio.sleep(0.001)
    second_join = asyncio.ensure_future(
        h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=1)))
    while len(store.pending) < 2:
        await asyncio.sleep(0.001)
    # Both claims are applied in memory (the second one started the game); only the first is
    # committed: its answer goes out, and streams get its event and nothing after it.
    assert session.last_sequence > 2
    store.pending[0].set_result(None)
    await first_join
    message = await asyncio.wait_for(stream.read(), 10)
    assert [e.sequence for e in message.events] == [1]
    assert session.durable_sequence == 1
    store.release()
    await second_join
    message = await asyncio.wait_for(stream.read(), 10)
    assert message.events[0].sequence == 2
    assert message.events[-1].sequence == session.last_sequence
    stream.cancel()


async def test_a_stream_after_a_sequence_its_table_never_reached_is_refused(
        server: Harness) -> None:
    """StreamEvents after a sequence beyond the table's last event (a client that read a log
    this table does not have: the table restored from an older copy) is refused
    INVALID_ARGUMENT / INVALID_CURSOR, for a seat and a spectator alike, saying where the
    table is, never left waiting in silence; after its last event exactly, it waits for the
    next (``test_live_stream_receives_events_as_they_happen``)."""
    game_id, tokens = await new_war(server)
    last = (await view_of(server, game_id)).last_sequence
    for token in (tokens[0], None):
        stream = server.stub.StreamEvents(
            pb.StreamEventsRequest(game_id=game_id, after_sequence=last + 1),
            metadata=auth(token) if token else None, timeout=STREAM_DEADLINE_S)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in stream:
                pass
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert reason_of(refused.value) == "INVALID_CURSOR"
        assert f"beyond this table's last event ({last})" in (refused.value.details() or "")
