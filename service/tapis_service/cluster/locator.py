"""Where a table is served: here, or at its owner's address — looked up in the directory and
cached; a table whose owner is dead or gone is taken over (the fencing epoch bumped) and
adopted from the database on the way.

This node answers for the tables it holds only while its ownership is confirmed: its
**lease** runs one TTL (less a margin) from the moment it last sent a membership renewal that
the database accepted, measured on a monotonic clock that keeps counting through a suspend.
No other node can take a table over before it has seen this node's heartbeat unchanged for a
whole TTL on its own clock, which started after that renewal was committed (``liveness``): by
then the lease has run out. A renewal that reads a count of tables taken from this node that
it has not seen (a pause, a partition; or a lost answer of the renewal before) first gives up
every table another node took. A call for a held table while the lease is out waits for a
renewal (the first such call starts one). A table is installed only once the database
confirms, after it is loaded, that its epoch is still this node's (a look taken after any
recheck seen meanwhile): a table taken over, and (through ``owns``, the host's
``confirm_owner``) one the healer rebuilds after a failed write or one woken from rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

import grpc
import structlog

from tapis_service.cluster import metrics
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.liveness import lease_clock
from tapis_service.observe import logrepeat
from tapis_service.observe.errors import ServiceError, handled_elsewhere
from tapis_service.stores.postgres_store import DATABASE_ERRORS as POSTGRES_ERRORS
from tapis_service.stores.store import StoreError, StoreUnavailable
from tapis_service.tables.host import GameHost
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.resting import RestingTable
from tapis_service.tables.streams import resume_at

log = structlog.get_logger("tapis.cluster")

DATABASE_ERRORS: tuple[type[Exception], ...] = (*POSTGRES_ERRORS, StoreError)
"""What a look in the database may raise when it is away (asyncpg's errors, and the store's
``StoreUnavailable`` when a table cannot be loaded): the call is answered ``UNAVAILABLE``."""
LOOKUPS = 3
"""Directory lookups for one call at most (each a takeover race lost to another node)."""
LEASE_SHARE = 0.9
"""The share of the TTL a renewal's lease runs (the rest: a margin for clock rates)."""



def table_moved(game_id: str, last: int | None = None) -> ServiceError:
    """The table moved to another node; a stream's end says where to resume (after
    ``last``)."""
    if last is None:
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                            f"game {game_id} is moving to another node; retry")
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                        f"game {game_id} is moving to another node; resume with "
                        f"after_sequence={last}", resume_at(last))


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
        self.lease_until = -math.inf
        """Until when (``lease_clock``) this node's ownership is confirmed."""
        self.renewed_at = -math.inf
        """When (``lease_clock``) the last renewal the database accepted was sent."""
        self._renewal: asyncio.Task[None] | None = None
        self._taken_seen: int | None = None
        """How many of this node's tables the database had counted taken over at the last
        renewal whose recheck completed (None: before the first)."""
        self._lapses = 0
        """How many rechecks began (a renewal read tables of ours taken over)."""
        self.moving = 0
        """Takeovers under way (a call's, a listing's, a sweep's): while any runs, a table this
        node owns in the database may not be loaded yet (its listing says partial)."""
        self._unconfirmed: set[str] = set()
        """Tables being adopted: installed, not yet confirmed at their epoch."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, tuple[str, float]] = {}
        """game id -> (its owner's address, until when that is trusted without a look in the
        directory: one TTL, so that a frozen owner whose connection stays open, a machine gone
        without a reset, is looked past once its membership expires)."""

    async def route(self, game_id: str, forwarded: bool) -> str | None:
        """Where a call for ``game_id`` is served: None here (or nowhere: the table is not
        found), else its owner's address. A call another node relayed (``forwarded``) is
        served here or refused TABLE_MOVED, never relayed again."""
        if not game_id:
            return None
        held = self.host.tables.session(game_id) is not None
        if held and game_id not in self._unconfirmed and self.confirmed():
            return None
        cached = None if held else self._routes.get(game_id)
        if cached is not None and not forwarded and cached[1] > time.monotonic():
            return cached[0]
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                await self.confirm()
                return await self._look_up(game_id, forwarded)
        except DATABASE_ERRORS as error:
            logrepeat.limited(log.warning, "route_failed", game=game_id,
                              error=f"{type(error).__name__}: {error}"[:200])
            raise database_away() from error
        finally:
            if not lock.locked():
                self._locks.pop(game_id, None)

    async def _look_up(self, game_id: str, forwarded: bool) -> str | None:
        for _ in range(LOOKUPS):
            if self.host.tables.session(game_id) is not None:
                return None
            owner = await self.directory.owner_of(game_id)
            if owner is None:
                return None  # the service says GAME_NOT_FOUND
            if owner.node_id == self.node_id:
                if self.leaving:
                    raise table_moved(game_id)
                if self.host.tables.unavailable(game_id) is not None:
                    # the healer rebuilds it (or gives it up)
                    return None
                await self._adopt(game_id, owner.epoch, "")
                return None
            if owner.alive and owner.address:
                if forwarded:
                    raise table_moved(game_id)
                self._routes[game_id] = (owner.address, time.monotonic() + self.ttl_s)
                return owner.address
            if self.leaving:
                raise table_moved(game_id)
            with self.taking_over():
                epoch = await self.directory.take_over(game_id, owner)
                if epoch is not None:
                    await self._adopt(game_id, epoch, "call")
                    return None
        raise table_moved(game_id)  # every takeover race lost: the client retries

    @contextlib.contextmanager
    def taking_over(self) -> Iterator[None]:
        """Counts a takeover under way in ``moving`` (from before the database is asked until
        the table is served or given up)."""
        self.moving += 1
        try:
            yield
        finally:
            self.moving -= 1

    def forget(self, game_id: str) -> None:
        """The cached owner did not answer, or the table moved: look it up afresh."""
        self._routes.pop(game_id, None)

    async def adopt(self, game_id: str, epoch: int, trigger: str) -> None:
        """Serve a table this node now owns at ``epoch`` (loaded from the database), once the
        database confirms the epoch is still this node's (else TABLE_MOVED)."""
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                await self._adopt(game_id, epoch, trigger)
        finally:
            if not lock.locked():
                self._locks.pop(game_id, None)

    async def adopt_resting(self, game_id: str, listing: dict[str, Any]) -> bool:
        """Take over an orphan at rest and hold it at rest (its listing only: a call loads
        it); False when its listing cannot be read (the caller loads it instead). A table
        that moved meanwhile is left to its owner."""
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                if self.host.tables.state_of(game_id) is not TableState.GONE:
                    return True
                try:
                    RestingTable.of(game_id, listing)
                except (KeyError, TypeError, ValueError):
                    return False
                owner = await self.directory.owner_of(game_id)
                if owner is None or (owner.alive and owner.node_id != self.node_id):
                    return True
                lapses = self._lapses
                with self.taking_over():
                    epoch = await self.directory.take_over(game_id, owner)
                    if epoch is not None and (lapses == self._lapses
                                              or await self._holds(game_id, epoch)):
                        self.host.tables.listed_at_rest(
                            game_id, RestingTable.of(game_id, listing, epoch))
                        metrics.TAKEOVERS.labels("list").inc()
                return True
        finally:
            if not lock.locked():
                self._locks.pop(game_id, None)

    async def _adopt(self, game_id: str, epoch: int, trigger: str) -> None:
        held = self.host.tables.session(game_id)
        if held is not None and held.epoch == epoch:
            return
        self._unconfirmed.add(game_id)
        try:
            session = await self.host.adopt(game_id, epoch)
            if session is None:
                return
            if not await self._holds(game_id, epoch) \
                    or self.host.tables.session(game_id) is not session:
                self.host.tables.discard(game_id)  # another node took it while it loaded
                self.lost(game_id)
                raise table_moved(game_id)
        except BaseException:
            if game_id in self._unconfirmed:
                self.host.tables.discard(game_id)
            raise
        finally:
            self._unconfirmed.discard(game_id)
        self.forget(game_id)
        if trigger:
            metrics.TAKEOVERS.labels(trigger).inc()
            log.info("table_taken_over", game=game_id, epoch=epoch, trigger=trigger)

    async def _holds(self, game_id: str, epoch: int) -> bool:
        """Whether the database says this node owns the table at ``epoch``, by a look taken
        after any lapse seen meanwhile (a lapse's recheck gives up what moved before it)."""
        while True:
            lapses = self._lapses
            if not await self.directory.holds(game_id, epoch):
                return False
            if lapses == self._lapses:
                return True

    async def owns(self, game_id: str, epoch: int) -> bool:
        """The host's owner check (``GameHost.confirm_owner``), asked before a table healed
        after a failed write or woken from rest is served again; ``StoreUnavailable`` when
        the database cannot say (the healer asks again later)."""
        try:
            return await self._holds(game_id, epoch)
        except POSTGRES_ERRORS as error:
            raise StoreUnavailable(f"ownership unconfirmed: {str(error)[:200]}") from error

    # --- the lease ---------------------------------------------------------------------------

    def confirmed(self) -> bool:
        """Whether this node's ownership of what it holds is confirmed now."""
        return lease_clock() < self.lease_until

    async def confirm(self) -> None:
        """Return once the lease runs (renewing it if it is out); STORE_UNAVAILABLE when the
        database does not confirm it within a TTL. A leaving node holds nothing and renews
        nothing (its membership is gone)."""
        if self.confirmed() or self.leaving:
            return
        try:
            async with asyncio.timeout(self.ttl_s):
                await asyncio.shield(self.renewal())
        except DATABASE_ERRORS as error:  # (a timeout among them)
            logrepeat.limited(log.warning, "lease_unconfirmed",
                              error=f"{type(error).__name__}: {error}"[:200])
            raise database_away() from error
        if not self.confirmed():  # a renewal slower than the lease it gives
            logrepeat.limited(log.warning, "lease_unconfirmed",
                              error=f"renewed {self.lease_age_s():.3f} s ago")
            raise database_away()

    def renewing(self) -> asyncio.Task[None] | None:
        """The membership renewal under way, if one is."""
        if self._renewal is None or self._renewal.done():
            return None
        return self._renewal

    def renewal(self) -> asyncio.Task[None]:
        """The membership renewal under way, or a new one."""
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.ensure_future(self._renew())
            self._renewal.add_done_callback(handled_elsewhere)
        return self._renewal

    async def _renew(self) -> None:
        sent = lease_clock()
        taken = await self.directory.renew()
        if taken != self._taken_seen:  # (a renewal whose answer was lost changes nothing)
            await self._recheck()
            self._taken_seen = taken
        self.renewed_at = sent
        self.lease_until = sent + self.ttl_s * LEASE_SHARE

    def lease_age_s(self) -> float:
        """Seconds since the last renewal the database accepted was sent."""
        return lease_clock() - self.renewed_at

    async def _recheck(self) -> None:
        """Another node took tables of ours (our heartbeat stopped for a TTL: a pause, a
        partition): give up every table it took (the renewal, just committed, is ordered after
        every takeover)."""
        self.lease_until = -math.inf
        self._lapses += 1
        host = self.host
        tables = host.tables
        if not tables.count(TableState.LIVE, TableState.RESTING, TableState.UNAVAILABLE):
            return  # (a first one too)
        owned = await self.directory.owned()
        for session in tables.sessions(TableState.LIVE):
            if owned.get(session.game_id) != session.epoch:
                tables.discard(session.game_id)
                self.lost(session.game_id)
        for session in tables.sessions(TableState.UNAVAILABLE):  # awaiting the healer
            if owned.get(session.game_id) != session.epoch:
                host.healing.lost(session)
        for game_id, table in tables.resting_tables():
            if owned.get(game_id) != table.epoch:
                tables.unlist_resting(game_id)
                self.lost(game_id)
        log.warning("membership_lapsed", kept=tables.count(TableState.LIVE))

    def lost(self, game_id: str) -> None:
        """Another node owns the table now (its append was refused)."""
        self.forget(game_id)
        metrics.TABLES_LOST.inc()
        log.info("table_lost_to_another_node", game=game_id)
