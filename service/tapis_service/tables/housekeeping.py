"""Housekeeping: finished tables rest, tables nobody joined expire, tables nobody plays end
as abandoned.

Each sweep first lets the finished tables nobody used since the previous sweep leave memory
(``Shelf.rest_idle``, resting.py: the store keeps them; the next call loads them back): those
a call loaded back, the others rest as their last input commits or their last stream ends. An
unfinished table stays in memory while it may still need its timers, bots or housekeeping: an
idle one is ended as abandoned (below), then rests like any finished table.

A sweep runs on the injected clock. A table still waiting for players where no person took a
seat is dropped (from memory and the store) ``unjoined_ttl_s`` after its creation. A table not
over where no person acted (joined, played, reclaimed a seat, started the next game) for
``abandon_after_s`` is ended with the ``Abandon`` input: journaled like any other input, so
the abandonment survives a restart and replays identically (the engine gets the time as an
input; it never reads a clock). The time of a person's last action is kept in memory: after a
restart every table's periods (both) start again from the start-up time, and a table read back
into memory otherwise (woken from rest, rebuilt after a failed write, adopted from another
node: ``GameHost.restored_listeners``) starts its idle period again then, so a table is never
dropped or ended sooner than the option says, whatever the wall clock did while the server was
down and whatever this server could not see (an outage, another node's players). Within a
process the clock is monotonic (``clock.SystemClock``): a step of the wall clock changes
nothing.

Each sweep also has the results ledger drop the records their backend has not acknowledged
within ``results_max_age_s`` (``ResultsClerk.keep_ages``). That age is the other kind: the
records are stored with their filing time, so it is wall-clock time that outlives restarts (the
same clock, whose values are wall time as of the start): a server down for a day counts that
day, and a step of the wall clock during a run still changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from tapis_service.observe.clock import TimerHandle
from tapis_service.settings import whole_ms
from tapis_service.tables.lifecycle import TableState

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost
    from tapis_service.tables.session import Session

log = structlog.get_logger("tapis.housekeeping")

MIN_PERIOD_MS = 1_000
MAX_PERIOD_MS = 60_000


class Housekeeping:
    """The sweep over the host's tables."""

    def __init__(self, host: GameHost) -> None:
        self.host = host
        settings = host.settings
        self.unjoined_ms = whole_ms(settings.unjoined_ttl_s)
        self.abandon_ms = whole_ms(settings.abandon_after_s)
        self.results_max_age_ms = whole_ms(settings.results_max_age_s)
        self.started_ms = host.clock.now_ms()
        self.last_person_ms: dict[str, int] = {}
        """By table: when a person last acted there, or when the table was last read back
        into memory (``restored``), whichever is later."""
        self._now_ms = host.clock.now_ms
        """The clock's reading, bound once (``touched``: every action)."""
        self._timer: TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._abandoning: set[str] = set()
        self._aging: asyncio.Task[None] | None = None
        self.expired = 0
        self.abandoned = 0
        host.restored_listeners.append(self.restored)

    @property
    def period_ms(self) -> int:
        wanted = [t for t in (self.unjoined_ms, self.abandon_ms, self.results_max_age_ms)
                  if t > 0]
        if not wanted:
            return MAX_PERIOD_MS if self.host.rest_store is not None else 0
        return max(MIN_PERIOD_MS, min(MAX_PERIOD_MS, min(wanted) // 10))

    def start(self) -> None:
        if self.period_ms:
            self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def touched(self, session: Session) -> None:
        """A person acted at this table (a join or an accepted action)."""
        self.last_person_ms[session.game_id] = self._now_ms()

    def restored(self, session: Session) -> None:
        """A table read back into memory: its idle period starts again now (when a person
        last acted there, on another node or before an outage, is not known here)."""
        game_id = session.game_id
        self.last_person_ms[game_id] = max(self.last_person_ms.get(game_id, 0), self._now_ms())

    def _arm(self) -> None:
        self._timer = self.host.clock.call_at(self.host.clock.now_ms() + self.period_ms,
                                              self.sweep)

    def sweep(self) -> None:
        """Let unused finished tables rest, drop expired tables and end abandoned ones; then
        arm the next sweep."""
        self._timer = None
        rested = self.host.shelf.rest_idle()
        if rested:
            log.info("tables_rested", tables=rested,
                     resting=self.host.tables.count(TableState.RESTING))
        now = self.host.clock.now_ms()
        if self.results_max_age_ms and self._aging is None:
            self._aging = asyncio.ensure_future(self._keep_result_ages())
            self._tasks.add(self._aging)
            self._aging.add_done_callback(self._tasks.discard)
        tables = self.host.tables
        for game_id in [g for g in self.last_person_ms if tables.session(g) is None]:
            del self.last_person_ms[game_id]
        for session in tables.sessions():
            game_id, table = session.game_id, session.table
            if table.game_over(session.rules):
                continue
            if self.unjoined_ms and not table.started \
                    and not any(s.claimed and s.bot is None for s in table.seats):
                # nobody joined: the unjoined rule's table, never abandoned (even with an
                # --abandon-after shorter than --unjoined-ttl)
                if now - max(session.created_ms, self.started_ms,
                             self.last_person_ms.get(game_id, 0)) >= self.unjoined_ms:
                    log.info("game_expired", game=game_id, reason="nobody joined")
                    self.host.tables.drop(game_id)
                    self.expired += 1
                continue
            if self.abandon_ms:
                last = max(self.last_person_ms.get(game_id, session.created_ms),
                           self.started_ms)
                if now - last >= self.abandon_ms and game_id not in self._abandoning:
                    self.abandoned += 1
                    self._abandoning.add(game_id)
                    task = asyncio.ensure_future(self._abandon(session))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        self._arm()

    async def _keep_result_ages(self) -> None:
        try:
            await self.host.clerk.keep_ages(self.host.clock.now_ms(), self.results_max_age_ms)
        except Exception as error:  # the store is away: the next sweep tries again
            log.warning("results_age_check_failed", error=repr(error)[:200])
        finally:
            self._aging = None

    async def _abandon(self, session: Session) -> None:
        try:
            await self.host.abandon(session)
        finally:
            self._abandoning.discard(session.game_id)

    def statuses(self) -> list[str]:
        """Each table's status for the metrics (``waiting``, ``live``, ``finished``); read from
        the exporter's thread, over a copy of the tables."""
        found = []
        for session in self.host.tables.sessions():
            table = session.table
            found.append("finished" if table.game_over(session.rules)
                         else "live" if table.started else "waiting")
        found.extend(["resting"] * self.host.tables.count(TableState.RESTING))
        return found

    async def drain(self) -> None:
        """Wait for the abandonments in progress (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
