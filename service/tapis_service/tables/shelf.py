"""The finished tables' life on this server: the ones at rest (out of memory, kept by the
store with their ``ListGames`` line: resting.py), loading them back on demand, and the
retention that forgets the oldest finished ones — never one whose results its backend has not
acknowledged."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from tapis_service.door.limits import quote
from tapis_service.observe.errors import handled_elsewhere, not_found
from tapis_service.stores.store import StoreError, paced
from tapis_service.tables.healing import moved_refusal, quarantined_refusal, store_refusal
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.resting import restable
from tapis_service.tables.session import Session

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost

log = structlog.get_logger("tapis.host")


class Shelf:
    """Rests, wakes and retires the finished tables of a host."""

    def __init__(self, host: GameHost) -> None:
        self.host = host
        self._waking: dict[str, asyncio.Future[Session]] = {}
        self._used: set[str] = set()
        """Tables found since the last rest sweep (they stay in memory one more period)."""

    def used(self, game_id: str) -> None:
        """A call found the table: it stays in memory one more sweep."""
        self._used.add(game_id)

    def finished(self, keep: str | None = None) -> list[str]:
        """The finished tables (at rest and in memory) but ``keep``, oldest first."""
        tables = self.host.tables
        found = [(r.created_ms, gid) for gid, r in tables.resting_tables()]
        found.extend((s.created_ms, s.game_id) for s in tables.sessions()
                     if s.game_id != keep and s.table.game_over(s.rules))
        found.sort(key=lambda item: item[0])  # stable: ties keep the order above
        return [gid for _, gid in found]

    def enforce_retention(self, keep: str | None = None) -> None:
        """Drop (from memory and from the store) the oldest finished tables beyond the limit."""
        limit = self.host.settings.finished_retention
        if self.host.tables.count(TableState.LIVE, TableState.RESTING) <= limit:
            return
        finished = [gid for gid in self.finished(keep) if gid not in self.host.clerk.held]
        excess = len(finished) - limit + (1 if keep is not None else 0)
        for game_id in finished[:max(excess, 0)]:
            self.host.tables.drop(game_id)

    def make_room(self) -> None:
        """Make room: finished tables rest (when the store keeps them), else the oldest
        finished ones beyond the retention limit are dropped (at least one), never one whose
        results its backend has not acknowledged."""
        if self.host.rest_store is not None and self.rest_idle(force=True):
            return
        finished = [s.game_id for s in self.host.tables.sessions()
                    if s.table.game_over(s.rules) and s.game_id not in self.host.clerk.held]
        excess = max(len(finished) - self.host.settings.finished_retention, 1)
        for game_id in finished[:excess]:
            self.host.tables.drop(game_id)

    def rest_idle(self, force: bool = False) -> int:
        """Let every finished table that nobody used since the last sweep (``force``: even
        then) and that may rest leave memory; how many did."""
        if self.host.rest_store is None:
            return 0
        used, self._used = self._used, set()
        rested = 0
        for session in self.host.tables.sessions():
            game_id = session.game_id
            if (force or game_id not in used) and restable(session) \
                    and game_id not in self._waking:
                self.rest(session)
                rested += 1
        return rested

    def rest_if_done(self, session: Session) -> bool:
        """A finished table leaves memory at once when nothing keeps it there (``restable``:
        no open stream, nothing in flight, no timer): called once its last input commits, once
        its last stream ends, and at start for each table recovered finished. Whether it
        rested (never with a store that keeps no listing, nor while the server stops)."""
        host = self.host
        if host.rest_store is None or host.stopping \
                or host.tables.session(session.game_id) is not session or not restable(session):
            return False
        self.rest(session)
        return True

    async def start_recovered(self) -> int:
        """At start: arm each recovered table's timers and bots (one whose arming raises is
        quarantined alone); a finished one rests at once (no restart loads it again). How many
        rested."""
        host, rested = self.host, 0
        async for session in paced(host.tables.unarmed()):  # liveness answers
            # publish nothing yet, arm the timers and bots (``Tables.install(arm=False)``)
            if not host.healing.arm_or_quarantine(session):
                continue  # rested or dropped meanwhile (a bot's move ended its game), or
                # quarantined (arming it raised)
            if session.table.game_over(session.rules):
                rested += self.rest_if_done(session)
        return rested

    def answering(self, session: Session) -> Session:
        """The table a call answers from once its input committed: the one served, or
        ``session`` itself when it rested meanwhile (finished: its state is final); refused as
        ``GameHost.get`` otherwise."""
        current = self.host.tables.session(session.game_id)
        if current is not None:
            return current
        if self.host.tables.state_of(session.game_id) is TableState.RESTING:
            return session
        return self.host.get(session.game_id)

    def rest(self, session: Session) -> None:
        """The table leaves memory; the store keeps it with its listing (``Tables.rest``)."""
        self.host.tables.rest(session)

    async def wake(self, game_id: str) -> Session:
        """Load a resting table back (one load however many calls ask at once)."""
        waking = self._waking.get(game_id)
        if waking is None:
            waking = self._waking[game_id] = asyncio.ensure_future(self._load_resting(game_id))
            waking.add_done_callback(lambda _: self._waking.pop(game_id, None))
            waking.add_done_callback(handled_elsewhere)
        return await asyncio.shield(waking)

    async def _load_resting(self, game_id: str) -> Session:
        try:
            stored = await self.host.store.load_game(game_id)
        except StoreError as error:
            raise store_refusal(error) from error
        tables = self.host.tables
        if (held := tables.session(game_id)) is not None:
            return held
        resting = tables.resting(game_id)
        if resting is not None and stored is not None:  # still this server's at its epoch?
            try:
                owned = await self.host.confirm_owner(game_id, resting.epoch)
            except StoreError as error:
                raise store_refusal(error) from error
            if (held := tables.session(game_id)) is not None:
                return held
            if not owned:
                if tables.resting(game_id) is resting:
                    tables.unlist_resting(game_id)
                    for lost in self.host.lost_listeners:
                        lost(game_id)
                raise moved_refusal(game_id)
        resting = tables.resting(game_id)
        if resting is None or stored is None:  # dropped meanwhile
            tables.unlist_resting(game_id)
            raise not_found(f"no game {quote(game_id)} on this server")
        healing = self.host.healing
        restored = healing.restore_or_quarantine(game_id, stored)
        if restored is None:
            raise quarantined_refusal(game_id)
        # owned: confirmed above (a store that keeps it says so)
        session = healing.install_or_quarantine(restored, confirmed=True, epoch=resting.epoch,
                                                at_rest=True)
        if session is None:
            raise quarantined_refusal(game_id)
        self._used.add(game_id)
        log.info("game_woken", game=game_id, inputs=session.journal_length)
        return session

