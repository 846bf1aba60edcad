"""The healer after an outage meets a table it cannot rebuild: the table is quarantined alone
(refused with GAME_QUARANTINED, with a log line), every other discarded table is rebuilt and
served, and the server reports the store available again. Neither a damaged record that the
engine refuses on replay (a ``RuleError``, not a ``RecoveryError``), nor an unexpected exception
while reading one table, nor an install that fails part way once the table is restored ends the
healing for good."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog.testing

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.stores.store import StoreUnavailable
from tapis_service.tables.lifecycle import TableState
from tests.support.calls import person_seats, reason_of
from tests.support.damage import FAILED_INSTALL, FailingInstall
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of, quarantined_of

WAIT_S = 20.0


async def _three_tables(make_server: ServerFactory, store: SqliteStore
                        ) -> tuple[Harness, list[str]]:
    h = await make_server(clock=ManualClock(), store=store, store_retry_ms=1,
                          probe_every_s=3600)
    games = []
    for seed in (1, 2, 3):
        created = await h.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seed=seed, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        for seat in (0, 1):
            await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat))
        games.append(game_id)
    return h, games


def _outage(h: Harness, games: list[str]) -> None:
    """Every table's write failed: each is discarded and awaits its rebuild."""
    host = h.host
    for game_id in games:
        host.healing.store_failed(live_of(host)[game_id], StoreUnavailable("outage"))
    assert host.tables.count(TableState.UNAVAILABLE) == len(games)


async def _healed(h: Harness) -> None:
    """Until the healer is done (bounded): it must end normally."""
    task = h.host.healing._task
    assert task is not None
    done, _ = await asyncio.wait([task], timeout=WAIT_S)
    assert done, "the healer still runs"
    assert task.exception() is None, f"the healer died: {task.exception()!r}"


async def _assert_quarantined_alone(h: Harness, games: list[str], damaged: str,
                                    logs: list[MutableMapping[str, Any]], why: str) -> None:
    host = h.host
    assert host.healing.store_healthy
    assert host.tables.count(TableState.UNAVAILABLE) == 0
    assert damaged in quarantined_of(host)
    assert why in quarantined_of(host)[damaged].why
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await h.stub.GetGame(pb.GetGameRequest(game_id=damaged))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == "GAME_QUARANTINED"
    for other in games:
        if other != damaged:
            assert other in live_of(host)
            view = (await h.stub.GetGame(pb.GetGameRequest(game_id=other))).game
            assert view.status == pb.GAME_STATUS_IN_PROGRESS
    quarantined = [line for line in logs if line["event"] == "game_quarantined"]
    assert [line["game"] for line in quarantined] == [damaged]


async def test_a_record_the_engine_refuses_on_rebuild_quarantines_that_table_alone(
        make_server: ServerFactory, tmp_path: Path) -> None:
    """The creation record of the middle table is damaged during the outage (its turn time
    negative: ``new_table`` raises a ``RuleError``)."""
    h, games = await _three_tables(make_server, SqliteStore(tmp_path, synchronous="OFF"))
    damaged = games[1]
    stored = sqlite3.connect(tmp_path / FILE_NAME)
    with stored:
        (text,) = stored.execute("SELECT record FROM games WHERE game_id = ?",
                                 (damaged,)).fetchone()
        record = json.loads(text)
        record["initial"]["turn_time_ms"] = -1
        stored.execute("UPDATE games SET record = ? WHERE game_id = ?",
                       (json.dumps(record), damaged))
    stored.close()
    with structlog.testing.capture_logs() as logs:
        _outage(h, games)
        await _healed(h)
    await _assert_quarantined_alone(h, games, damaged, logs, "negative")


async def test_an_unexpected_error_reading_one_table_quarantines_it_alone(
        make_server: ServerFactory, tmp_path: Path) -> None:
    """A failpoint on the store's read: reading the middle table back raises something that is
    neither a ``StoreError`` nor a ``RecoveryError``."""
    store = SqliteStore(tmp_path, synchronous="OFF")
    h, games = await _three_tables(make_server, store)
    damaged = games[1]
    plain_load = store.load_game

    async def load_game(game_id: str) -> Any:
        if game_id == damaged:
            raise RuntimeError("the failpoint's unexpected error")
        return await plain_load(game_id)

    store.load_game = load_game  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        _outage(h, games)
        await _healed(h)
    await _assert_quarantined_alone(h, games, damaged, logs, "RuntimeError")


@pytest.mark.parametrize("after_arming", [False, True], ids=["told", "armed"])
async def test_a_table_whose_install_fails_on_rebuild_is_quarantined_alone(
        make_server: ServerFactory, tmp_path: Path, after_arming: bool) -> None:
    """Restored faithfully, the middle table's install raises part way (a hook run on a table
    read back, or its arming): quarantined, not left live half-installed, and the stream that
    waited for its rebuild ends; the others are rebuilt."""
    h, games = await _three_tables(make_server, SqliteStore(tmp_path, synchronous="OFF"))
    damaged = games[1]
    waiting, _, _ = h.host.subscribe(live_of(h.host)[damaged], None, 0)
    failing = FailingInstall(damaged, after_arming)
    failing.on(h.host)
    with structlog.testing.capture_logs() as logs:
        _outage(h, games)
        await _healed(h)
    await _assert_quarantined_alone(h, games, damaged, logs, FAILED_INSTALL)
    assert waiting.closed
    assert damaged not in h.host.lobby
    failing.assert_nothing_left(logs)
