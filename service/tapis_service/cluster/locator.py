"""Where a table is served: here, or at its owner's address — looked up in the directory and
cached; a table whose owner is dead or gone is taken over (the fencing epoch bumped) and
adopted from the database on the way.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import grpc
import structlog

from tapis_service.cluster import metrics
from tapis_service.cluster.directory import Directory
from tapis_service.errors import ServiceError
from tapis_service.host import GameHost

log = structlog.get_logger("tapis.cluster")

DATABASE_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
LOOKUPS = 3
"""Directory lookups for one call at most (each a takeover race lost to another node)."""


def table_moved(game_id: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                        f"game {game_id} is moving to another node; retry")


def database_away() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                        "the database cannot be reached; retry")


class Locator:
    """Finds (and, for an orphan, takes over) the node that serves each table."""

    def __init__(self, host: GameHost, directory: Directory, node_id: str,
                 ttl_s: float) -> None:
        self.host = host
        self.directory = directory
        self.node_id = node_id
        self.ttl_s = ttl_s
        self.leaving = False
        self._locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, tuple[str, float]] = {}
        """game id -> (its owner's address, until when that is trusted without a look in the
        directory: one TTL, so that a frozen owner whose connection stays open, a machine gone
        without a reset, is looked past once its membership expires)."""

    async def route(self, game_id: str, forwarded: bool) -> str | None:
        """Where a call for ``game_id`` is served: None here (or nowhere: the table is not
        found), else its owner's address. A call another node relayed (``forwarded``) is
        served here or refused TABLE_MOVED, never relayed again."""
        if game_id in self.host.sessions or not game_id:
            return None
        cached = self._routes.get(game_id)
        if cached is not None and not forwarded and cached[1] > time.monotonic():
            return cached[0]
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                return await self._look_up(game_id, forwarded)
        except DATABASE_ERRORS as error:
            log.warning("route_failed", game=game_id, error=str(error)[:200])
            raise database_away() from error
        finally:
            if not lock.locked():
                self._locks.pop(game_id, None)

    async def _look_up(self, game_id: str, forwarded: bool) -> str | None:
        for _ in range(LOOKUPS):
            if game_id in self.host.sessions:
                return None
            owner = await self.directory.owner_of(game_id)
            if owner is None:
                return None  # the service says GAME_NOT_FOUND
            if owner.node_id == self.node_id:
                if self.leaving:
                    raise table_moved(game_id)
                await self.adopt(game_id, owner.epoch, "")
                return None
            if owner.alive and owner.address:
                if forwarded:
                    raise table_moved(game_id)
                self._routes[game_id] = (owner.address, time.monotonic() + self.ttl_s)
                return owner.address
            if self.leaving:
                raise table_moved(game_id)
            epoch = await self.directory.take_over(game_id, owner.epoch)
            if epoch is not None:
                await self.adopt(game_id, epoch, "call")
                return None
        raise table_moved(game_id)  # every takeover race lost: the client retries

    def forget(self, game_id: str) -> None:
        """The cached owner did not answer, or the table moved: look it up afresh."""
        self._routes.pop(game_id, None)

    async def adopt(self, game_id: str, epoch: int, trigger: str) -> None:
        """Serve a table this node now owns at ``epoch`` (loaded from the database)."""
        session = await self.host.adopt(game_id, epoch)
        if session is not None and trigger:
            metrics.TAKEOVERS.labels(trigger).inc()
            log.info("table_taken_over", game=game_id, epoch=epoch, trigger=trigger)

    def lost(self, game_id: str) -> None:
        """Another node owns the table now (its append was refused)."""
        self.forget(game_id)
        metrics.TABLES_LOST.inc()
        log.info("table_lost_to_another_node", game=game_id)
