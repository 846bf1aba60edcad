"""Server bots react like a person (issue 33.1): a reaction time drawn around a median, the
server's or the table's, so that a person has a fair chance at Bataille Corse's slaps."""

from __future__ import annotations

import random
from pathlib import Path

import grpc
import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb
from tapis.v1 import game_service_pb2 as pb
from tapis_engine.corse.combinations import find_combination
from tapis_service.codec.adapters.cards import card_from_proto
from tapis_service.codec.adapters.corse import PROTO_TO_COMBINATION
from tapis_service.observe.clock import ManualClock
from tapis_service.settings import Settings
from tapis_service.tables.autoplay import FASTEST, SLOWEST, reaction_ms
from tests.support.calls import auth, reason_of, view_of
from tests.support.server import Harness, Restartable, ServerFactory

DEFAULTS = Settings()
PERSON_MS = 500
"""The scripted person slaps this long after a slappable flip."""
PERSON_FLIP_MS = 800
"""...and flips this long after its turn comes."""

FLIP = pb.Action(bataille_corse=corse_pb.BatailleCorseAction(flip=corse_pb.BatailleCorseFlip()))


def slap(game_id: str, sequence: int) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(game_id=game_id, action=pb.Action(
        bataille_corse=corse_pb.BatailleCorseAction(
            slap=corse_pb.BatailleCorseSlap(pile_sequence=sequence))))


def slappable(view: pb.GameView) -> bool:
    corse = view.bataille_corse
    enabled = frozenset(PROTO_TO_COMBINATION[c] for c in corse.combinations)
    return corse.HasField("top_sequence") and find_combination(
        [card_from_proto(c) for c in corse.pile_top], enabled) is not None


def bot_delays(clock: ManualClock) -> list[int]:
    """How long each armed bot move waits (the server's other timers are further)."""
    return sorted(at - clock.now_ms() for at, _ in clock.armed() if at - clock.now_ms() < 10_000)


def test_reaction_times_are_a_persons_around_the_median_and_within_bounds() -> None:
    rng = random.Random(1)
    draws = sorted(reaction_ms(1000, 0.2, rng) for _ in range(2001))
    assert draws[0] >= FASTEST * 1000 and draws[-1] <= SLOWEST * 1000
    assert 950 <= draws[1000] <= 1050  # the median
    assert 820 <= draws[500] <= 920 and 1090 <= draws[1500] <= 1200  # the quartiles
    assert sum(d < PERSON_MS for d in draws) == 0
    assert reaction_ms(1000, 0.0, rng) == 1000 and reaction_ms(0, 0.2, rng) == 0


async def test_a_person_slapping_half_a_second_after_the_flip_wins_a_fair_share(
        make_server: ServerFactory) -> None:
    """Bataille Corse against two default server bots (the server's default reaction, a seeded
    draw): a person who slaps 500 ms after each slappable flip wins at least a third of the
    slaps, counted one by one."""
    clock = ManualClock()
    h = await make_server(clock=clock, bot_delay_ms=DEFAULTS.bot_delay_ms,
                          bot_delay_spread=DEFAULTS.bot_delay_spread)
    h.host.actor.autoplay.rng.seed(33)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=3, seed=4, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_PERSON), pb.SeatConfig(type=pb.SEAT_TYPE_BOT),
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    game_id = created.game.game_id
    token = (await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))).seat_token
    won = lost = 0
    seen: set[int] = set()
    slap_at: tuple[int, int] | None = None  # (when, the pile sequence named)
    flip_at: int | None = None
    for _ in range(20_000):
        view = await view_of(h, game_id, token)
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            break
        corse = view.bataille_corse
        now = clock.now_ms()
        if corse.HasField("top_sequence") and corse.top_sequence not in seen:
            seen.add(corse.top_sequence)
            if slappable(view):
                slap_at = (now + PERSON_MS, corse.top_sequence)
        my_turn = corse.HasField("turn") and corse.turn == 0 and FLIP in view.legal_actions
        if my_turn and flip_at is None:
            flip_at = now + PERSON_FLIP_MS
        elif not my_turn:
            flip_at = None
        if slap_at is not None and slap_at[0] <= now:
            try:
                await h.stub.SubmitAction(slap(game_id, slap_at[1]), metadata=auth(token))
            except grpc.aio.AioRpcError as error:
                assert reason_of(error) == "SLAP_TOO_LATE"  # a bot slapped first
                lost += 1
            else:
                assert (await view_of(h, game_id)).bataille_corse.pile_size == 0
                won += 1
            slap_at = None
            continue
        if flip_at is not None and flip_at <= now and slap_at is None:
            await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=FLIP),
                                      metadata=auth(token))
            flip_at = None
            continue
        due = [at for at, _ in clock.armed()]
        due += [slap_at[0]] if slap_at else []
        due += [flip_at] if flip_at is not None else []
        assert due, "nothing left to happen in a game in progress"
        clock.advance(max(min(due) - now, 0))
    assert won + lost >= 15, f"too few slaps to judge: {won} won, {lost} lost"
    assert won * 3 >= won + lost, f"the person won {won} of {won + lost} slaps"


async def test_the_server_bots_of_a_table_take_its_own_reaction_time(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, bot_delay_ms=1000, bot_delay_spread=0.0)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, seed=1, bot_reaction_ms=2500, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT), pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    assert created.game.settings.bot_reaction_ms == 2500
    assert bot_delays(clock) == [2500]
    clock.advance(2499)
    assert (await view_of(h, created.game.game_id)).bataille_corse.flips == 0
    clock.advance(1)
    assert (await view_of(h, created.game.game_id)).bataille_corse.flips == 1
    other = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT), pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    assert not other.game.settings.HasField("bot_reaction_ms")
    assert bot_delays(clock) == [1000, 2500]


async def test_a_tables_reaction_time_is_checked(server: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, bot_reaction_ms=60_001))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(refused.value) == "INVALID_OPTIONS"


async def test_a_tables_reaction_time_survives_a_restart(tmp_path: Path) -> None:
    server = Restartable(tmp_path)
    clock = ManualClock()
    try:
        stub = await server.start(clock, bot_delay_ms=1000, bot_delay_spread=0.0)
        created = await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, bot_reaction_ms=1800, seat_configs=[
                pb.SeatConfig(type=pb.SEAT_TYPE_BOT), pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
        game_id = created.game.game_id
        assert bot_delays(clock) == [1800]
        await server.stop()
        clock = ManualClock(clock.now_ms())
        stub = await server.start(clock, bot_delay_ms=1000, bot_delay_spread=0.0)
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert view.settings.bot_reaction_ms == 1800
        assert bot_delays(clock) == [1800]
    finally:
        await server.stop()
