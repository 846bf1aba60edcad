"""Results nobody can erase: each backend's ledger of finished games and ended series.

A record is one ``tapis.v1.ResultRecord`` (its bytes, without the cursor), filed under its
backend with a key that makes filing it again harmless (``GAME_ID/game/N``,
``GAME_ID/series``): the host files a record after the game end is committed, and files again
whatever a crash may have cut short when it restores a table, so a record is never lost nor
doubled. Each backend's records get a rising cursor (the first is 1) in the order they are
filed; ``acknowledge(cursor)`` lets the ledger forget the records up to it. A record's key outlives
its acknowledgement until the table itself is forgotten (``forget_game``). A table with
records not yet acknowledged is *held*: retention, ``--max-games`` and nothing a stranger does
evicts it (``held_games``); a record not acknowledged within ``--results-max-age`` (7 days by
default) is dropped by the housekeeping sweep (``ResultsClerk.keep_ages``), with a log line
when it nears the limit and when it goes, and the metrics ``tapis_results_unacknowledged``,
``tapis_results_oldest_unacknowledged_seconds`` and ``tapis_results_expired_total``. A
record's age is wall-clock time: it is stamped with the server's clock when filed (the wall
clock at start advanced by the monotonic clock, ``clock.SystemClock``) and the stamp outlives
restarts, so time the server was down counts and a wall-clock step during a run does not.

Stores: ``MemoryResults`` (here), SQLite (``results_sqlite``) and PostgreSQL
(``results_postgres``, shared by a cluster's nodes). ``ResultsFeed`` wakes the streams
(WatchResults) waiting for a backend's next record.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

import structlog

log = structlog.get_logger("tapis.results")

BATCH = 64
"""Records sent per WatchResults message when catching up."""


class CursorAhead(ValueError):
    """An acknowledgement beyond the backend's last record."""


@dataclass(frozen=True, slots=True)
class Filed:
    """A record as the ledger holds it."""

    cursor: int
    game_id: str
    payload: bytes
    filed_ms: int


@dataclass(frozen=True, slots=True)
class Pending:
    """An unacknowledged record, as the age check sees it (no payload)."""

    backend: str
    cursor: int
    game_id: str
    filed_ms: int


@dataclass(frozen=True, slots=True)
class Unacknowledged:
    """The ledger's unacknowledged records, for the age check."""

    count: int
    oldest_ms: int | None
    """When the oldest was filed (None: there are none)."""
    near: list[Pending]
    """The oldest ones filed before the time asked, oldest first (at most the limit asked)."""


class ResultsStore(Protocol):
    """Where the ledger is kept. Every method commits before it returns."""

    async def file(self, backend: str, key: str, game_id: str, payload: bytes,
                   now_ms: int) -> int:
        """File a record (once per ``key``); its cursor (the first filing's on a repeat)."""
        ...

    async def after(self, backend: str, cursor: int, limit: int) -> list[Filed]:
        """The backend's records with a cursor above ``cursor`` (unacknowledged ones only),
        oldest first, at most ``limit``."""
        ...

    async def acknowledge(self, backend: str, cursor: int) -> int:
        """Forget the backend's records up to ``cursor``; the highest cursor acknowledged.
        ``CursorAhead`` beyond its last record."""
        ...

    async def held_games(self) -> set[str]:
        """Tables with records not yet acknowledged."""
        ...

    async def expire(self, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
        """Drop the records filed more than ``max_age_ms`` ago: their (backend, game id)."""
        ...

    async def unacknowledged(self, before_ms: int, limit: int) -> Unacknowledged:
        """How many records are unacknowledged, when the oldest was filed, and up to ``limit``
        of those filed before ``before_ms``."""
        ...

    async def forget_game(self, game_id: str) -> None:
        """The table is gone: forget its keys (a record once acknowledged keeps its key until
        then, so that restoring the table does not file it again)."""
        ...

    async def close(self) -> None: ...


@dataclass
class _Ledger:
    last: int = 0
    acknowledged: int = 0
    records: dict[int, tuple[str, Filed]] = field(default_factory=dict)
    """cursor -> (key, record), unacknowledged ones only."""
    keys: dict[str, tuple[str, int]] = field(default_factory=dict)
    """key -> (game id, cursor), acknowledged ones too."""


class MemoryResults:
    """The ledger in memory (the memory store's: nothing survives a restart)."""

    def __init__(self) -> None:
        self._ledgers: dict[str, _Ledger] = {}

    async def file(self, backend: str, key: str, game_id: str, payload: bytes,
                   now_ms: int) -> int:
        ledger = self._ledgers.setdefault(backend, _Ledger())
        known = ledger.keys.get(key)
        if known is not None:
            return known[1]
        ledger.last += 1
        ledger.keys[key] = (game_id, ledger.last)
        ledger.records[ledger.last] = (key, Filed(ledger.last, game_id, payload, now_ms))
        return ledger.last

    async def after(self, backend: str, cursor: int, limit: int) -> list[Filed]:
        ledger = self._ledgers.get(backend)
        if ledger is None:
            return []
        return [filed for c, (_, filed) in sorted(ledger.records.items()) if c > cursor][:limit]

    async def acknowledge(self, backend: str, cursor: int) -> int:
        ledger = self._ledgers.setdefault(backend, _Ledger())
        if cursor > ledger.last:
            raise CursorAhead(f"cursor {cursor} is beyond the last record ({ledger.last})")
        ledger.acknowledged = max(ledger.acknowledged, cursor)
        for c in [c for c in ledger.records if c <= ledger.acknowledged]:
            del ledger.records[c]
        return ledger.acknowledged

    async def held_games(self) -> set[str]:
        return {filed.game_id for ledger in self._ledgers.values()
                for _, filed in ledger.records.values()}

    async def expire(self, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
        dropped = []
        for backend, ledger in self._ledgers.items():
            for c, (_, filed) in list(ledger.records.items()):
                if now_ms - filed.filed_ms > max_age_ms:
                    del ledger.records[c]
                    dropped.append((backend, filed.game_id))
        return dropped

    async def unacknowledged(self, before_ms: int, limit: int) -> Unacknowledged:
        found = sorted((filed.filed_ms, filed.cursor, backend, filed.game_id)
                       for backend, ledger in self._ledgers.items()
                       for _, filed in ledger.records.values())
        near = [Pending(backend, cursor, game_id, filed_ms)
                for filed_ms, cursor, backend, game_id in found if filed_ms < before_ms]
        return Unacknowledged(len(found), found[0][0] if found else None, near[:limit])

    async def forget_game(self, game_id: str) -> None:
        for ledger in self._ledgers.values():
            for key in [k for k, (g, _) in ledger.keys.items() if g == game_id]:
                del ledger.keys[key]

    async def close(self) -> None:
        pass


class ResultsFeed:
    """The ledger and the streams that wait on it: ``file`` wakes the backend's watchers
    (``wake`` too, for a record another node filed)."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store
        self._arrivals: dict[str, asyncio.Event] = {}

    async def file(self, backend: str, key: str, game_id: str, payload: bytes,
                   now_ms: int) -> int:
        cursor = await self.store.file(backend, key, game_id, payload, now_ms)
        self.wake(backend)
        return cursor

    def wake(self, backend: str) -> None:
        event = self._arrivals.pop(backend, None)
        if event is not None:
            event.set()

    async def watch(self, backend: str, after: int) -> AsyncIterator[list[Filed]]:
        """The backend's records after ``after`` in batches: the missed ones, then each as it
        is filed. Runs until the caller stops iterating."""
        while True:
            arrival = self._arrivals.setdefault(backend, asyncio.Event())
            batch = await self.store.after(backend, after, BATCH)
            if batch:
                after = batch[-1].cursor
                yield batch
                continue
            await arrival.wait()

    async def acknowledge(self, backend: str, cursor: int) -> int:
        return await self.store.acknowledge(backend, cursor)

    async def expire(self, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
        """Drop the records too old to keep (a log line each): their (backend, game id)."""
        dropped = await self.store.expire(now_ms, max_age_ms)
        for backend, game_id in dropped:
            log.warning("result_expired", backend=backend, game=game_id,
                        max_age_s=max_age_ms // 1000)
        return dropped
