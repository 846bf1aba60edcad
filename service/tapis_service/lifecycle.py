"""A table's life on this server: its states, the transitions allowed between them, and what
each transition does. Every change of a table's state happens here (``tests/test_layout.py``
checks that no other module writes the maps below).

The states (``TableState``) and the transitions between them (``Tables`` methods)::

    GONE ──begin──▶ CREATING ──created──▶ LIVE   (not_created: to GONE; in doubt, UNAVAILABLE)
    GONE, RESTING, UNAVAILABLE, QUARANTINED ──install──▶ LIVE   (recovery, wake, rebuild, adopt)
    GONE ──listed_at_rest──▶ RESTING ◀──rest── LIVE    (a finished table nothing keeps in memory)
    LIVE ──failed──▶ UNAVAILABLE ──give_up──▶ GONE      (a write failed; not rebuilt)
    LIVE ──discard──▶ GONE ◀──unlist_resting── RESTING  (dropped, moved or lost, handed off)
    GONE, RESTING, UNAVAILABLE ──quarantine──▶ QUARANTINED  (stored but damaged)

``GONE`` is no entry at all: a table this server does not hold. What each transition does is
declared in ``TRANSITIONS`` and done by the one ``Tables`` method that makes it: the turn
and bot timers (cancelled when a table leaves memory; armed by ``arm``, the table actor's
``after_change``, when it enters it; the unjoined TTL and the abandon are housekeeping's
sweeps over the live map), the ``ListGames`` line (``lobby``), the seat
tokens, the open streams (ended, or kept for a rebuild), the store's rest listing and drop.
Ownership is confirmed by the caller (``host.confirm_owner``, awaited) before an install from
rest, a rebuild or an adoption: those transitions are declared to require it.

Lookups are plain dict gets on the per-state maps (``live``, ``resting``, ``unavailable``,
``quarantined``): together they are the one map of the tables this server holds, each table
in exactly one of them, and only this module writes them.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from tapis_service import metrics
from tapis_service.healing import Quarantined
from tapis_service.lobby import Lobby
from tapis_service.resting import RestingTable, listing_of
from tapis_service.session import Session
from tapis_service.store import RestingStore, Store
from tapis_service.tokens import SeatTokens

if TYPE_CHECKING:
    from tapis_service.recovery import Restored


class TableState(enum.Enum):
    """Where a table is in its life on this server."""

    CREATING = "creating"
    """Its creation record is being written: not served yet, counted against ``max_games``."""
    LIVE = "live"
    """In memory and served."""
    RESTING = "resting"
    """Finished and out of memory: the store keeps it with its ``ListGames`` line."""
    UNAVAILABLE = "unavailable"
    """Its last write failed: its session is discarded (its streams wait on it) until the
    healer rebuilds it from the store (``healing``)."""
    QUARANTINED = "quarantined"
    """Stored but not restorable faithfully: kept untouched, listed, refused."""
    GONE = "gone"
    """Not held here: never was, dropped, or moved or lost to another node."""


class Effects(NamedTuple):
    """What a transition does, declared once (``TRANSITIONS``)."""

    timers: str
    """The table's timers (turn limit, bots, unjoined TTL and abandon by housekeeping,
    presence): "arm", "cancel" or "-"."""
    listing: str
    """Its ``ListGames`` line: "live", "rest", "remove" or "-"."""
    streams: str
    """Its open event streams: "end", "keep" or "-"."""
    ownership: bool
    """Whether the caller confirmed (``host.confirm_owner``) that this server owns the table
    at its epoch before the transition."""


S = TableState
TRANSITIONS: dict[tuple[TableState, TableState], Effects] = {
    (S.GONE, S.CREATING): Effects("-", "-", "-", False),
    (S.CREATING, S.LIVE): Effects("arm", "live", "-", False),
    (S.CREATING, S.UNAVAILABLE): Effects("-", "-", "-", False),
    (S.CREATING, S.GONE): Effects("-", "-", "-", False),
    (S.GONE, S.LIVE): Effects("arm", "live", "-", True),  # recovery (by its lease), adoption
    (S.GONE, S.RESTING): Effects("-", "rest", "-", False),  # recovery: listed from the store
    (S.RESTING, S.LIVE): Effects("arm", "live", "-", True),  # woken (or adopted)
    (S.UNAVAILABLE, S.LIVE): Effects("arm", "live", "keep", True),  # rebuilt
    (S.QUARANTINED, S.LIVE): Effects("arm", "live", "-", True),  # adopted, restorable now
    (S.LIVE, S.RESTING): Effects("cancel", "rest", "-", False),
    (S.LIVE, S.UNAVAILABLE): Effects("cancel", "remove", "keep", False),
    (S.LIVE, S.GONE): Effects("cancel", "remove", "end", False),  # dropped, moved or lost
    (S.RESTING, S.GONE): Effects("-", "remove", "-", False),  # dropped, moved or handed off
    (S.UNAVAILABLE, S.GONE): Effects("-", "-", "end", False),  # given up (lost, not stored)
    (S.GONE, S.QUARANTINED): Effects("-", "remove", "-", False),
    (S.RESTING, S.QUARANTINED): Effects("-", "remove", "-", False),
    (S.UNAVAILABLE, S.QUARANTINED): Effects("-", "-", "end", False),
    (S.QUARANTINED, S.QUARANTINED): Effects("-", "-", "-", False),  # damaged again
}
"""The allowed transitions and their effects; any other is a bug (``TransitionError``)."""


class TransitionError(RuntimeError):
    """A transition ``TRANSITIONS`` does not allow (a bug)."""


class Tables:
    """The tables of one host, each in one state, and every transition between states."""

    def __init__(self, lobby: Lobby, tokens: SeatTokens, store: Store,
                 arm: Callable[[Session], None], restored: Callable[[Session], None]) -> None:
        self.lobby = lobby
        self.tokens = tokens
        self.store = store
        self.rest_store = store if isinstance(store, RestingStore) else None
        self.arm = arm
        """Arms the bots and timers a live table calls for (the table actor's
        ``after_change``)."""
        self.restored = restored
        """Told each table restored from the store (the results clerk files what it owes)."""
        self.live: dict[str, Session] = {}
        """LIVE tables (read-only outside this module: a plain dict get per call)."""
        self.creating: dict[str, Session] = {}
        """CREATING tables."""
        self.resting: dict[str, RestingTable] = {}
        """RESTING tables -> their listing."""
        self.unavailable: dict[str, Session] = {}
        """UNAVAILABLE tables -> their discarded session (its streams wait on it)."""
        self.quarantined: dict[str, Quarantined] = {}
        """QUARANTINED tables -> what is known of them."""
        self.held_by: Counter[str] = Counter()
        """LIVE tables per backend name ("": created without a key), for its quota."""
        self.create_requests: dict[tuple[str, str], str] = {}
        """(its sender's scope, ``ownership.scope_of``; CreateGame request id) -> the table
        it created (another sender's same id creates a table of its own)."""

    # --- reading ---------------------------------------------------------------------------

    def state_of(self, game_id: str) -> TableState:
        """The state of ``game_id`` here (GONE: not held)."""
        if game_id in self.live:
            return S.LIVE
        if game_id in self.resting:
            return S.RESTING
        if game_id in self.unavailable:
            return S.UNAVAILABLE
        if game_id in self.quarantined:
            return S.QUARANTINED
        if game_id in self.creating:
            return S.CREATING
        return S.GONE

    def _move(self, game_id: str, to: TableState, *from_: TableState) -> TableState:
        """Check the transition of ``game_id`` to ``to`` (from one of ``from_``, the states the
        calling transition leaves) and take it out of its former state's map (the caller puts
        it in the new one); its former state."""
        was = self.state_of(game_id)
        if was not in from_ or (was, to) not in TRANSITIONS:
            raise TransitionError(f"table {game_id}: {was.value} -> {to.value} is not allowed")
        if was is S.LIVE:
            session = self.live.pop(game_id)
            self.held_by[session.ownership.backend or ""] -= 1
            metrics.GAMES.set(len(self.live))
            session.cancel_timers()
            self.tokens.forget(game_id)
        elif was is S.RESTING:
            del self.resting[game_id]
        elif was is S.UNAVAILABLE:
            del self.unavailable[game_id]
        elif was is S.QUARANTINED:
            del self.quarantined[game_id]
        elif was is S.CREATING:
            del self.creating[game_id]
        return was

    def _serve(self, session: Session, request_id: str) -> None:
        game_id = session.game_id
        self.live[game_id] = session
        owned = session.ownership
        self.lobby.put(game_id, session.created_ms, session.rules.kind,
                       owned.backend if owned.private else None,
                       session.table.game_over(session.rules))
        self.held_by[owned.backend or ""] += 1
        metrics.GAMES.set(len(self.live))
        if request_id:
            session.create_request_id = request_id
            self.create_requests[owned.backend or "", request_id] = game_id

    # --- creating --------------------------------------------------------------------------

    def begin(self, session: Session) -> None:
        """GONE -> CREATING: its creation record is being written."""
        self._move(session.game_id, S.CREATING, S.GONE)
        self.creating[session.game_id] = session

    def created(self, session: Session, request_id: str = "") -> None:
        """CREATING -> LIVE: its record is committed; served and listed (its request id
        answered). The table actor publishes and arms it (``after_change``)."""
        self._move(session.game_id, S.LIVE, S.CREATING)
        self._serve(session, request_id)

    def not_created(self, session: Session, in_doubt: bool) -> None:
        """CREATING -> UNAVAILABLE (``in_doubt``: it may be stored, the healer reads it
        back) or GONE (the store kept nothing)."""
        self._move(session.game_id, S.UNAVAILABLE if in_doubt else S.GONE, S.CREATING)
        if in_doubt:
            self.unavailable[session.game_id] = session

    # --- restoring, waking, rebuilding -----------------------------------------------------

    def install(self, restored: Restored, epoch: int | None = None, at_rest: bool = False,
                kept: Session | None = None, arm: bool = True) -> Session:
        """GONE, RESTING, UNAVAILABLE or QUARANTINED -> LIVE: a table restored from the store
        (``epoch``: the fencing epoch it is held at; ``at_rest``: its rest listing is still
        stored, its first input clears it; ``kept``: the discarded session whose streams and
        presence carry on, a rebuild); served with its tokens, then armed unless ``arm`` is
        False (recovery arms them all once every table is loaded)."""
        session = restored.session
        game_id = session.game_id
        if epoch is not None:
            session.epoch = epoch
        session.at_rest = at_rest
        if kept is not None:
            session.subscribers = kept.subscribers
            session.presence = kept.presence  # their seats' streams and timers (presence.py)
            session.published_sequence = min(kept.published_sequence, session.last_sequence)
        former = self.unavailable.get(game_id)
        self._move(game_id, S.LIVE, S.GONE, S.RESTING, S.UNAVAILABLE, S.QUARANTINED)
        if former is not None and former is not kept:  # a newer session: they resume here
            for subscriber in former.subscribers:
                subscriber.close()
        self._serve(session, restored.create_request_id)
        for digest, seat in restored.tokens.items():
            self.tokens.add(digest, game_id, seat)
        for digest in restored.revoked:
            self.tokens.add_revoked(digest, game_id)
        self.restored(session)
        if arm:
            self.arm(session)
        return session

    def listed_at_rest(self, game_id: str, table: RestingTable,
                       answers_request: bool = False) -> None:
        """GONE -> RESTING: a table the store keeps at rest (recovery, a takeover), listed by
        it (``answers_request``: a retry of the CreateGame that made it gets it)."""
        self._move(game_id, S.RESTING, S.GONE)
        self._list_resting(game_id, table)
        if answers_request and table.request_id:
            self.create_requests[table.backend or "", table.request_id] = game_id

    def _list_resting(self, game_id: str, table: RestingTable) -> None:
        self.resting[game_id] = table
        self.lobby.put(game_id, table.created_ms, table.kind,
                       table.backend if table.private else None, True)

    # --- leaving memory --------------------------------------------------------------------

    def rest(self, session: Session) -> None:
        """LIVE -> RESTING: a finished table nothing keeps in memory leaves it (its timers
        stop, its tokens are forgotten); the store keeps it with its listing."""
        assert self.rest_store is not None
        listing = listing_of(session)
        game_id = session.game_id
        self._move(game_id, S.RESTING, S.LIVE)
        self._list_resting(game_id, RestingTable.of(game_id, listing, session.epoch))
        written = self.rest_store.rested(game_id, listing, session.epoch)
        asyncio.ensure_future(written).add_done_callback(_retrieved)

    def woken_input(self, session: Session) -> None:
        """The first input of a table loaded back from rest (LIVE, its rest listing still
        stored): the listing goes (queued before the input's own journal write), so a
        restart loads it."""
        session.at_rest = False
        if self.rest_store is not None:
            written = self.rest_store.woken(session.game_id, session.epoch)
            asyncio.ensure_future(written).add_done_callback(_retrieved)

    def failed(self, session: Session) -> None:
        """LIVE -> UNAVAILABLE: its write failed; unlisted, its timers stop, its streams
        wait for the rebuild."""
        self._move(session.game_id, S.UNAVAILABLE, S.LIVE)
        self.lobby.remove(session.game_id)
        self.unavailable[session.game_id] = session

    def discard(self, game_id: str) -> Session | None:
        """LIVE -> GONE: forget a table in memory only (the store keeps it: another node
        serves it now, or ``drop`` deletes it); its streams end. The session it was (None:
        not live here)."""
        session = self.live.get(game_id)
        if session is None:
            return None
        self._move(game_id, S.GONE, S.LIVE)
        self.lobby.remove(game_id)
        for subscriber in session.subscribers:
            subscriber.close()
        return session

    def unlist_resting(self, game_id: str) -> RestingTable | None:
        """RESTING -> GONE: a table at rest no longer kept here (dropped, handed off, or
        another node took it): unlisted. Its listing (None: not at rest here)."""
        table = self.resting.get(game_id)
        if table is None:
            return None
        self._move(game_id, S.GONE, S.RESTING)
        self.lobby.remove(game_id)
        return table

    def give_up(self, session: Session) -> None:
        """UNAVAILABLE -> GONE: a discarded table not rebuilt (another node owns it, or the
        store kept nothing, or a newer session serves it): its streams end (to resume where it
        is served)."""
        if self.unavailable.get(session.game_id) is session:
            self._move(session.game_id, S.GONE, S.UNAVAILABLE)
        for subscriber in session.subscribers:
            subscriber.close()

    def drop(self, game_id: str) -> None:
        """LIVE or RESTING -> GONE, and deleted from the store (retention)."""
        if (resting := self.unlist_resting(game_id)) is not None:
            epoch = resting.epoch
        else:
            session = self.discard(game_id)
            if session is None:
                return
            epoch = session.epoch
        written = self.store.dropped(game_id, epoch)
        asyncio.ensure_future(written).add_done_callback(_retrieved)

    def quarantine(self, game_id: str, damaged: Quarantined) -> None:
        """GONE, RESTING, UNAVAILABLE (its streams end) or QUARANTINED -> QUARANTINED: kept
        apart, listed as damaged, refused."""
        former = self.unavailable.get(game_id)
        self._move(game_id, S.QUARANTINED, S.GONE, S.RESTING, S.UNAVAILABLE, S.QUARANTINED)
        self.quarantined[game_id] = damaged
        self.lobby.remove(game_id)  # listed as damaged (ListGames reads ``quarantined``)
        if former is not None:
            for subscriber in former.subscribers:
                subscriber.close()

    # --- stopping --------------------------------------------------------------------------

    def end_streams(self) -> None:
        """The server stops: every open stream (live or awaiting a rebuild) ends."""
        for session in [*self.live.values(), *self.unavailable.values()]:
            for subscriber in list(session.subscribers):
                subscriber.close()

    def stop(self) -> None:
        """The server stops: every live table's timers stop and its streams end (the tables
        stay where they are: the store keeps them)."""
        for session in self.live.values():
            session.cancel_timers()
            for subscriber in session.subscribers:
                subscriber.close()


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception retrieved (its failure is handled elsewhere)."""
    if not future.cancelled():
        future.exception()
