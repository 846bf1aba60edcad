"""The journal steps of a table's inputs (``TableWrites``, the table actor's base): an input's
entry, its write queued in the order the inputs were applied (with a snapshot when one is
due), and the wait for its commit; a refused write discards the table's session (healing)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_service.observe.errors import handled_elsewhere
from tapis_service.stores.store import COMMITTED, Store, StoreError
from tapis_service.tables.healing import store_refusal
from tapis_service.tables.recovery import snapshot_data
from tapis_service.tables.session import PendingRequest, Session
from tapis_service.tables.shielding import current_input
from tapis_service.tables.table_hooks import Committed

if TYPE_CHECKING:
    from tapis_service.settings import Settings
    from tapis_service.tables.lifecycle import Tables

NO_ENTRY: Final[dict[str, Any]] = {}
"""The journal entry handed to a store that keeps nothing (``MemoryStore``): never filled."""


class TableWrites:
    """Journals the inputs of the tables of a host (set by the table actor)."""

    store: Store
    tables: Tables
    settings: Settings
    keeps_journal: bool
    """False for a store that keeps nothing: each input is committed as it is applied."""
    committed: Committed

    def _entry(self, session: Session, move: tbl.Input, now: int) -> dict[str, Any]:
        """The journal entry of an input (none for a store that keeps nothing)."""
        if not self.keeps_journal:
            return NO_ENTRY
        return {"input": table_codec.encode_input(session.rules, move), "now_ms": now}

    async def _journal(self, session: Session, entry: dict[str, Any],
                       pending: PendingRequest | None = None) -> None:
        """Journal the input just applied and wait for the commit; ``pending``: the request
        under which a retry meanwhile waits for this task's answer."""
        write = self._queue(session, entry)
        if write is not COMMITTED:  # a store that keeps nothing: nothing to wait for
            await self._settle(session, write, pending)

    def _queue(self, session: Session, entry: dict[str, Any]) -> Awaitable[None]:
        """Queue the journal write of the input just applied (and a snapshot when one is
        due): the store commits a table's writes in the order they are queued."""
        if session.at_rest:  # loaded back from rest: a restart must load it from now on
            self.tables.woken_input(session)
        if not self.keeps_journal:  # nothing to write (``MemoryStore``): committed as it is
            if session.game_over():
                self.committed.finishing(session)
            return COMMITTED
        write = self.store.appended(session.game_id, session.journal_length, entry,
                                    session.epoch)
        self._checkpoint(session)
        return write

    async def _settle(self, session: Session, write: Awaitable[None],
                      pending: PendingRequest | None = None) -> None:
        """Wait for a journal write; a refused one discards the table's session (it is rebuilt
        from the store later) and is raised as the caller's refusal. ``pending``: the
        request under which a retry meanwhile waits for this task's answer."""
        if pending is not None:
            session.pending[pending] = current_input()
        session.writes.add(write)
        try:
            await write
        except StoreError as error:
            self.committed.write_failed(session, error)
            raise store_refusal(error) from error
        finally:
            session.writes.discard(write)
            if pending is not None:
                session.pending.pop(pending, None)

    def _checkpoint(self, session: Session) -> None:
        """Snapshot every N inputs and at game end (a store that keeps a journal); at game
        end, enforce the retention."""
        every = self.settings.snapshot_every
        finished = session.game_over()
        if finished or (every > 0 and session.journal_length % every == 0):
            written = self.store.snapshot(session.game_id, session.journal_length,
                                          snapshot_data(session), session.epoch)
            # a failed snapshot costs nothing: the journal has it all
            asyncio.ensure_future(written).add_done_callback(handled_elsewhere)
        if finished:
            self.committed.finishing(session)
