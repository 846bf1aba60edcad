"""Every game end to end through the API, and Bataille Corse's real-time slaps."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb
from tapis.v1 import cards_pb2
from tapis.v1 import game_service_pb2 as pb
from tests.support.calls import auth, person_seats, reason_of, view_of
from tests.support.driver import all_events
from tests.support.games import KINDS, proto_kind, seat_counts, short_options
from tests.support.server import Harness
from tests.support.tables import live_of

CASES = [(kind, seats) for kind in KINDS for seats in seat_counts(kind)]


async def create(h: Harness, kind: str, seats: int, seed: int = 9, **fields: object
                 ) -> tuple[str, list[str]]:
    """A table of ``kind`` for ``seats`` people, all seated (short options unless given)."""
    short = short_options(kind)
    options = {} if short.keys() & fields.keys() else short
    request = pb.CreateGameRequest(kind=proto_kind(kind), seats=seats, seed=seed,
                                   seat_configs=person_seats(seats), **options, **fields)
    created = await h.stub.CreateGame(request)
    tokens = []
    for _ in range(seats):
        joined = await h.stub.JoinGame(pb.JoinGameRequest(game_id=created.game.game_id))
        tokens.append(joined.seat_token)
    return created.game.game_id, tokens


@pytest.mark.parametrize(("kind", "seats"), CASES)
async def test_random_legal_play_to_the_end_through_the_api(
        server: Harness, kind: str, seats: int) -> None:
    game_id, tokens = await create(server, kind, seats)
    rng = random.Random(seats)
    for _ in range(5000):
        view = await view_of(server, game_id)
        if view.status == pb.GAME_STATUS_GAME_OVER:
            break
        assert view.status == pb.GAME_STATUS_IN_PROGRESS
        seat = rng.choice(list(view.awaiting_seats))
        server.clock.advance(1000)  # type: ignore[attr-defined]  # (slaps are rate limited)
        mine = await view_of(server, game_id, tokens[seat])
        assert mine.legal_actions, f"seat {seat} is awaited but has no legal action"
        await server.stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=rng.choice(list(mine.legal_actions)),
            expected_version=mine.version), metadata=auth(tokens[seat]))
    assert view.status == pb.GAME_STATUS_GAME_OVER
    assert len(view.series) == 1 and len(view.series[0].scores) == seats
    for token in (None, tokens[0]):
        events = await all_events(server.stub, game_id, 0, view.last_sequence, token)
        assert [e.sequence for e in events] == list(range(1, view.last_sequence + 1))
        assert events[-1].WhichOneof("body") == "game_ended"


def _card(rank: int, suit: int) -> cards_pb2.Card:
    return cards_pb2.Card(rank=rank, suit=suit)  # type: ignore[arg-type]


def corse_deck(top: list[cards_pb2.Card]) -> list[cards_pb2.Card]:
    """A full 54-card Bataille Corse deck starting with ``top``."""
    deck = [_card(r, s) for s in (1, 2, 3, 4) for r in range(2, 15)]
    deck += [_card(15, 0), _card(15, 0)]
    for card in top:
        deck.remove(card)
    return top + deck


SLAP_SETUP = {"stacked_deck": corse_deck([_card(5, 3), _card(5, 4)])}  # 5♥ then 5♠: a double


async def flip(h: Harness, game_id: str, token: str) -> pb.SubmitActionResponse:
    action = pb.Action(bataille_corse=corse_pb.BatailleCorseAction(
        flip=corse_pb.BatailleCorseFlip()))
    response: pb.SubmitActionResponse = await h.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=action), metadata=auth(token))
    return response


def slap(game_id: str, sequence: int) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(game_id=game_id, action=pb.Action(
        bataille_corse=corse_pb.BatailleCorseAction(
            slap=corse_pb.BatailleCorseSlap(pile_sequence=sequence))))


async def test_two_concurrent_slaps_on_one_combination_exactly_one_wins(
        server: Harness) -> None:
    game_id, tokens = await create(server, "bataille-corse", 3, **SLAP_SETUP)
    await flip(server, game_id, tokens[0])
    await flip(server, game_id, tokens[1])
    view = await view_of(server, game_id)
    top = view.bataille_corse.top_sequence
    results = await asyncio.gather(
        *(server.stub.SubmitAction(slap(game_id, top), metadata=auth(tokens[seat]))
          for seat in (1, 2)), return_exceptions=True)
    won = [r for r in results if isinstance(r, pb.SubmitActionResponse)]
    lost = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(lost[0]) == "SLAP_TOO_LATE"
    pile_won = [e.bataille_corse.pile_won for e in won[0].events
                if e.bataille_corse.WhichOneof("event") == "pile_won"]
    assert pile_won and pile_won[0].combination == corse_pb.BATAILLE_CORSE_COMBINATION_DOUBLE
    after = await view_of(server, game_id)
    assert after.version == view.version + 1
    assert after.bataille_corse.pile_size == 0


async def test_a_slap_on_a_card_no_longer_on_top_is_too_late_without_penalty(
        server: Harness) -> None:
    game_id, tokens = await create(server, "bataille-corse", 2, **SLAP_SETUP)
    await flip(server, game_id, tokens[0])
    seen = (await view_of(server, game_id)).bataille_corse.top_sequence
    await flip(server, game_id, tokens[1])
    before = await view_of(server, game_id)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.SubmitAction(slap(game_id, seen), metadata=auth(tokens[0]))
    assert reason_of(refused.value) == "SLAP_TOO_LATE"
    after = await view_of(server, game_id)
    assert after.version == before.version
    assert list(after.bataille_corse.deck_sizes) == list(before.bataille_corse.deck_sizes)


async def test_a_thousand_slaps_are_rate_limited_and_refused_ones_change_nothing(
        server: Harness) -> None:
    game_id, tokens = await create(server, "bataille-corse", 2, **SLAP_SETUP)
    await flip(server, game_id, tokens[0])
    start = await view_of(server, game_id)
    accepted, limited = 0, 0
    for _ in range(1000):
        top = (await view_of(server, game_id)).bataille_corse.top_sequence
        try:
            await server.stub.SubmitAction(slap(game_id, top), metadata=auth(tokens[1]))
            accepted += 1
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                assert reason_of(error) == "RATE_LIMITED"
                limited += 1
    settings = server.host.settings
    assert accepted <= settings.slap_burst
    assert limited >= 1000 - settings.slap_burst
    after = await view_of(server, game_id)
    assert after.version == start.version + accepted
    server.clock.advance(1000)  # type: ignore[attr-defined]
    top = after.bataille_corse.top_sequence
    try:
        await server.stub.SubmitAction(slap(game_id, top), metadata=auth(tokens[1]))
    except grpc.aio.AioRpcError as error:  # the bucket refilled: refused for the rules only
        assert error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_server_bots_race_to_slap(server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=3, seed=4,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT)] * 3,
        bataille_corse=corse_pb.BatailleCorseOptions(flip_cap=2000)))
    game_id = created.game.game_id
    for _ in range(20000):
        server.clock.advance(10)  # type: ignore[attr-defined]
        view = await view_of(server, game_id)
        if view.status == pb.GAME_STATUS_GAME_OVER:
            break
    assert view.status == pb.GAME_STATUS_GAME_OVER
    events = await all_events(server.stub, game_id, 0, view.last_sequence)
    won = [e.bataille_corse.pile_won for e in events
           if e.bataille_corse.WhichOneof("event") == "pile_won"]
    assert any(w.reason == corse_pb.BATAILLE_CORSE_PILE_REASON_COMBINATION for w in won)


async def test_slap_to_pile_won_latency_is_measured_when_the_event_is_sent(
        server: Harness) -> None:
    from tapis_service.observe import metrics

    def observed() -> float:
        return sum(s.value for m in metrics.SLAP_TO_PILE_WON.collect() for s in m.samples
                   if s.name.endswith("_count"))

    game_id, tokens = await create(server, "bataille-corse", 2, **SLAP_SETUP)
    await flip(server, game_id, tokens[0])
    await flip(server, game_id, tokens[1])
    view = await view_of(server, game_id)
    reader = asyncio.ensure_future(all_events(server.stub, game_id, view.last_sequence,
                                              view.last_sequence + 1))
    before = observed()
    for _ in range(10_000):  # wait (bounded) until the server has registered the stream
        if live_of(server.host)[game_id].subscribers:
            break
        await asyncio.sleep(0.001)
    assert live_of(server.host)[game_id].subscribers
    await server.stub.SubmitAction(slap(game_id, view.bataille_corse.top_sequence),
                                   metadata=auth(tokens[0]))
    events = await asyncio.wait_for(reader, 10)
    assert events[0].bataille_corse.WhichOneof("event") == "pile_won"
    assert observed() == before + 1


NO_CARD = "not a card: give a rank and a suit"
NOT_CARDS = [
    (cards_pb2.Card(rank=cards_pb2.Rank.ValueType(0), suit=cards_pb2.SUIT_SPADES), NO_CARD),
    (cards_pb2.Card(rank=cards_pb2.Rank.ValueType(99), suit=cards_pb2.SUIT_HEARTS), NO_CARD),
    (cards_pb2.Card(rank=cards_pb2.RANK_ACE), NO_CARD),
    (cards_pb2.Card(rank=cards_pb2.RANK_JOKER, suit=cards_pb2.SUIT_CLUBS),
     "a joker has no suit"),
]
"""Cards that do not exist: rank 0, rank 99, an ace without a suit, a joker with one."""


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stacked_deck_with_a_card_that_does_not_exist_is_not_the_games_deck(
        server: Harness, kind: str) -> None:
    """Refused INVALID_STACKED_DECK (not INVALID_ACTION: nobody acted), saying where the
    creator's own deck went wrong and showing none of its cards."""
    ace = cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)
    for card, why in NOT_CARDS:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await server.stub.CreateGame(pb.CreateGameRequest(
                kind=proto_kind(kind), stacked_deck=[ace, ace, ace, card, ace]))
        assert (refused.value.code(), reason_of(refused.value)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_STACKED_DECK"), (kind, card)
        assert refused.value.details() == f"stacked_deck[3]: {why}"
    # a joker is a card, and in no game's deck but Bataille Corse's twice: the game refuses it
    joker = cards_pb2.Card(rank=cards_pb2.RANK_JOKER)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.CreateGame(pb.CreateGameRequest(
            kind=proto_kind(kind), stacked_deck=[joker] * 3))
    assert reason_of(refused.value) == "INVALID_STACKED_DECK"
    assert not live_of(server.host)
