"""The bot kit over a real channel to an in-process server: the reference bot follows Bataille
Corse from its stream, backs off when rate limited, resends a move whose answer was lost, and
takes plugged-in strategies."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_clients import bot, strategies
from tapis_clients.connection import Connection
from tapis_service.observe.clock import ManualClock
from tests.support.calls import auth, person_seats
from tests.support.calls import refusal_error as refusal
from tests.support.server import ServerFactory

EXAMPLES = Path(__file__).resolve().parents[2] / "clients" / "examples"


class CountingConnection(Connection):
    """A connection that counts the calls made by method name."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.counts: dict[str, int] = {}

    async def call(self, method: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        name = type(request).__name__.removesuffix("Request")
        self.counts[name] = self.counts.get(name, 0) + 1
        return await super().call(method, request, *args, **kwargs)


async def test_corse_bots_follow_the_stream_without_idle_stalls(
        make_server: ServerFactory) -> None:
    h = await make_server()
    conn = CountingConnection(f"127.0.0.1:{h.running.port}")
    stats = bot.Stats()
    done = await bot.selfplay_one(conn, pb.GAME_KIND_BATAILLE_CORSE, 2, 7, bot.BotStyle(), stats,
                                  choose_deal=True)
    await conn.close()
    assert done
    assert stats.errors == []
    assert stats.idle_checks == 0
    # One look at the table per seat at the start; every flip after that comes from the stream.
    assert conn.counts["GetGame"] == 2
    assert stats.actions > 50


async def test_rate_limited_slaps_wait_and_the_game_goes_on(make_server: ServerFactory) -> None:
    h = await make_server(slap_rate_per_s=4.0, slap_burst=1)
    conn = Connection(f"127.0.0.1:{h.running.port}")
    stats = bot.Stats()
    short = pb.CreateGameRequest(bataille_corse=corse_pb2.BatailleCorseOptions(flip_cap=60))
    done = await bot.selfplay_one(conn, pb.GAME_KIND_BATAILLE_CORSE, 2, 3, bot.BotStyle(), stats,
                                  options=short, choose_deal=True)
    await conn.close()
    assert done and stats.errors == []
    assert stats.rate_limited > 0
    assert stats.idle_checks == 0


class AnswerLostOnce:
    """A stub whose first SubmitAction fails INTERNAL (a fault of the server's own, which may
    come after the move applied) and whose next ones answer."""

    def __init__(self) -> None:
        self.sent: list[pb.SubmitActionRequest] = []

    async def SubmitAction(self, request: pb.SubmitActionRequest,
                           **_: Any) -> pb.SubmitActionResponse:
        self.sent.append(request)
        if len(self.sent) == 1:
            raise refusal(grpc.StatusCode.INTERNAL, "INTERNAL", retry_delay_ms="0")
        return pb.SubmitActionResponse()


async def test_a_move_whose_answer_was_lost_is_resent_not_an_error() -> None:
    conn = Connection("127.0.0.1:1")
    conn.stub = stub = AnswerLostOnce()  # type: ignore[assignment]
    stats = bot.Stats()
    seat = bot.SeatBot(conn, "g", 0, "token", lambda view, legal: None, random.Random(1),
                       bot.BotStyle(), stats)
    await seat.submit(pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal())), 2)
    await conn.close()
    assert stats.errors == [] and stats.actions == 1
    assert len(stub.sent) == 2 and stub.sent[0] == stub.sent[1]  # the same request_id


def test_action_kind_names_the_move() -> None:
    slap = strategies.corse.slap_action(4)
    assert bot.action_kind(slap) == "bataille_corse.slap"
    assert bot.action_kind(pb.Action(reclaim_seat=pb.ReclaimSeat())) == "reclaim_seat"


def test_load_refuses_what_is_not_module_function() -> None:
    with pytest.raises(ValueError, match="module:function"):
        strategies.load("no_colon")
    with pytest.raises(ValueError, match="no function"):
        strategies.load("tapis_clients.strategies:missing")
    assert strategies.load("tapis_clients.strategies.corse:slap_or_flip") is \
        strategies.corse.slap_or_flip


async def test_a_plugged_in_strategy_plays_every_move(make_server: ServerFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    seen: list[int] = []
    cautious = strategies.load("cautious_strategy:choose")

    def spy(view: pb.GameView, legal: Sequence[pb.Action]) -> pb.Action | None:
        seen.append(len(legal))
        return cautious(view, legal)

    h = await make_server()
    conn = Connection(f"127.0.0.1:{h.running.port}")
    stats = bot.Stats()
    done = await bot.selfplay_one(conn, pb.GAME_KIND_BASRA, 2, 11, bot.BotStyle(), stats, spy,
                                  choose_deal=True)
    await conn.close()
    assert done and stats.errors == []
    assert len(seen) == stats.actions > 0


async def test_the_example_bot_plays_war_on_the_stubs_alone(make_server: ServerFactory) -> None:
    spec = importlib.util.spec_from_file_location("first_legal_bot",
                                                  EXAMPLES / "first_legal_bot.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    source = (EXAMPLES / "first_legal_bot.py").read_text()
    assert "tapis_clients" not in source and "tapis_service" not in source
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=3, request_id=uuid.uuid4().hex,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]))
    moves = await example.play(f"127.0.0.1:{h.running.port}", created.game.game_id)
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=created.game.game_id))).game
    assert view.status == pb.GAME_STATUS_GAME_OVER
    assert moves > 0
    assert "first_legal_bot" not in sys.modules


def test_reference_strategy_is_seeded() -> None:
    legal = [pb.Action(reclaim_seat=pb.ReclaimSeat()), strategies.corse.flip_action()]
    picks = [strategies.reference(pb.GAME_KIND_BASRA, random.Random(5))(pb.GameView(), legal)
             for _ in range(2)]
    assert picks[0] == picks[1]


async def test_the_corse_follower_keeps_the_servers_picture(make_server: ServerFactory) -> None:
    """Seat 0's table rebuilt from its stream alone equals its view from the server, action
    after action (flips, slaps true and false, challenges, piles won, eliminations)."""
    clock = ManualClock()
    h = await make_server(clock=clock)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=3, seed=12, seat_configs=person_seats(3),
        request_id=uuid.uuid4().hex))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id))).seat_token
              for _ in range(3)]

    async def view_of(seat: int) -> pb.GameView:
        return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                     metadata=auth(tokens[seat]))).game

    first = await view_of(0)
    follower = strategies.corse.CorseFollower(first)

    stream = h.stub.StreamEvents(pb.StreamEventsRequest(
        game_id=game_id, after_sequence=first.last_sequence), metadata=auth(tokens[0]))
    rng = random.Random(4)
    kinds = set()
    for _ in range(600):
        seat = rng.randrange(3)
        seen = await view_of(seat)
        legal = list(seen.legal_actions)
        if not legal:
            continue
        picked = strategies.corse.slap_or_flip(seen, legal)
        if rng.random() < 0.03:  # now and then a false slap
            picked = legal[-1]
        if picked is None:
            continue
        clock.advance(1000)  # the slap limiter's tokens come back
        await h.stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=picked), metadata=auth(tokens[seat]))
        truth = await view_of(0)
        while follower.last_sequence < truth.last_sequence:
            for event in (await stream.read()).events:
                follower.apply(event)
                kinds.add(event.bataille_corse.WhichOneof("event") or "")
        mine, real = follower.view.bataille_corse, truth.bataille_corse
        assert list(mine.pile_top) == list(real.pile_top)
        assert mine.pile_size == real.pile_size
        assert mine.HasField("top_sequence") == real.HasField("top_sequence")
        assert mine.top_sequence == real.top_sequence
        assert (mine.turn if mine.HasField("turn") else None) == \
            (real.turn if real.HasField("turn") else None)
        assert list(mine.deck_sizes) == list(real.deck_sizes)
        assert [s.status for s in mine.seats] == [s.status for s in real.seats]
        assert follower.version == truth.version
        if truth.status != pb.GAME_STATUS_IN_PROGRESS:
            assert follower.over and follower.legal_actions() == []
            break
        assert [a.SerializeToString() for a in follower.legal_actions()] == \
            [a.SerializeToString() for a in truth.legal_actions]
    stream.cancel()
    assert {"card_flipped", "pile_won", "false_slap", "challenge_started",
            "challenge_passed"} <= kinds
    assert truth.version > 200


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_selfplay_reports_progress_and_stops_cleanly_on_a_signal(
        make_server: ServerFactory, signum: int) -> None:
    h = await make_server()
    env = dict(os.environ)
    env.pop("TAPIS_TARGET", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapis_clients.bot", "selfplay", "--target",
        f"127.0.0.1:{h.running.port}", "--kind", "war", "--games", "5000",
        "--concurrency", "2", "--progress-every", "1", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, env=env)
    assert process.stderr is not None
    first = await asyncio.wait_for(process.stderr.readline(), 60)  # patience, not a condition
    assert first.startswith(b"selfplay: 1/5000 games done, "), first
    process.send_signal(signum)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 130, err
    assert b"Traceback" not in err
    lines = out.decode().splitlines()
    assert len(lines) == 1  # stdout: the summary alone
    summary = json.loads(lines[0])
    assert summary["interrupted"] is True
    assert 1 <= summary["finished"] < 5000
    assert summary["errors"] == 0


class EndingStream:
    """A connection whose event stream ends together with the game, before its end event
    reaches the bot (the stream closed as the game finished): the table itself says over."""

    def __init__(self, final: int) -> None:
        self.final = final
        self.views = 0
        self.stub = type("Stub", (), {"GetGame": "GetGame", "SubmitAction": "SubmitAction"})()

    async def call(self, method: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.views += 1
        status = pb.GAME_STATUS_IN_PROGRESS if self.views == 1 else self.final
        return pb.GetGameResponse(game=pb.GameView(
            kind=pb.GAME_KIND_WAR, status=status, version=self.views, your_seat=0,
            awaiting_seats=[1]))

    async def events(self, game_id: str, after: int = 0, token: str | None = None
                     ) -> Any:
        yield pb.Event(sequence=after + 1, version=2, awaiting_seats=[1])


@pytest.mark.parametrize(("final", "counted"), [(pb.GAME_STATUS_GAME_OVER, True),
                                                 (pb.GAME_STATUS_IN_PROGRESS, False)])
async def test_a_game_whose_stream_ends_with_it_is_counted_finished(final: int,
                                                                    counted: bool) -> None:
    conn = EndingStream(final)
    seat = bot.SeatBot(conn, "g", 0, "t", strategies.random_legal(random.Random(1)),  # type: ignore[arg-type]
                       random.Random(1), bot.BotStyle(), bot.Stats())
    assert await seat.play() is counted
    assert conn.views == 2  # it looked at the table once more before saying


class RewoundTable:
    """A table restored from an earlier copy while the bot follows it: its stream refuses the
    bot's cursor once (INVALID_CURSOR); read again, it is at version 3, and its game ends."""

    def __init__(self, refusals: int = 1) -> None:
        self.refusals = refusals
        self.afters: list[int] = []
        self.stub = type("Stub", (), {"GetGame": "GetGame", "SubmitAction": "SubmitAction"})()

    async def call(self, method: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        restored = len(self.afters) > 0
        return pb.GetGameResponse(game=pb.GameView(
            kind=pb.GAME_KIND_WAR, status=pb.GAME_STATUS_IN_PROGRESS, your_seat=0,
            version=3 if restored else 9, last_sequence=5 if restored else 12,
            awaiting_seats=[1]))

    async def events(self, game_id: str, after: int = 0, token: str | None = None
                     ) -> Any:
        self.afters.append(after)
        if len(self.afters) <= self.refusals:
            raise refusal(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CURSOR")
        yield pb.Event(sequence=after + 1, version=4, game_ended=pb.GameEnded())


async def test_a_table_restored_behind_the_bot_is_read_again_and_played_on() -> None:
    conn = RewoundTable()
    seat = bot.SeatBot(conn, "g", 0, "t", strategies.random_legal(random.Random(1)),  # type: ignore[arg-type]
                       random.Random(1), bot.BotStyle(), bot.Stats())
    assert await seat.play() is True
    assert conn.afters == [12, 5]  # streamed again from the table as it now is
    assert seat.version == 4  # the table's, not the higher one seen before the restore


async def test_a_table_that_refuses_every_cursor_is_a_fault_after_a_few_tries() -> None:
    conn = RewoundTable(refusals=10)
    seat = bot.SeatBot(conn, "g", 0, "t", strategies.random_legal(random.Random(1)),  # type: ignore[arg-type]
                       random.Random(1), bot.BotStyle(), bot.Stats())
    with pytest.raises(grpc.aio.AioRpcError):
        await seat.play()
    assert len(conn.afters) == bot.REWOUND_TRIES


async def test_selfplay_counts_each_refused_game_once(make_server: ServerFactory,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--choose-deal at a server that takes no chosen seed: every game is refused at its
    creation, one error each, the same count in the progress line and in the summary."""
    h = await make_server(allow_stacked_decks=False)
    args = bot.parse_args(["selfplay", "--target", f"127.0.0.1:{h.running.port}", "--kind",
                           "war", "--games", "3", "--choose-deal", "--seed", "5"])
    summary = await bot.selfplay(args)
    assert (summary["finished"], summary["errors"]) == (0, 3)
    err = capsys.readouterr().err
    assert "selfplay: 3/3 games done, 0 actions, 3 errors" in err, err
    assert err.count("SEED_CHOICE_DISABLED") == 3
