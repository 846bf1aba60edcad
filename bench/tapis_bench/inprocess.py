"""Our own code's CPU per War action, without the transport: ``GameApi`` called in-process.

64 War tables (seeded: the same games every run, played to their end or for ``--seconds``),
both seats seated and both seats' ``StreamEvents`` open (as async generators
consumed in the same loop), ``--store memory`` settings. Each action is ``SubmitAction`` (the
awaited seat's reveal, with its token, a request id and the expected version) awaited on the
``GameApi`` itself, then the loop runs until both streams have taken their message. The figure is
this thread's CPU time (``time.thread_time``) over those steps, per action: the service logic, the
host, the engine, the conversion and the fan-out — everything of ours that ``server_cpu_ratio``
sets beside grpc's own work — with no profiler in the way. Choosing the seat is left out.

With ``--cold-kib N``, a buffer of N KiB is written (every 64th byte) before each action,
outside the timed window: the action then finds its objects and our bytecode out of the
caches, as it does in the server, where other tables' actions and grpc's work run in between
(the section "Where the last fifth is" in docs/performance.md's git history).

    python -m tapis_bench.inprocess [--seconds 3] [--cold-kib 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_service.codec.requests import read_submit_action
from tapis_service.door.caller import Caller
from tapis_service.game_api import GameApi
from tapis_service.observe.clock import SystemClock
from tapis_service.observe.errors import ServiceError
from tapis_service.settings import Settings
from tapis_service.tables.host import GameHost

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
GAMES = 64


def _never_cut(error: ServiceError) -> None:
    raise AssertionError(f"an in-process stream was cut: {error.message}")


class Tables:
    """``GAMES`` seeded War tables served in-process, both seats seated and streaming."""

    def __init__(self, cold_kib: int = 0) -> None:
        self._cold = bytearray(cold_kib * 1024)
        """Written before each action (outside the timed window) to evict the caches."""
        self._cold_line = bytes(len(self._cold[::64]))
        self.host = GameHost(Settings(create_rate_per_s=0, keyless_create_rate_per_s=0,
                                      join_rate_per_s=0, list_rate_per_s=0,
                                      keyless_max_tables=0,
                                      allow_stacked_decks=True),
                             SystemClock())
        self.api = GameApi(self.host)
        self.tables: list[tuple[str, list[Caller]]] = []
        self.received = 0
        self.readers: list[asyncio.Future[None]] = []
        self.request_id = 0

    async def open(self) -> None:
        api = self.api
        for number in range(GAMES):
            created = await api.create_game(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, seats=2, seed=1000 + number),
                Caller(peer="ipv4:10.0.0.1:1"))
            game_id = created.game.game_id
            seats = []
            for seat in range(2):
                joined = await api.join_game(
                    pb.JoinGameRequest(game_id=game_id, seat=seat),
                    Caller(peer="ipv4:127.0.0.1:40000"))
                peer = f"ipv4:127.0.0.1:{41000 + 2 * number + seat}"
                seats.append(Caller(seat_token=joined.seat_token, peer=peer))
            self.tables.append((game_id, seats))
        self.readers = [asyncio.ensure_future(self._consume(game_id, seat))
                        for game_id, seats in self.tables for seat in seats]
        await asyncio.sleep(0.05)

    async def _consume(self, game_id: str, caller: Caller) -> None:
        request = pb.StreamEventsRequest(game_id=game_id)
        async for _ in self.api.stream_events(request, caller, _never_cut):
            self.received += 1

    async def one_round(self) -> tuple[int, float]:
        """One action at each table still in play: (actions, this thread's CPU seconds over
        them, each from its call until both streams took its message)."""
        actions, cpu = 0, 0.0
        for game_id, seats in self.tables:
            session = self.host.tables.session(game_id)
            assert session is not None
            awaited = session.awaiting()
            if not awaited:
                continue
            self.request_id += 1
            request = read_submit_action(pb.SubmitActionRequest(
                game_id=game_id, action=REVEAL, request_id=f"r{self.request_id}",
                expected_version=session.table.version).SerializeToString())
            want = self.received + 2
            if self._cold:
                self._cold[::64] = self._cold_line  # one byte per cache line
            began = time.thread_time()
            await self.api.submit_action(request, seats[awaited[0]])
            while self.received < want:
                await asyncio.sleep(0)
            cpu += time.thread_time() - began
            actions += 1
        return actions, cpu

    def close(self) -> None:
        for reader in self.readers:
            reader.cancel()


async def _measure(seconds: float, cold_kib: int = 0) -> dict[str, Any]:
    tables = Tables(cold_kib)
    await tables.open()
    for _ in range(10):  # warm-up
        await tables.one_round()
    actions, cpu = 0, 0.0
    ends = time.perf_counter() + seconds
    while time.perf_counter() < ends:
        done, spent = await tables.one_round()
        if not done:
            break
        actions, cpu = actions + done, cpu + spent
    tables.close()
    return {"service_us_per_action": round(cpu / max(actions, 1) * 1e6, 1), "actions": actions}


def as_in_the_server() -> None:
    """Logging and the collector as the bench's servers run them (``--log-level warning``,
    ``gctune.tune()``)."""
    from tapis_service.process import gctune
    from tapis_service.process.main import configure_logging

    configure_logging("warning")
    gctune.tune()


def run(seconds: float, repeats: int = 3, cold_kib: int = 0) -> dict[str, Any]:
    """The lowest of ``repeats`` runs (each in a fresh loop and host): the least disturbed.
    Logging and the collector ``as_in_the_server``; ``cold_kib`` as ``--cold-kib``."""
    as_in_the_server()
    runs = [asyncio.run(_measure(seconds, cold_kib)) for _ in range(repeats)]
    best = min(runs, key=lambda r: r["service_us_per_action"])
    return {**best, "runs_us": [r["service_us_per_action"] for r in runs]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tapis_bench.inprocess", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cold-kib", type=int, default=0,
                        help="KiB written between two actions, to run each one cold")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.seconds, cold_kib=args.cold_kib)))


if __name__ == "__main__":
    main()
