"""Drive games of any kind through the public API, remembering every acknowledged action."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.adapters import ADAPTERS

PLAYERS = 2


def auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


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
    game_id: str
    kind: str
    tokens: list[str]
    acks: list[Ack]


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
               actions: int) -> bool:
    """Make up to ``actions`` accepted moves (legal ones, picked by ``rng``); True once over."""
    made = 0
    while made < actions:
        spectator = (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))).game
        if spectator.status == pb.GAME_STATUS_GAME_OVER:
            return True
        seats = list(spectator.awaiting_seats) or list(range(PLAYERS))
        seat = rng.choice(seats)
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id),
                                   metadata=auth(game.tokens[seat]))).game
        choices = [a for a in view.legal_actions
                   if a.WhichOneof("action") not in ("start_next_game", "reclaim_seat")]
        if not choices:
            continue
        request = pb.SubmitActionRequest(
            game_id=game.game_id, action=rng.choice(choices),
            request_id=f"{game.game_id}-{len(game.acks)}-{rng.getrandbits(32):x}",
            expected_version=view.version)
        try:
            response = await stub.SubmitAction(request, metadata=auth(game.tokens[seat]))
        except grpc.aio.AioRpcError as error:
            if error.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION,
                                grpc.StatusCode.RESOURCE_EXHAUSTED):
                continue  # the table moved (or a slap came too fast): look again
            raise
        game.acks.append(Ack(game.game_id, seat, request.request_id, request,
                             response.version))
        made += 1
    return False


async def all_events(stub: pb_grpc.GameServiceStub, game_id: str, after: int,
                     until: int) -> list[pb.Event]:
    """The spectator's events after ``after`` up to sequence ``until``."""
    out: list[pb.Event] = []
    if until <= after:
        return out
    stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id, after_sequence=after))
    async for response in stream:
        out.extend(response.events)
        if response.events[-1].sequence >= until:
            stream.cancel()
            break
    return [e for e in out if e.sequence <= until]
