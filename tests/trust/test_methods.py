"""Every method of the contract is served (none is left to the generated base class, which
would answer UNIMPLEMENTED without an ErrorInfo), on a single server and on a cluster node's
registration alike."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis_service.game_api import GameApi
from tapis_service.grpc.servicer import GameServicer, method_handlers
from tapis_service.observe.clock import ManualClock
from tapis_service.tables.host import GameHost
from tests.support.calls import person_seats
from tests.support.server import TEST_SETTINGS, Harness

METHODS = {m.name for m in pb.DESCRIPTOR.services_by_name["GameService"].methods}


def test_every_method_of_the_contract_is_served() -> None:
    api = GameApi(GameHost(TEST_SETTINGS, ManualClock()))
    assert set(method_handlers(GameServicer(api))) == METHODS


async def test_a_public_table_is_today_s_lobby(server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, visibility=pb.VISIBILITY_PUBLIC, seat_configs=person_seats(2)))
    listed = await server.stub.ListGames(pb.ListGamesRequest())
    assert [g.game_id for g in listed.games] == [created.game.game_id]
    assert not created.seat_tokens
