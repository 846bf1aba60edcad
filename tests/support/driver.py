"""Drive games of any kind through the public API, remembering every acknowledged action."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.codec.adapters import ADAPTERS
from tests.support.calls import STREAM_DEADLINE_S, auth
from tests.support.server import Harness

T = TypeVar("T")
PLAYERS = 2
PASSED_OVER = (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION,
               grpc.StatusCode.RESOURCE_EXHAUSTED)
"""Refusals ``play`` looks again after: the table moved on, or a slap came too fast."""


@dataclass
class Ack:
    """An action the server answered: its request id, seat, and the version it produced."""

    game_id: str
    seat: int
    request_id: str
    request: pb.SubmitActionRequest
    version: int


@dataclass
class Game:
    """A table the test plays: its seat tokens, the actions answered OK, whether it is over."""

    game_id: str
    kind: str
    tokens: list[str]
    acks: list[Ack] = field(default_factory=list)
    finished: bool = False


class Pace:
    """How ``play`` makes its calls: here directly, each once. A cluster test's pace retries
    through failovers, bounds each call and holds the players back between actions."""

    timeout: float | None = None

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        return await make()

    async def turn(self) -> None:
        """Wait until the next action may be sent."""

    def acknowledged(self) -> None:
        """One more action answered OK."""

    def failed(self, game: Game, error: grpc.aio.AioRpcError) -> None:
        """An action refused for a reason ``play`` does not pass over (it raises next)."""


DIRECT = Pace()


async def start_game(stub: pb_grpc.GameServiceStub, kind: str, seed: int,
                     turn_time_ms: int = 0, **options: Any) -> Game:
    """A game of ``kind`` between two people, both seats taken (``options``: e.g. war=...)."""
    created = await stub.CreateGame(pb.CreateGameRequest(**options,
        kind=ADAPTERS[kind].proto_kind, seats=PLAYERS, seed=seed,  # type: ignore[arg-type]
        turn_time_limit_ms=turn_time_ms,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(PLAYERS)],
        request_id=f"create-{kind}-{seed}"))
    game_id = created.game.game_id
    tokens = []
    for seat in range(PLAYERS):
        joined = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat,
                                                        display_name=f"{kind}-{seat}"))
        tokens.append(joined.seat_token)
    return Game(game_id, kind, tokens, [])


async def play(stub: pb_grpc.GameServiceStub, game: Game, rng: random.Random,
               actions: int, pace: Pace = DIRECT) -> bool:
    """Make up to ``actions`` accepted moves (legal ones, picked by ``rng``); True once over."""
    made = 0
    players = len(game.tokens)
    while made < actions:
        spectator = (await pace.call(lambda: stub.GetGame(
            pb.GetGameRequest(game_id=game.game_id), timeout=pace.timeout))).game
        if spectator.status == pb.GAME_STATUS_GAME_OVER:
            game.finished = True
            return True
        seat = rng.choice(list(spectator.awaiting_seats) or list(range(players)))
        view = (await pace.call(lambda seat=seat: stub.GetGame(  # type: ignore[misc]
            pb.GetGameRequest(game_id=game.game_id), metadata=auth(game.tokens[seat]),
            timeout=pace.timeout))).game
        choices = [a for a in view.legal_actions
                   if a.WhichOneof("action") not in ("start_next_game", "reclaim_seat")]
        if not choices:
            continue
        await pace.turn()
        request = pb.SubmitActionRequest(
            game_id=game.game_id, action=rng.choice(choices),
            request_id=f"{game.game_id}-{len(game.acks)}-{rng.getrandbits(32):x}",
            expected_version=view.version)
        try:
            response = await pace.call(lambda seat=seat, request=request: stub.SubmitAction(
                request, metadata=auth(game.tokens[seat]),  # type: ignore[misc]
                timeout=pace.timeout))
        except grpc.aio.AioRpcError as error:
            if error.code() in PASSED_OVER:
                continue
            pace.failed(game, error)
            raise
        game.acks.append(Ack(game.game_id, seat, request.request_id, request,
                             response.version))
        pace.acknowledged()
        made += 1
    return False


async def all_events(stub: pb_grpc.GameServiceStub, game_id: str, after: int, until: int,
                     token: str | None = None) -> list[pb.Event]:
    """The events after ``after`` up to sequence ``until``, as the seat of ``token`` (None: a
    spectator) receives them."""
    out: list[pb.Event] = []
    if until <= after:
        return out
    stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id, after_sequence=after),
                               metadata=auth(token) if token else None, timeout=STREAM_DEADLINE_S)
    async for response in stream:
        out.extend(response.events)
        if response.events[-1].sequence >= until:
            stream.cancel()
            break
    return [e for e in out if e.sequence <= until]


async def play_to_end(h: Harness, game_id: str, tokens: list[str]) -> int:
    """Play a seated game to its end (random legal moves, seeded); the actions it took."""
    game = Game(game_id, "", tokens)
    while not await play(h.stub, game, random.Random(0), 1000):
        pass
    return len(game.acks)
