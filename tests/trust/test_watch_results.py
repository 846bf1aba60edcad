"""Results nobody can erase: WatchResults delivers every game end and series end of the calling
backend's tables once, in order, resumable with after_cursor; AckResults lets the server forget
them; a table with unacknowledged results survives retention and --max-games pressure; the
ledger survives a restart of a durable server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.support.calls import auth
from tests.support.tables import live_of
from tests.trust.door import (
    KEY_A,
    KEY_B,
    StartSecured,
    backend,
    door,
    play_war,
    refusal,
    war_request,
)


def series_request(length: int = 1, **fields: object) -> pb.CreateGameRequest:
    request = war_request(series_length=length, **fields)
    for seat, config in enumerate(request.seat_configs):
        config.player_id = f"u-{seat}"
    return request


async def finished_table(stub: pb_grpc.GameServiceStub, key: str = KEY_A) -> str:
    created = await stub.CreateGame(series_request(), metadata=backend(key))
    tokens = [t.seat_token for t in created.seat_tokens]
    await play_war(stub, created.game.game_id, tokens, metadata=auth(tokens[0]))
    return created.game.game_id


async def records(stub: pb_grpc.GameServiceStub, after: int, count: int,
                  key: str = KEY_A) -> list[pb.ResultRecord]:
    """The first ``count`` records after ``after`` (the stream is then closed)."""
    stream = stub.WatchResults(pb.WatchResultsRequest(after_cursor=after),
                               metadata=backend(key))
    found: list[pb.ResultRecord] = []
    async for response in stream:
        found.extend(response.records)
        if len(found) >= count:
            break
    stream.cancel()
    return found[:count]


async def test_every_result_once_in_order_and_resumable(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    first = await finished_table(stub)
    second = await finished_table(stub)
    got = await records(stub, 0, 4)
    assert [r.cursor for r in got] == [1, 2, 3, 4]
    assert [(r.game_id, r.WhichOneof("result")) for r in got] == [
        (first, "game_ended"), (first, "series_ended"),
        (second, "game_ended"), (second, "series_ended")]
    ended = got[0]
    assert ended.kind == pb.GAME_KIND_WAR and list(ended.player_ids) == ["u-0", "u-1"]
    assert ended.game_ended.game_number == 1 and ended.game_ended.summary.seed_commitment
    assert got[1].series_ended.reason == pb.SERIES_END_REASON_COMPLETED
    assert got[1].series_ended.scoreboard.games_played == 1
    assert [r.cursor for r in await records(stub, 2, 2)] == [3, 4]  # a reconnect resumes
    # another backend sees none of them; a call without a key is refused
    third = await finished_table(stub, KEY_B)
    assert [(r.cursor, r.game_id) for r in await records(stub, 0, 1, KEY_B)] == [(1, third)]
    with pytest.raises(grpc.aio.AioRpcError) as anonymous:
        async for _ in stub.WatchResults(pb.WatchResultsRequest()):
            pass
    assert refusal(anonymous.value) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")


async def test_a_live_watcher_receives_a_result_as_it_is_filed(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    watching = asyncio.ensure_future(records(stub, 0, 2))
    await asyncio.sleep(0)
    game_id = await finished_table(stub)
    got = await asyncio.wait_for(watching, timeout=30)
    assert [(r.cursor, r.game_id) for r in got] == [(1, game_id), (2, game_id)]


async def test_acknowledged_results_are_forgotten(tmp_path: Path,
                                                  start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    await finished_table(stub)
    game_id = await finished_table(stub)
    acked = await stub.AckResults(pb.AckResultsRequest(cursor=2), metadata=backend(KEY_A))
    assert acked.acknowledged_cursor == 2
    assert [(r.cursor, r.game_id) for r in await records(stub, 0, 2)] == [
        (3, game_id), (4, game_id)]
    with pytest.raises(grpc.aio.AioRpcError) as ahead:
        await stub.AckResults(pb.AckResultsRequest(cursor=5), metadata=backend(KEY_A))
    assert refusal(ahead.value) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CURSOR")
    with pytest.raises(grpc.aio.AioRpcError) as anonymous:
        await stub.AckResults(pb.AckResultsRequest(cursor=1))
    assert refusal(anonymous.value) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")


async def test_unacknowledged_results_keep_their_table_under_retention_pressure(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), finished_retention=1, max_games=4)
    stub, host = secured.stub, secured.running.host
    held = await finished_table(stub)
    others = [await finished_table(stub, KEY_B) for _ in range(3)]
    await stub.AckResults(pb.AckResultsRequest(cursor=6), metadata=backend(KEY_B))
    for _ in range(5):  # another key's finished tables push on --retention and --max-games
        others.append(await finished_table(stub, KEY_B))
        last = (await records(stub, 0, 2, KEY_B))[-1].cursor
        await stub.AckResults(pb.AckResultsRequest(cursor=last), metadata=backend(KEY_B))
    assert held in live_of(host)
    assert sum(game_id in live_of(host) for game_id in others) <= 3
    view = await stub.GetGame(pb.GetGameRequest(game_id=held), metadata=backend(KEY_A))
    assert view.game.status == pb.GAME_STATUS_SERIES_OVER
    await stub.AckResults(pb.AckResultsRequest(cursor=2), metadata=backend(KEY_A))
    await finished_table(stub, KEY_B)  # the next eviction may take it now
    assert held not in live_of(host)


async def test_the_ledger_survives_a_restart(tmp_path: Path,
                                             start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, store="sqlite", data_dir=data)
    game_id = await finished_table(first.stub)
    assert len(await records(first.stub, 0, 2)) == 2
    await first.stub.AckResults(pb.AckResultsRequest(cursor=1), metadata=backend(KEY_A))
    await first.channel.close()
    await first.running.stop(0)
    second = await start_secured(files, store="sqlite", data_dir=data)
    assert [(r.cursor, r.game_id) for r in await records(second.stub, 0, 1)] == [(2, game_id)]
    later = await finished_table(second.stub)
    assert [r.cursor for r in await records(second.stub, 2, 2)] == [3, 4]
    assert later in second.running.host.clerk.held


async def test_a_backend_ends_its_table_for_good(tmp_path: Path,
                                                 start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    secured = await start_secured(files, store="sqlite", data_dir=data)
    stub = secured.stub
    created = await stub.CreateGame(series_request(length=0), metadata=backend(KEY_A))
    game_id, tokens = created.game.game_id, [t.seat_token for t in created.seat_tokens]
    for key in (KEY_B, None):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.EndTable(pb.EndTableRequest(game_id=game_id),
                                metadata=backend(key) if key else None)
        assert refusal(refused.value)[1] in ("NOT_YOUR_TABLE", "API_KEY_REQUIRED")
    await play_war(stub, game_id, tokens, metadata=auth(tokens[0]))  # one game, then between
    ended = await stub.EndTable(pb.EndTableRequest(game_id=game_id), metadata=backend(KEY_A))
    assert ended.game.status == pb.GAME_STATUS_ABANDONED
    assert ended.game.abandon_reason == pb.ABANDON_REASON_ENDED_BY_BACKEND
    again = await stub.EndTable(pb.EndTableRequest(game_id=game_id), metadata=backend(KEY_A))
    assert again.game.version == ended.game.version  # ending it again changes nothing
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
            metadata=auth(tokens[0]))
    assert refusal(refused.value) == (grpc.StatusCode.FAILED_PRECONDITION, "GAME_ABANDONED")
    events = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(tokens[0]))
    last = None
    async for response in events:
        last = response.events[-1]
        if last.WhichOneof("body") == "game_abandoned":
            break
    events.cancel()
    assert last is not None
    assert last.game_abandoned.reason == pb.ABANDON_REASON_ENDED_BY_BACKEND
    got = await records(stub, 0, 2)
    assert got[1].series_ended.reason == pb.SERIES_END_REASON_ENDED_BY_BACKEND
    assert got[1].series_ended.scoreboard.games_played == 1
    await secured.channel.close()
    await secured.running.stop(0)
    restarted = await start_secured(files, store="sqlite", data_dir=data)
    view = (await restarted.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                         metadata=backend(KEY_A))).game
    assert view.abandon_reason == pb.ABANDON_REASON_ENDED_BY_BACKEND


async def test_unacknowledged_results_expire_after_their_time_limit(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """The housekeeping sweep, on the server's clock: a line past 80% of --results-max-age,
    then the records are dropped (a line each, the metrics) and their table is no longer
    held."""
    from prometheus_client import REGISTRY
    from structlog.testing import capture_logs

    from tapis_service.observe.clock import ManualClock

    secured = await start_secured(door(tmp_path), results_max_age_s=600)
    stub, running = secured.stub, secured.running
    clock = running.host.clock
    assert isinstance(clock, ManualClock)
    game_id = await finished_table(stub)
    assert game_id in running.host.clerk.held
    expired_before = REGISTRY.get_sample_value("tapis_results_expired_total") or 0.0
    with capture_logs() as logs:
        clock.advance(500_000)  # past 80% of 600 s
        await running.api.housekeeping.drain()
        assert REGISTRY.get_sample_value("tapis_results_unacknowledged") == 2
        assert REGISTRY.get_sample_value(
            "tapis_results_oldest_unacknowledged_seconds") == pytest.approx(500, abs=1)
        near = [line for line in logs if line["event"] == "results_near_expiry"]
        assert [(n["backend"], n["records"], n["oldest_game"]) for n in near] == [
            ("backend-a", 2, game_id)]
        assert game_id in running.host.clerk.held
        assert len(await records(stub, 0, 2)) == 2
        clock.advance(60_000)  # the next sweeps warn no more within the hour
        await running.api.housekeeping.drain()
        assert sum(line["event"] == "results_near_expiry" for line in logs) == 1
        clock.advance(60_000)  # 620 s: dropped
        await running.api.housekeeping.drain()
    assert [line["game"] for line in logs if line["event"] == "result_expired"] == [
        game_id, game_id]
    assert REGISTRY.get_sample_value("tapis_results_expired_total") == expired_before + 2
    assert REGISTRY.get_sample_value("tapis_results_unacknowledged") == 0
    assert game_id not in running.host.clerk.held
    later = await finished_table(stub)  # still delivered: the cursors go on
    assert [(r.cursor, r.game_id) for r in await records(stub, 0, 1)] == [(3, later)]


async def test_a_restored_backup_delivers_each_unacknowledged_result_once_and_no_other(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """The backup carries the results ledger (its cursors and acknowledgements) and every
    other file the server keeps: after a restore, the backend gets what it had not
    acknowledged, under the same cursors, and nothing it had."""
    from tapis_service.process import admin

    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, store="sqlite", data_dir=data)
    games = [await finished_table(first.stub) for _ in range(3)]
    before = await records(first.stub, 0, 6)
    await first.stub.AckResults(pb.AckResultsRequest(cursor=2), metadata=backend(KEY_A))
    manifest = await asyncio.to_thread(admin.backup, data, tmp_path / "backup")
    assert manifest["counts"]["unacknowledged"] == 4 and manifest["counts"]["results"] == 6
    await first.channel.close()
    await first.running.stop(0)
    kept = {path.name for path in data.iterdir()
            if path.name != "tapis.lock" and not path.name.endswith(("-wal", "-shm"))}
    assert kept <= set(manifest["files"]), kept - set(manifest["files"])

    admin.restore(tmp_path / "backup", tmp_path / "restored")
    report = admin.check(tmp_path / "restored")
    assert report["problems"] == [] and report["counts"]["unacknowledged"] == 4
    second = await start_secured(files, store="sqlite", data_dir=tmp_path / "restored")
    delivered = await records(second.stub, 0, 4)
    assert [(r.cursor, r.game_id) for r in delivered] == [
        (r.cursor, r.game_id) for r in before[2:]]
    assert delivered[0].game_id == games[1]
    later = await finished_table(second.stub)  # the next records follow: none came again
    assert [(r.cursor, r.game_id) for r in await records(second.stub, 6, 2)] == [
        (7, later), (8, later)]
