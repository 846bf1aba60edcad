"""A table whose write failed waits for its rebuild: until then a retried write (the same request
id) cannot be told "nothing was kept", since the failed write may have been an earlier attempt
of it; a read, or a write without a request id, is simply unavailable. The single-node path and
the cluster's (tests/cluster/test_in_doubt.py) answer alike."""

from __future__ import annotations

from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import CommitUnknown, StoreUnavailable
from tests.support.calls import person_seats, refusal
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of


async def _war_table(make_server: ServerFactory, tmp_path: Path) -> tuple[Harness, str]:
    """A server on SQLite whose failed writes wait for a rebuild (the test makes it), and a
    War table for two people on it: the server and the table's id."""
    store = SqliteStore(tmp_path, synchronous="OFF")
    h = await make_server(clock=ManualClock(), store=store, store_retry_ms=600_000)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seed=5, seat_configs=person_seats(2)))
    return h, created.game.game_id


async def test_a_retried_write_for_a_table_awaiting_its_rebuild_is_in_doubt(
        make_server: ServerFactory, tmp_path: Path) -> None:
    h, game_id = await _war_table(make_server, tmp_path)
    join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
    joined = await h.stub.JoinGame(join)
    host = h.host
    host.healing.store_failed(live_of(host)[game_id], StoreUnavailable("outage"))

    code, reason, _ = await refusal(h.stub.JoinGame(join))
    assert (code, reason) == ("UNAVAILABLE", "COMMIT_UNKNOWN")
    code, reason, _ = await refusal(h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id)))
    assert (code, reason) == ("UNAVAILABLE", "STORE_UNAVAILABLE")  # this one: nothing kept
    unseen = pb.JoinGameRequest(game_id=game_id, request_id="join-2")  # never committed, and
    code, reason, _ = await refusal(h.stub.JoinGame(unseen))  # the failed write was not in
    assert (code, reason) == ("UNAVAILABLE", "STORE_UNAVAILABLE")  # doubt: nothing was kept
    code, reason, _ = await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=game_id)))
    assert (code, reason) == ("UNAVAILABLE", "STORE_UNAVAILABLE")

    host.healing.stop()
    await host.healing._rebuild(game_id)  # the store commits again
    assert await h.stub.JoinGame(join) == joined  # the retry finds its first answer


async def test_after_a_write_in_doubt_every_retried_write_is_in_doubt(
        make_server: ServerFactory, tmp_path: Path) -> None:
    h, game_id = await _war_table(make_server, tmp_path)
    host = h.host
    host.healing.store_failed(live_of(host)[game_id], CommitUnknown("the COMMIT's fsync"))
    join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
    code, reason, _ = await refusal(h.stub.JoinGame(join))  # the failed write may be this one
    assert (code, reason) == ("UNAVAILABLE", "COMMIT_UNKNOWN")
    host.healing.stop()
    await host.healing._rebuild(game_id)
    assert (await h.stub.JoinGame(join)).seat in (0, 1)  # it was not: applied now, once
