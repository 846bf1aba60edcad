"""Provable fairness: each game commits to its seed at its start and reveals it at its end."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tapis.v1 import cards_pb2, war_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_engine import fairness, table_codec
from tapis_engine import table as tbl
from tapis_engine.cards import standard_deck
from tapis_engine.protocol import GameSetup
from tapis_engine.war import RULES as WAR
from tapis_service.codec.adapters.cards import card_to_proto
from tapis_service.observe.clock import ManualClock
from tests.support.calls import STREAM_DEADLINE_S, view_of, war_for_two
from tests.support.server import Harness, Restartable, ServerFactory

BOTS = [pb.SeatConfig(type=pb.SEAT_TYPE_BOT), pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]


def sha256_check(seed: int, salt: str, commitment: str) -> bool:
    """What any player computes, from the contract alone."""
    return hashlib.sha256(f"{seed}:{salt}".encode()).hexdigest() == commitment


async def bot_war(h: Harness, **fields: object) -> str:
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=BOTS, war=war_pb2.WarOptions(target_points=3),
        **fields))  # type: ignore[arg-type]
    return created.game.game_id


async def test_a_finished_games_seed_and_salt_hash_to_the_commitment_shown_at_its_start(
        server: Harness) -> None:
    game_id = await bot_war(server)
    start = await view_of(server, game_id)
    committed = start.fairness.seed_commitment
    assert start.status == pb.GAME_STATUS_IN_PROGRESS and len(committed) == 64
    assert not start.fairness.deal_chosen
    assert (start.fairness.seed, start.fairness.seed_salt) == (0, "")  # secret while in play
    stream = server.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                      timeout=STREAM_DEADLINE_S)
    first = await stream.read()
    started = [e.game_started for e in first.events if e.HasField("game_started")]
    assert started and started[0].seed_commitment == committed
    stream.cancel()

    server.clock.advance(1)  # type: ignore[attr-defined]  # the bots play it out
    end = await view_of(server, game_id)
    assert end.status == pb.GAME_STATUS_GAME_OVER
    revealed = end.fairness
    assert revealed.seed_commitment == committed
    assert sha256_check(revealed.seed, revealed.seed_salt, committed)
    assert fairness.verify(revealed.seed, revealed.seed_salt, committed)
    summary = end.series[0]
    assert (summary.seed, summary.seed_salt, summary.seed_commitment) == (
        revealed.seed, revealed.seed_salt, committed)
    assert not sha256_check(revealed.seed + 1, revealed.seed_salt, committed)


async def test_an_abandoned_game_reveals_its_seed_as_a_finished_one_does(
        make_server: ServerFactory) -> None:
    """docs/rulings.md: an abandoned game is over; its seed and salt are revealed, so the
    players can check the deal of the game idleness (or the backend) ended."""
    clock = ManualClock()
    h = await make_server(clock=clock, abandon_after_s=60)
    game_id, _ = await war_for_two(h)
    committed = (await view_of(h, game_id)).fairness
    assert (committed.seed, committed.seed_salt) == (0, "")
    clock.advance(2 * 60_000)
    await h.running.api.housekeeping.drain()  # type: ignore[union-attr]
    end = await view_of(h, game_id)
    assert end.status == pb.GAME_STATUS_ABANDONED
    assert end.fairness.seed_commitment == committed.seed_commitment
    assert sha256_check(end.fairness.seed, end.fairness.seed_salt, committed.seed_commitment)


async def test_each_table_has_its_own_secret_salt(server: Harness) -> None:
    views = [await view_of(server, await bot_war(server, seed=7)) for _ in range(2)]
    # the same seed, yet different commitments: the salt is the server's secret per table
    assert views[0].fairness.seed_commitment != views[1].fairness.seed_commitment
    assert all(v.fairness.deal_chosen for v in views)


async def test_a_stacked_deck_or_a_chosen_seed_says_the_deal_was_chosen(
        server: Harness) -> None:
    deck: list[cards_pb2.Card] = [card_to_proto(c) for c in standard_deck()]
    stacked = await view_of(server, await bot_war(server, stacked_deck=deck))
    chosen = await view_of(server, await bot_war(server, seed=3))
    drawn = await view_of(server, await bot_war(server))
    assert (stacked.fairness.deal_chosen, chosen.fairness.deal_chosen,
            drawn.fairness.deal_chosen) == (True, True, False)


def test_each_game_of_a_series_commits_to_its_own_seed() -> None:
    setup = GameSetup(seats=2, seed=11, options=WAR.default_options(), salt="s" * 32)
    first, second = fairness.seed_commitment(setup, 1), fairness.seed_commitment(setup, 2)
    assert first != second
    assert fairness.seed_salt(setup, 1) != fairness.seed_salt(setup, 2)
    assert fairness.verify(fairness.game_seed(setup, 2), fairness.seed_salt(setup, 2), second)
    # what determines each deal is the game's own seed: the same seed deals the same game
    state_a, _ = WAR.start(GameSetup(2, fairness.game_seed(setup, 2), WAR.default_options()))
    state_b, _ = WAR.start(GameSetup(2, fairness.game_seed(setup, 2), WAR.default_options()))
    assert WAR.encode_state(state_a) == WAR.encode_state(state_b)


def test_the_salt_and_the_choice_are_kept_in_the_encoded_table() -> None:
    setup = GameSetup(seats=2, seed=11, options=WAR.default_options(), salt="abc",
                      seed_chosen=True)
    table, _ = tbl.new_table(WAR, setup, ["basic", "basic"], 0, 0)
    decoded = table_codec.decode_table(WAR, table_codec.encode_table(WAR, table))
    assert (decoded.setup.salt, decoded.setup.seed_chosen) == ("abc", True)
    # records written before these keys existed still compare equal
    plain, _ = tbl.new_table(WAR, GameSetup(2, 11, WAR.default_options()), [None, None], 0, 0)
    assert "salt" not in table_codec.encode_table(WAR, plain)["setup"]


async def test_the_commitment_survives_a_restart(tmp_path: Path) -> None:
    servers = Restartable(tmp_path)
    try:
        stub = await servers.start(ManualClock())
        created = await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=BOTS))
        before = created.game.fairness.seed_commitment
        await servers.stop()
        stub = await servers.start(ManualClock())
        after = (await stub.GetGame(pb.GetGameRequest(game_id=created.game.game_id))).game
        assert after.fairness.seed_commitment == before and before
    finally:
        await servers.stop()
