"""Limits before work: sizes checked first, short quotes of client values, the message bound."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tapis.v1 import basra_pb2, cards_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine import basra
from tapis_engine.cards import standard_deck
from tapis_engine.registry import BY_KIND
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.codec.adapters.cards import card_to_proto
from tapis_service.door import limits
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import server_options
from tapis_service.settings import Settings
from tests.support.calls import REVEAL, STREAM_DEADLINE_S, auth, refusal, view_of, war_for_two
from tests.support.games import KINDS, proto_kind
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of

HUGE_ID = "g" * 20_000
ACE = cards_pb2.Card(rank=cards_pb2.RANK_ACE, suit=cards_pb2.SUIT_SPADES)


async def test_a_20000_byte_game_id_is_invalid_everywhere_and_its_log_line_is_short(
        server: Harness) -> None:
    game_id, tokens = await war_for_two(server)
    before = await view_of(server, game_id)
    with capture_logs() as logs:
        calls = [
            server.stub.GetGame(pb.GetGameRequest(game_id=HUGE_ID)),
            server.stub.JoinGame(pb.JoinGameRequest(game_id=HUGE_ID)),
            server.stub.SubmitAction(pb.SubmitActionRequest(game_id=HUGE_ID, action=REVEAL),
                                     metadata=auth(tokens[0])),
        ]
        for call in calls:
            code, reason, details = await refusal(call)
            assert (code, reason) == ("INVALID_ARGUMENT", "VALUE_TOO_LONG")
            assert len(details) < 100 and "g" * 50 not in details
        stream = server.stub.StreamEvents(pb.StreamEventsRequest(game_id=HUGE_ID),
                                          timeout=STREAM_DEADLINE_S)
        code, reason, _ = await refusal(stream.read())
        assert (code, reason) == ("INVALID_ARGUMENT", "VALUE_TOO_LONG")
    refused = [entry for entry in logs if entry["event"] == "refused"]
    assert len(refused) == 4
    assert all(len(repr(entry)) < 300 for entry in logs)
    assert (await view_of(server, game_id)).version == before.version


async def test_an_empty_game_id_is_a_missing_argument_everywhere(server: Harness) -> None:
    _, tokens = await war_for_two(server)
    calls = [
        server.stub.GetGame(pb.GetGameRequest()),
        server.stub.JoinGame(pb.JoinGameRequest(display_name="ana")),
        server.stub.SubmitAction(pb.SubmitActionRequest(action=REVEAL),
                                 metadata=auth(tokens[0])),
        server.stub.StreamEvents(pb.StreamEventsRequest(), timeout=STREAM_DEADLINE_S).read(),
    ]
    for call in calls:
        code, reason, details = await refusal(call)
        assert (code, reason) == ("INVALID_ARGUMENT", "MISSING_GAME_ID")
        assert details == "name the game: game_id is empty"


async def test_an_unknown_game_is_quoted_by_a_short_prefix(server: Harness) -> None:
    long_id = "x" * 120  # within the limit, but longer than any quote
    code, reason, details = await refusal(server.stub.GetGame(pb.GetGameRequest(
        game_id=long_id)))
    assert (code, reason) == ("NOT_FOUND", "GAME_NOT_FOUND")
    assert "x" * limits.QUOTE_CHARS in details and "x" * (limits.QUOTE_CHARS + 1) not in details


async def test_every_string_of_a_request_is_bounded(server: Harness) -> None:
    cases = [
        pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, request_id="r" * 129),
        pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy="b" * 200)]),
    ]
    for request in cases:
        assert (await refusal(server.stub.CreateGame(request)))[:2] == (
            "INVALID_ARGUMENT", "VALUE_TOO_LONG")
    code, reason, _ = await refusal(server.stub.JoinGame(pb.JoinGameRequest(
        game_id="g", display_name="é" * 65)))  # 130 bytes of UTF-8 in 65 characters
    assert (code, reason) == ("INVALID_ARGUMENT", "VALUE_TOO_LONG")
    code, reason, _ = await refusal(server.stub.ListGames(pb.ListGamesRequest(
        page_token="t" * 500)))
    assert (code, reason) == ("INVALID_ARGUMENT", "VALUE_TOO_LONG")
    # 128 bytes is still fine
    created = await server.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                                                request_id="r" * 128))
    assert created.game.game_id


async def test_an_unknown_bot_strategy_is_quoted_short(server: Harness) -> None:
    code, reason, details = await refusal(server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy="s" * 128)])))
    assert (code, reason) == ("INVALID_ARGUMENT", "INVALID_OPTIONS")
    assert "s" * (limits.QUOTE_CHARS + 1) not in details and "basic" in details


def test_repeated_fields_are_bounded() -> None:
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_BATAILLE_CORSE, seat_configs=[
        pb.SeatConfig() for _ in range(limits.MAX_REPEATED + 1)])
    with pytest.raises(Exception) as refused:
        limits.check_sizes(request)
    assert getattr(refused.value, "reason", None) == "VALUE_TOO_LONG"
    limits.check_sizes(pb.CreateGameRequest(stacked_deck=[ACE] * 5000))  # checked by kind
    capture = basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard(
        card=ACE, capture=basra_pb2.BasraCapture(cards=[ACE] * 65)))
    with pytest.raises(Exception) as refused:
        limits.check_sizes(pb.SubmitActionRequest(action=pb.Action(basra=capture)))
    assert getattr(refused.value, "reason", None) == "VALUE_TOO_LONG"


async def test_a_stacked_deck_longer_than_the_game_is_refused(server: Harness) -> None:
    for kind in KINDS:
        cards = BY_KIND[kind].max_stacked_cards + 1
        code, reason, details = await refusal(server.stub.CreateGame(pb.CreateGameRequest(
            kind=proto_kind(kind), stacked_deck=[ACE] * cards)))
        assert (code, reason) == ("INVALID_ARGUMENT", "VALUE_TOO_LONG"), kind
        assert "stacked_deck" in details


async def test_chosen_deals_are_refused_before_any_card_is_read(
        make_server: ServerFactory) -> None:
    closed = await make_server(clock=ManualClock(), allow_stacked_decks=False)
    # cards that do not even convert, and too many of them: the permission is checked first
    junk = [cards_pb2.Card(rank=99, suit=77)] * 3000  # type: ignore[arg-type]
    code, reason, _ = await refusal(closed.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, stacked_deck=junk)))
    assert (code, reason) == ("FAILED_PRECONDITION", "STACKED_DECKS_DISABLED")
    code, reason, details = await refusal(closed.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=42)))
    assert (code, reason) == ("FAILED_PRECONDITION", "SEED_CHOICE_DISABLED")
    assert "--allow-stacked-decks" in details
    assert not live_of(closed.host)
    created = await closed.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    assert not created.game.fairness.deal_chosen


async def test_a_message_beyond_the_bound_is_refused_by_grpc_before_parsing(
        make_server: ServerFactory) -> None:
    closed = await make_server(clock=ManualClock(), allow_stacked_decks=False)
    huge = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, stacked_deck=[ACE] * 700_000)
    assert huge.ByteSize() > 3_900_000
    code, _, details = await refusal(closed.stub.CreateGame(huge))
    assert code == "RESOURCE_EXHAUSTED" and "larger than max" in details
    assert not live_of(closed.host)


def test_the_largest_legitimate_request_fits_the_bound() -> None:
    strategy = "s" * limits.MAX_TEXT_BYTES
    for kind in KINDS:
        game, adapter = BY_KIND[kind], ADAPTERS[kind]
        seats = game.rules.max_seats
        request = pb.CreateGameRequest(
            kind=proto_kind(kind), seats=seats, seed=2**64 - 1, turn_time_limit_ms=2**32 - 1,
            request_id="r" * limits.MAX_TEXT_BYTES, stacked_first_seat=seats - 1,
            seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT, bot_strategy=strategy)] * seats,
            stacked_deck=[ACE] * game.max_stacked_cards,
            labels={f"{n:02}".ljust(limits.MAX_LABEL_KEY_BYTES, "k"):
                    "\u00e9" * (limits.MAX_LABEL_VALUE_BYTES // 2)
                    for n in range(limits.MAX_LABELS)},
            **{adapter.field: adapter.options_to_proto(game.rules.default_options())})
        limits.check_sizes(request)  # as large as each limit allows, and within them
        assert request.ByteSize() < limits.MAX_RECEIVE_MESSAGE_BYTES // 2, kind
    assert len(ACE.SerializeToString()) + 2 == limits.CARD_WIRE_BYTES


async def test_the_largest_legitimate_stacked_deck_is_accepted(server: Harness) -> None:
    deck = [card_to_proto(c) for c in standard_deck()] * basra.MAX_STACKED_DEALS
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BASRA, seats=2, stacked_deck=deck))
    assert created.game.settings.stacked_deck and created.game.fairness.deal_chosen


def test_quote_and_clip_keep_a_short_prefix() -> None:
    assert limits.quote("abc") == "'abc'"
    quoted = limits.quote("z" * 10_000)
    assert len(quoted) < 80 and "10000 chars" in quoted
    assert limits.clip("q" * 100) == "q" * limits.QUOTE_CHARS + "…"
    assert limits.peer_host("ipv4:127.0.0.1:5555") == "ipv4:127.0.0.1"
    assert limits.peer_host("ipv6:[::1]:5555") == "ipv6:[::1]"
    assert limits.peer_host("unix:/tmp/x") == "unix:/tmp/x"


def test_grpc_refuses_messages_beyond_the_bound_in_the_server_options() -> None:
    options = dict(server_options(Settings()))
    assert options["grpc.max_receive_message_length"] == limits.MAX_RECEIVE_MESSAGE_BYTES
    assert options["grpc.keepalive_time_ms"] > 0 and options["grpc.keepalive_timeout_ms"] > 0
    assert options["grpc.keepalive_permit_without_calls"] == 1
    # without it the core waits a minute for a ping's ack, whatever keepalive_timeout_ms says
    assert options["grpc.http2.ping_timeout_ms"] == options["grpc.keepalive_timeout_ms"]
