"""Health: liveness apart from readiness.

- ``liveness`` is SERVING while the process can answer at all: the health service runs on the
  event loop, so a stuck loop answers nothing and the probe times out. It never follows the
  store (Kubernetes restarts a pod whose liveness fails; a database outage is no reason).
- Readiness, ``""`` and ``tapis.v1.GameService``, follows the store: NOT_SERVING while a write
  has failed and not yet been healed (the host's ``health_listeners``), or while the store's
  own probe (a real write, every ``PROBE_EVERY_S``) fails or takes longer than that; also
  NOT_SERVING while the server starts (the store opens, recovery runs).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import structlog
from grpc_health.v1 import health, health_pb2

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe import logrepeat, metrics

LIVENESS = "liveness"
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GameService"].full_name
READINESS = ("", SERVICE_NAME)
PROBE_EVERY_S = 3.0
"""How often readiness probes the store (a write of its own, not a read: a full disk refuses
it)."""

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

log = structlog.get_logger("tapis.health")


async def new_health(ready: bool = False) -> health.aio.HealthServicer:
    """A health service: ``liveness`` SERVING, readiness as told."""
    servicer = health.aio.HealthServicer()
    await servicer.set(LIVENESS, SERVING)
    for name in READINESS:
        await servicer.set(name, SERVING if ready else NOT_SERVING)
    metrics.READY.set(1 if ready else 0)
    return servicer


class Readiness:
    """Sets readiness from the host's writes and a periodic probe of the store."""

    def __init__(self, servicer: health.aio.HealthServicer, store: Any,
                 every_s: float = PROBE_EVERY_S) -> None:
        self.servicer = servicer
        self.store = store
        self.every_s = every_s
        self.writes_ok = True
        self.probe_ok = True
        self.ready: bool | None = None
        self._commits = 0
        self._task: asyncio.Task[None] | None = None
        self._reports: set[asyncio.Task[None]] = set()

    def writes(self, ok: bool) -> None:
        """The host's health listener: False when a write fails, True once the store commits
        again."""
        self.writes_ok = ok
        if ok:  # a write committed: as good as a probe (and newer than one in progress)
            self.probe_ok = True
            self._commits += 1
        self._report()

    def start(self) -> None:
        self._report()
        if self._task is None and self.every_s > 0:
            self._task = asyncio.create_task(self._probe_periodically())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def probe(self) -> bool:
        """One probe of the store: whether a write of its own commits within ``every_s``."""
        try:
            result = self.store.probe()
            if inspect.isawaitable(result):
                await asyncio.wait_for(asyncio.shield(result), self.every_s)
        except Exception as error:  # any failure: not ready (the reason is logged, rarely)
            metrics.STORE_PROBE_FAILURES.inc()
            logrepeat.WARNINGS.log("store_probe_failed", log.warning, "store_probe_failed",
                                   error=f"{type(error).__name__}: {error}")
            return False
        return True

    async def _probe_periodically(self) -> None:
        while True:
            commits = self._commits
            probe_ok = await self.probe()
            if commits == self._commits:  # no write committed meanwhile (that would be newer)
                self.probe_ok = probe_ok
                self._report()
            await asyncio.sleep(self.every_s)

    def _report(self) -> None:
        ready = self.writes_ok and self.probe_ok
        if ready == self.ready:
            return
        self.ready = ready
        metrics.READY.set(1 if ready else 0)
        log.info("readiness", ready=ready)
        task = asyncio.ensure_future(self._set(SERVING if ready else NOT_SERVING))
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)

    async def _set(self, status: Any) -> None:
        for name in READINESS:
            await self.servicer.set(name, status)
