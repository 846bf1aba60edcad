"""This node's membership: renewed three times per TTL (at most every second; the renewal is
the locator's lease: one that reads tables of ours taken over gives them up), every member's
heartbeat read after it (``liveness``) and the tunnels to nodes judged dead closed (their
waiting calls go elsewhere), and the sweep that takes over the tables of dead or departed
owners. Exported: the live members this node
sees (``tapis_cluster_members``, at each heartbeat) and its lease's age
(``tapis_cluster_lease_age_seconds``, at each scrape)."""

from __future__ import annotations

import asyncio

import structlog

from tapis_service.cluster import metrics
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.locator import Locator
from tapis_service.cluster.relay import Tunnels
from tapis_service.observe import logrepeat
from tapis_service.tables.host import GameHost
from tapis_service.tables.lifecycle import TableState

log = structlog.get_logger("tapis.cluster")

SWEEP_EVERY_S = 1.0
SWEEP_BATCH = 50


class Membership:
    """The heartbeat and the orphan sweep, as tasks of their own."""

    def __init__(self, host: GameHost, directory: Directory, locator: Locator,
                 tunnels: Tunnels, ttl_s: float) -> None:
        self.host = host
        self.directory = directory
        self.locator = locator
        self.tunnels = tunnels
        self.ttl_s = ttl_s
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        metrics.LEASE_AGE.set_function(self.locator.lease_age_s)  # read at each scrape
        self._tasks = [asyncio.ensure_future(self._heartbeat()),
                       asyncio.ensure_future(self._sweep())]

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def stopped(self) -> None:
        """Stop, and wait until nothing of the membership's can change the lease any more: its
        tasks ended, and a renewal under way (shielded: it outlives the stop) landed."""
        self.stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        renewing = self.locator.renewing()
        if renewing is not None:
            await asyncio.gather(renewing, return_exceptions=True)

    async def _heartbeat(self) -> None:
        every = min(1.0, self.ttl_s / 3)
        while True:
            await asyncio.sleep(every)
            try:
                # shielded: the stop cancels this task, never the renewal calls may share
                await asyncio.shield(self.locator.renewal())
                live = await self.directory.live_members()
                metrics.MEMBERS.set(self.directory.confirmed_members(live))
                if self.tunnels.addresses():
                    self.tunnels.close_others(set(live.values()))
            except Exception as error:  # the database is away: the lease runs out
                logrepeat.limited(log.warning, "heartbeat_failed", error=str(error)[:200])
            metrics.TABLES_OWNED.set(self.host.tables.count(TableState.LIVE))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:  # (index probes) so that a listing is partial only while there is some
                live = await self.directory.live_members()
                if not await self.directory.unlisted_owners(list(live), False):
                    continue
            except Exception as error:
                logrepeat.limited(log.warning, "sweep_failed", error=str(error)[:200])
                continue
            with self.locator.taking_over():  # owned in the database, not all loaded yet
                try:
                    orphans = await self.directory.sweep_orphans(SWEEP_BATCH)
                except Exception as error:
                    logrepeat.limited(log.warning, "sweep_failed", error=str(error)[:200])
                    continue
                for game_id, epoch in orphans:
                    try:
                        await self.locator.adopt(game_id, epoch, "sweep")
                    except Exception as error:  # quarantined, or the database went away
                        logrepeat.limited(log.warning, "adopt_failed", game=game_id,
                                          error=str(error)[:200])
