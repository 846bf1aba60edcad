"""A step of the wall clock changes no duration: the server's clock is wall time at start
advanced by monotonic time. Here both are injected: a +2 h wall step (NTP, a resumed VM)
abandons nothing, expires nothing, refills no rate limit; the same two hours of monotonic time
do all three (so the test can fail)."""

from __future__ import annotations

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import SystemClock
from tests.support.calls import person_seats, reason_of
from tests.support.server import ServerFactory

TWO_HOURS_NS = 2 * 3600 * 1_000_000_000


async def refusal(call: object) -> tuple[str, str] | None:
    """(code name, reason) of an awaited call, or None if it was answered OK."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code().name, reason_of(error)
    return None


class Clocks:
    """An injected wall clock and monotonic clock, each stepped by hand."""

    def __init__(self) -> None:
        self.wall_ns = 1_700_000_000_000_000_000
        self.monotonic_ns = 5_000_000_000

    def system_clock(self) -> SystemClock:
        return SystemClock(wall_ns=lambda: self.wall_ns, monotonic_ns=lambda: self.monotonic_ns)


@pytest.mark.parametrize("step", ["wall", "monotonic"])
async def test_two_hours_count_only_on_the_monotonic_clock(make_server: ServerFactory,
                                                           step: str) -> None:
    clocks = Clocks()
    harness = await make_server(clock=clocks.system_clock(), unjoined_ttl_s=600,
                                abandon_after_s=3600, create_rate_per_s=1, create_burst=3)
    stub = harness.stub
    unjoined = (await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
    playing = (await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
    for seat in (0, 1):
        await stub.JoinGame(pb.JoinGameRequest(game_id=playing, seat=seat))
    await stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                               seat_configs=person_seats(2)))  # the burst: 3
    limited = await refusal(stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2))))
    assert limited == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")

    if step == "wall":
        clocks.wall_ns += TWO_HOURS_NS
    else:
        clocks.monotonic_ns += TWO_HOURS_NS
    housekeeping = harness.running.api.housekeeping  # type: ignore[union-attr]
    housekeeping.sweep()  # what its timer would run
    await housekeeping.drain()

    unjoined_answer = await refusal(stub.GetGame(pb.GetGameRequest(game_id=unjoined)))
    status = (await stub.GetGame(pb.GetGameRequest(game_id=playing))).game.status
    refill = await refusal(stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2))))
    if step == "wall":
        assert unjoined_answer is None  # still there
        assert status == pb.GAME_STATUS_IN_PROGRESS
        assert refill == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")
    else:
        assert unjoined_answer == ("NOT_FOUND", "GAME_NOT_FOUND")
        assert status == pb.GAME_STATUS_ABANDONED
        assert refill is None  # two hours refilled the bucket


def test_the_system_clock_follows_monotonic_time_from_a_wall_anchor() -> None:
    clocks = Clocks()
    clock = clocks.system_clock()
    start = clock.now_ms()
    assert start == clocks.wall_ns // 1_000_000
    clocks.wall_ns -= TWO_HOURS_NS  # a step back: no effect
    clocks.monotonic_ns += 1_500_000_000
    assert clock.now_ms() == start + 1_500
