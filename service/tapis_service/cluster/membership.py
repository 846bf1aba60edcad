"""This node's membership: renewed every second (a lapsed one gives up the tables another
node took meanwhile), and the sweep that takes over the tables of dead or departed owners."""

from __future__ import annotations

import asyncio

import structlog

from tapis_service.cluster import metrics
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.locator import Locator
from tapis_service.host import GameHost

log = structlog.get_logger("tapis.cluster")

SWEEP_EVERY_S = 1.0
SWEEP_BATCH = 50


class Membership:
    """The heartbeat and the orphan sweep, as tasks of their own."""

    def __init__(self, host: GameHost, directory: Directory, locator: Locator,
                 ttl_s: float) -> None:
        self.host = host
        self.directory = directory
        self.locator = locator
        self.ttl_s = ttl_s
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._heartbeat()),
                       asyncio.ensure_future(self._sweep())]

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _heartbeat(self) -> None:
        every = min(1.0, self.ttl_s / 3)
        while True:
            await asyncio.sleep(every)
            try:
                if await self.directory.renew():
                    await self._recheck()
            except Exception as error:  # the database is away: writes fail on their own
                log.warning("heartbeat_failed", error=str(error)[:200])
            metrics.TABLES_OWNED.set(len(self.host.sessions))

    async def _recheck(self) -> None:
        """Our membership had lapsed (a pause, a partition): give up every table another
        node took meanwhile."""
        owned = await self.directory.owned()
        for game_id, session in list(self.host.sessions.items()):
            if owned.get(game_id) != session.epoch:
                self.host.discard(game_id)
                self.locator.lost(game_id)
        log.warning("membership_lapsed", kept=len(self.host.sessions))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                orphans = await self.directory.sweep_orphans(SWEEP_BATCH)
            except Exception as error:
                log.warning("sweep_failed", error=str(error)[:200])
                continue
            for game_id, epoch in orphans:
                try:
                    await self.locator.adopt(game_id, epoch, "sweep")
                except Exception as error:  # quarantined, or the database went away
                    log.warning("adopt_failed", game=game_id, error=str(error)[:200])
