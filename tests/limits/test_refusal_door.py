"""The refusal budget is the door's (``door.Door.refused``): every transport tells the door of
every call it refused, so a stranger's bad-token flood cuts its address after the same budget
whatever carries it — gRPC or the WebSocket here, a call relayed through another cluster node in
``tests/cluster/test_refusal_budget.py`` — and a relayed call's refusal counts only where its
client is connected."""

from __future__ import annotations

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.caller import Caller
from tapis_service.door.connections import ConnectionLimits, RefusalBudget
from tapis_service.door.door import Door, Transport
from tapis_service.door.proxies import TrustedProxies
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tests.support.refusals import STRANGER, STRANGER_KEY, grpc_flood, socket_flood
from tests.support.server import ServerFactory

BUDGET = 4
BAD_TOKEN = ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "bad token")


async def _flood(make_server: ServerFactory, transport: str, stream: bool = False,
                 reasons: list[str] | None = None, **settings: object) -> None:
    """A server with a refusal budget of ``BUDGET`` (and ``settings``), a War table on it,
    and a stranger's bad-token flood over ``transport``, checked to be cut after the budget
    (``tests.support.refusals``)."""
    harness = await make_server(clock=ManualClock(), ws_port=0, refusal_burst=BUDGET,
                                refusal_rate_per_s=1.0, **settings)
    running = harness.running
    limits = running.connection_limits
    assert limits is not None and running.ws_port is not None
    game_id = (await harness.stub.CreateGame(
        pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))).game.game_id
    if transport == "grpc":
        await grpc_flood(running.port, game_id, limits, BUDGET, stream, reasons)
    else:
        await socket_flood(running.ws_port, game_id, limits, BUDGET, stream, reasons)


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("transport", ["grpc", "websocket"])
async def test_a_bad_token_flood_is_cut_after_the_same_budget_over_either_transport(
        make_server: ServerFactory, transport: str, stream: bool) -> None:
    """GetGame calls, or StreamEvents ones (refused as they open)."""
    await _flood(make_server, transport, stream, refusal_cooldown_s=60.0)


@pytest.mark.parametrize("transport", ["grpc", "websocket"])
async def test_the_rate_limit_s_answers_to_a_bad_token_flood_spend_the_budget_too(
        make_server: ServerFactory, transport: str) -> None:
    """Past the wrong-token limit a bad token is answered RATE_LIMITED, which still counts:
    the flood is cut after the same budget (else, the limit's burst below the budget's, it
    never would be)."""
    await _flood(make_server, transport,
                 reasons=["INVALID_TOKEN"] * 2 + ["RATE_LIMITED"] * (BUDGET - 2),
                 bad_token_burst=2)


def test_the_door_counts_every_transport_s_refusals_in_one_budget_and_never_a_relayed_one(
        ) -> None:
    clock = ManualClock()
    limits = ConnectionLimits(RefusalBudget(1.0, 3, 60_000, clock.now_ms),
                              TrustedProxies.parse("10.9.0.0/16"))
    door = Door(max_in_flight=8, limits=limits)
    stranger = Caller(seat_token="bad", peer=f"ipv4:{STRANGER}:1000")
    for _ in range(5):  # at the owner of a relayed call: counted where the client is
        door.refused(stranger.relayed(), BAD_TOKEN, Transport.RELAY)
    # behind a trusted proxy: counted against the proxy's connection, which is never cut
    door.refused(stranger, BAD_TOKEN, Transport.GRPC, "ipv4:10.9.0.1:2000")
    assert limits.budget.cooling_keys() == []
    door.refused(stranger, BAD_TOKEN, Transport.GRPC)
    door.refused(stranger, BAD_TOKEN, Transport.WEBSOCKET)
    door.refused(stranger, BAD_TOKEN, Transport.GRPC)
    assert not limits.budget.cooling(STRANGER_KEY)  # three over both: the whole budget
    door.refused(stranger, BAD_TOKEN, Transport.WEBSOCKET)
    assert limits.budget.cooling(STRANGER_KEY)

