"""Stored tables that ``restore`` fails on with something other than a ``RecoveryError``: damage
nothing foresaw, and a bug met on one table only; and tables restored faithfully whose install
fails part way (``FailingInstall``). Whatever reads a table back (the start, an adoption, a
wake, the healer) must quarantine that table alone."""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

from tapis_service.observe.errors import ServiceError
from tapis_service.process import server
from tapis_service.stores.checksums import checksum
from tapis_service.stores.sqlite_store import FILE_NAME
from tapis_service.tables import recovery
from tapis_service.tables.host import GameHost
from tapis_service.tables.session import Session
from tests.support.tables import live_of

TOO_DEEP = "[" * 100_000 + "]" * 100_000
"""Valid JSON nested deeper than the decoder follows: ``json.loads`` raises RecursionError."""


def nest_snapshot_too_deep(data_dir: Path, game_id: str) -> None:
    """The snapshot of ``game_id`` becomes ``TOO_DEEP``, its checksum valid (written so by a
    faulty server): no ``RecoveryError`` names it, reading it raises RecursionError."""
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        changed = stored.execute("UPDATE snapshots SET data = ?, checksum = ? WHERE game_id = ?",
                                 (TOO_DEEP, checksum(TOO_DEEP), game_id)).rowcount
    stored.close()
    assert changed == 1, "the table has a snapshot"


def nest_journal_too_deep(data_dir: Path) -> str:
    """The last journal input of a stored table becomes ``TOO_DEEP`` (a row the store reads
    back before ``restore``: decoding it raises RecursionError); that table's id."""
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        game_id, index = stored.execute(
            "SELECT game_id, MAX(idx) FROM journal GROUP BY game_id LIMIT 1").fetchone()
        stored.execute("UPDATE journal SET entry = ? WHERE game_id = ? AND idx = ?",
                       (TOO_DEEP, game_id, index))
    stored.close()
    return str(game_id)


def fail_restoring(monkeypatch: pytest.MonkeyPatch, game_id: str) -> None:
    """Restoring ``game_id`` (and no other table) raises a RuntimeError: a bug met on it."""
    plain = recovery._restore

    def failing(restored_id: str, *stored: Any) -> recovery.Restored:
        if restored_id == game_id:
            raise RuntimeError("a bug met on this table only")
        return plain(restored_id, *stored)

    monkeypatch.setattr(recovery, "_restore", failing)


FAILED_INSTALL = "RuntimeError: a bug met installing this table only"
"""Why a table ``FailingInstall`` fails on is quarantined (as ``rebuild_failed`` words it)."""


class FailingInstall:
    """Installing one table (restored faithfully) raises a RuntimeError part way: once its bots
    and turn timers are armed (``after_arming``: the lifecycle's arm, which recovery defers
    until every table is loaded), else as the host is told of it read back (a restored
    listener, before arming). Set ``on`` a host, or ``at_start`` on every server's host."""

    def __init__(self, game_id: str, after_arming: bool) -> None:
        self.game_id = game_id
        self.after_arming = after_arming
        self.failed: list[Session] = []
        """The sessions whose install it failed."""
        self.armed: list[Any] = []
        """The timer handles they held when it failed."""

    def on(self, host: Any) -> None:
        if not self.after_arming:
            host.restored_listeners.append(self._fail)
            return
        plain = host.tables.arm

        def arm(session: Session) -> None:
            plain(session)
            self._fail(session)

        host.tables.arm = arm

    def at_start(self, monkeypatch: pytest.MonkeyPatch) -> None:
        plain = server.GameHost

        def host(*args: Any, **kwargs: Any) -> Any:
            made = plain(*args, **kwargs)
            self.on(made)
            return made

        monkeypatch.setattr(server, "GameHost", host)

    def _fail(self, session: Session) -> None:
        if session.game_id == self.game_id:
            self.failed.append(session)
            self.armed.extend([*session.deadline_timers.values(), *session.bot_timers.values()])
            raise RuntimeError("a bug met installing this table only")

    def assert_nothing_left(self, logs: list[MutableMapping[str, Any]]) -> None:
        """It failed once, logged with its traceback and quarantined; nothing of that install
        stays: no timer armed, no stream open (where the table is served or listed, the caller
        checks)."""
        assert [session.game_id for session in self.failed] == [self.game_id]
        session = self.failed[0]
        assert not session.deadline_timers and not session.bot_timers
        assert all(handle.cancelled for handle in self.armed)
        assert all(subscriber.closed for subscriber in session.subscribers)
        failed = [line for line in logs if line["event"] == "game_rebuild_failed"]
        assert [line["game"] for line in failed] == [self.game_id]
        assert isinstance(failed[0]["exc_info"], BaseException)  # the traceback, for the operator
        assert [line["game"] for line in logs if line["event"] == "game_quarantined"] == \
            [self.game_id]


async def adopt_each(a: GameHost, games: list[str], damaged: str) -> None:
    """As the sweep adopts the orphans, one by one: ``damaged`` is refused GAME_QUARANTINED,
    every other is served."""
    for game_id in games:
        if game_id == damaged:
            with pytest.raises(ServiceError) as refused:
                await a.adopt(game_id, 2)
            assert refused.value.reason == "GAME_QUARANTINED"
        else:
            assert await a.adopt(game_id, 2) is not None
    assert set(live_of(a)) == set(games) - {damaged}
