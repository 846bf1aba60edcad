"""A node adopting a table (``GameHost.adopt``: a takeover, the sweep of orphans) meets one that
``restore`` fails on with something that is no ``RecoveryError`` (damage nothing foresaw, or a
bug), or one whose install fails part way once restored. That table is quarantined alone
(refused GAME_QUARANTINED, its traceback logged) and the adoption of every other goes on, as at
start and in the healer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import structlog.testing

from tapis_engine import table as tbl
from tapis_engine.war import RULES as WAR
from tapis_engine.war import Reveal
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables.host import GameHost
from tapis_service.tables.ownership import Ownership
from tests.support.damage import (
    FAILED_INSTALL,
    FailingInstall,
    adopt_each,
    fail_restoring,
    nest_snapshot_too_deep,
)
from tests.support.server import TEST_SETTINGS
from tests.support.tables import quarantined_of

SETTINGS = replace(TEST_SETTINGS, abandon_after_s=0, unjoined_ttl_s=0, snapshot_every=3)


async def _three_tables_of_a_dead_node(store: SqliteStore, turn_time_ms: int = 0) -> list[str]:
    """Three War tables played past a snapshot by node B, which then dies."""
    b = GameHost(SETTINGS, ManualClock(), store)
    games = []
    for seed in (1, 2, 3):
        session = await b.create(kind="war", seats=2, seed=seed, turn_time_ms=turn_time_ms,
                                 bots=[None, None], options=WAR.default_options(),
                                 stacked_deck=None, stacked_first=None)
        for seat in (0, 1):
            await b.join(session.game_id, seat, f"p{seat}")
        for _ in range(2):  # a snapshot at input 3
            session = b.get(session.game_id)
            seat = next(iter(WAR.to_act(session.table.state)))
            await b.actor.submit(session, seat, tbl.Act(seat, Reveal()), "", None)
        games.append(session.game_id)
    await b.actor.settle()
    b.tables.stop()  # B dies
    return games


@pytest.mark.parametrize(("damage", "message"), [
    ("snapshot nested too deep", "RecursionError"),
    ("a bug restoring it", "RuntimeError: a bug met on this table only"),
])
async def test_a_table_adoption_cannot_restore_is_quarantined_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, message: str) -> None:
    store = SqliteStore(tmp_path, synchronous="OFF")
    games = await _three_tables_of_a_dead_node(store)
    damaged = games[1]
    if damage == "a bug restoring it":
        fail_restoring(monkeypatch, damaged)
    else:
        nest_snapshot_too_deep(tmp_path, damaged)
    a = GameHost(SETTINGS, ManualClock(), store)
    with structlog.testing.capture_logs() as logs:
        await adopt_each(a, games, damaged)
    for other in set(games) - {damaged}:
        assert a.get(other).epoch == 2
    kind, why, owner = quarantined_of(a)[damaged]
    assert kind == "war" and owner == Ownership() and message in why and damaged in why
    with pytest.raises(ServiceError) as refused:
        a.get(damaged)
    assert refused.value.reason == "GAME_QUARANTINED"
    failed = [line for line in logs if line["event"] == "game_rebuild_failed"]
    assert [line["game"] for line in failed] == [damaged]
    assert isinstance(failed[0]["exc_info"], BaseException)  # the traceback, for the operator
    assert [line["game"] for line in logs if line["event"] == "game_quarantined"] == [damaged]
    await a.close()
    store.close()


@pytest.mark.parametrize("after_arming", [False, True], ids=["told", "armed"])
async def test_a_table_whose_install_fails_on_adoption_is_quarantined_alone(
        tmp_path: Path, after_arming: bool) -> None:
    """Restored faithfully, its install raises part way (a hook run on a table read back, or
    its arming): quarantined, its turn timers cancelled, not listed as live; the others are
    adopted and served."""
    store = SqliteStore(tmp_path, synchronous="OFF")
    games = await _three_tables_of_a_dead_node(store, turn_time_ms=60_000)
    damaged = games[1]
    a = GameHost(SETTINGS, ManualClock(), store)
    failing = FailingInstall(damaged, after_arming)
    failing.on(a)
    with structlog.testing.capture_logs() as logs:
        await adopt_each(a, games, damaged)
    kind, why, owner = quarantined_of(a)[damaged]
    assert kind == "war" and owner == Ownership() and FAILED_INSTALL in why
    assert damaged not in a.lobby
    failing.assert_nothing_left(logs)
    assert bool(failing.armed) == after_arming
    for other in set(games) - {damaged}:
        assert a.get(other).deadline_timers  # armed, and served
    await a.close()
    store.close()
