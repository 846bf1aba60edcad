"""A small driver over the generated stubs that rides out failovers: UNAVAILABLE (a node
down, a table moving: TABLE_MOVED) and DEADLINE_EXCEEDED are retried with the same request,
so a retried action is applied at most once (its request_id). Every acknowledged action is
remembered for the ledger check."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.codec.adapters import ADAPTERS
from tests.support.driver import Game, Pace, play
from tests.support.games import short_options

T = TypeVar("T")
RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
GIVE_UP_S = 30.0
CALL_TIMEOUT_S = 5.0
Table = Game
"""A table the drivers play: its id, kind, seat tokens and acknowledged actions."""


@dataclass
class Stats(Pace):
    """The drivers' pace (retried, bounded calls; players held back to ``allowed``) and what
    they met."""

    retries: int = 0
    errors: list[str] = field(default_factory=list)
    acks: int = 0
    allowed: float = float("inf")
    """Acknowledged actions (all tables) the drivers may reach before they wait: a chaos loop
    raises it step by step, so that the games cannot end before its disruptions do."""
    raised: asyncio.Event = field(default_factory=asyncio.Event)
    timeout: float | None = CALL_TIMEOUT_S

    def allow(self, more: float) -> None:
        self.allowed = self.acks + more
        self.raised.set()

    async def turn(self) -> None:
        while self.acks >= self.allowed:
            self.raised.clear()
            await self.raised.wait()

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        return await retrying(self, make)

    def acknowledged(self) -> None:
        self.acks += 1

    def failed(self, game: Game, error: grpc.aio.AioRpcError) -> None:
        self.errors.append(f"{game.kind} {error.code().name}: {error.details()}")


async def retrying(stats: Stats, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` until it is not refused with a retried code (bounded)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + GIVE_UP_S
    delay = 0.02
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRIED or loop.time() > give_up:
                raise
            stats.retries += 1
        await asyncio.sleep(delay)  # a backoff between retries, not a wait for a condition
        delay = min(delay * 2, 0.3)


async def new_table(stub: pb_grpc.GameServiceStub, stats: Stats, kind: str, seed: int,
                    players: int = 2) -> Table:
    created = await retrying(stats, lambda: stub.CreateGame(pb.CreateGameRequest(
        kind=ADAPTERS[kind].proto_kind, seats=players, seed=seed,  # type: ignore[arg-type]
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(players)],
        request_id=f"create-{kind}-{seed}", **short_options(kind)), timeout=CALL_TIMEOUT_S))
    game_id = created.game.game_id
    tokens = []
    for seat in range(players):
        joined = await retrying(stats, lambda seat=seat: stub.JoinGame(pb.JoinGameRequest(
            game_id=game_id, seat=seat, request_id=f"join-{game_id}-{seat}"),
            timeout=CALL_TIMEOUT_S))
        tokens.append(joined.seat_token)
    return Table(game_id, kind, tokens)


async def play_to_the_end(stub: pb_grpc.GameServiceStub, stats: Stats, table: Table,
                          rng: random.Random, max_actions: int = 5000) -> None:
    """Legal moves (picked by ``rng``) until the game is over or ``max_actions`` are acked."""
    await play(stub, table, rng, max_actions - len(table.acks), stats)


def ledger_problems(tables: list[Table],
                    journals: dict[str, list[tuple[int, dict[str, Any]]]]) -> list[str]:
    """Every acknowledged action is in its table's journal exactly once, in the order it was
    acknowledged; each journal is one unbroken line of indexes 1..n (no fork, no hole)."""
    problems = []
    for table in tables:
        journal = journals.get(table.game_id, [])
        if [index for index, _ in journal] != list(range(1, len(journal) + 1)):
            problems.append(f"{table.game_id}: journal indexes are not 1..{len(journal)}")
        positions: dict[str, list[int]] = {}
        for index, entry in journal:
            if entry.get("request_id"):
                positions.setdefault(entry["request_id"], []).append(index)
        order = []
        for ack in table.acks:
            found = positions.get(ack.request_id, [])
            if len(found) != 1:
                problems.append(f"{table.game_id}: {ack.request_id} is in the journal "
                                f"{len(found)} times")
            else:
                order.append(found[0])
        if order != sorted(order) or len(set(order)) != len(order):
            problems.append(f"{table.game_id}: acknowledged actions out of journal order")
        versions = [ack.version for ack in table.acks]
        if versions != sorted(set(versions)):
            problems.append(f"{table.game_id}: acknowledged versions do not rise")
    return problems
