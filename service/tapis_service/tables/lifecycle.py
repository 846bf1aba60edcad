"""A table's life on this server: its states, the transitions allowed between them, and what
each transition does. Every change of a table's state happens here (``tests/test_layout.py``
checks that no other module writes the map below).

The states (``TableState``) and the transitions between them (``Tables`` methods)::

    GONE ──begin──▶ CREATING ──created──▶ LIVE   (not_created: to GONE; in doubt, UNAVAILABLE)
    GONE, RESTING, UNAVAILABLE, QUARANTINED ──install──▶ LIVE   (recovery, wake, rebuild, adopt)
    GONE ──listed_at_rest──▶ RESTING ◀──rest── LIVE    (a finished table nothing keeps in memory)
    LIVE ──failed──▶ UNAVAILABLE ──give_up──▶ GONE      (a write failed; not rebuilt)
    LIVE ──discard──▶ GONE ◀──unlist_resting── RESTING  (dropped, moved or lost, handed off)
    GONE, RESTING, UNAVAILABLE ──quarantine──▶ QUARANTINED  (stored but damaged)
    LIVE ──install_failed──▶ QUARANTINED   (restored, but its install raised part way)

``GONE`` is no entry at all: a table this server does not hold. What each transition does is
declared in ``TRANSITIONS`` and done by ``Tables._move``, the one function that changes a table's
state, from that declaration: the turn and bot timers (cancelled when a table leaves memory; armed
by ``arm``, the table actor's ``after_change``, when it enters it; the unjoined TTL and the abandon
are housekeeping's sweeps over the live tables), the ``ListGames`` line (``lobby``), the seat
tokens (forgotten, or read back with a restored table), the open streams (ended, or kept for a
rebuild). The ``Tables`` methods only hand it what the new state holds (and write the store's rest
listing or drop). Ownership is confirmed by the caller before an install (a wake or a rebuild
awaits ``host.confirm_owner``; an adoption holds the epoch the database gave it; recovery loads the
store's own tables): those transitions are declared to require it, and ``_move`` refuses them
unless the caller says it did (``install(confirmed=...)``).

The tables are one map (``Tables.by_game``: game id -> ``Entry``, its state and what that state
holds), each table in exactly one state; the counts per state are kept beside it (no scan to
count), and a live table is found with one dict get and one slot read (``Tables.session``).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

from tapis_service.observe import metrics
from tapis_service.observe.errors import handled_elsewhere
from tapis_service.stores.store import RestingStore, Store
from tapis_service.tables.lobby import Lobby
from tapis_service.tables.resting import RestingTable, listing_of
from tapis_service.tables.session import Session
from tapis_service.tables.tokens import SeatTokens
from tapis_service.tables.transition_error import TransitionError

if TYPE_CHECKING:
    from tapis_service.tables.healing import Quarantined
    from tapis_service.tables.recovery import Restored


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
    """What a transition does, declared once (``TRANSITIONS``) and done by ``Tables._move``."""

    timers: str
    """The table's timers (turn limit, bots, unjoined TTL and abandon by housekeeping,
    presence): "arm" (``Tables.arm``), "cancel" or "-"."""
    listing: str
    """Its ``ListGames`` line: "live" (from its session), "rest" (its resting listing),
    "remove" or "-"."""
    streams: str
    """Its open event streams: "end", "keep" (they wait for a rebuild, and carry on in the
    rebuilt session; any other session's end) or "-"."""
    tokens: str
    """Its seat tokens: "forget", "load" (read back from the store with the table) or "-"."""
    ownership: bool
    """Whether the caller must have confirmed (``host.confirm_owner``) that this server owns
    the table at its epoch before the transition."""


S = TableState
TRANSITIONS: dict[tuple[TableState, TableState], Effects] = {
    (S.GONE, S.CREATING): Effects("-", "-", "-", "-", False),
    (S.CREATING, S.LIVE): Effects("arm", "live", "-", "-", False),
    (S.CREATING, S.UNAVAILABLE): Effects("-", "-", "-", "-", False),
    (S.CREATING, S.GONE): Effects("-", "-", "-", "-", False),
    (S.GONE, S.LIVE): Effects("arm", "live", "-", "load", True),  # recovery (its lease), adopted
    (S.GONE, S.RESTING): Effects("-", "rest", "-", "-", False),  # recovery: listed from the store
    (S.RESTING, S.LIVE): Effects("arm", "live", "-", "load", True),  # woken (or adopted)
    (S.UNAVAILABLE, S.LIVE): Effects("arm", "live", "keep", "load", True),  # rebuilt
    (S.QUARANTINED, S.LIVE): Effects("arm", "live", "-", "load", True),  # adopted, restorable
    (S.LIVE, S.RESTING): Effects("cancel", "rest", "-", "forget", False),
    (S.LIVE, S.UNAVAILABLE): Effects("cancel", "remove", "keep", "forget", False),
    (S.LIVE, S.GONE): Effects("cancel", "remove", "end", "forget", False),  # dropped, moved, lost
    (S.RESTING, S.GONE): Effects("-", "remove", "-", "-", False),  # dropped, moved, handed off
    (S.UNAVAILABLE, S.GONE): Effects("-", "-", "end", "-", False),  # given up (lost, not stored)
    (S.GONE, S.QUARANTINED): Effects("-", "remove", "-", "-", False),
    (S.RESTING, S.QUARANTINED): Effects("-", "remove", "-", "-", False),
    (S.UNAVAILABLE, S.QUARANTINED): Effects("-", "-", "end", "-", False),
    (S.QUARANTINED, S.QUARANTINED): Effects("-", "-", "-", "-", False),  # damaged again
    (S.LIVE, S.QUARANTINED): Effects("cancel", "remove", "end", "forget", False),  # install failed
}
"""The allowed transitions and their effects; any other is a bug (``TransitionError``)."""

HELD = tuple(state for state in TableState if state is not S.GONE)
"""The states of a table held here (an entry of the map)."""
_LIVE: Final = S.LIVE


class Entry:
    """A table held here: its state and what that state holds."""

    __slots__ = ("damaged", "live", "resting", "session", "state")

    def __init__(self, state: TableState, session: Session | None = None,
                 resting: RestingTable | None = None, damaged: Quarantined | None = None) -> None:
        self.state = state
        self.session = session
        """CREATING, LIVE: its session; UNAVAILABLE: its discarded session (streams wait)."""
        self.live = session if state is TableState.LIVE else None
        """Its session if it is LIVE, else None (the hot lookup: ``Tables.session``)."""
        self.resting = resting
        """RESTING: its listing."""
        self.damaged = damaged
        """QUARANTINED: what is known of it."""


_GONE: Final = Entry(S.GONE)
"""What a table not held here is (no entry)."""


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
        self.by_game: dict[str, Entry] = {}
        """Every table held here -> its state and what it holds (read-only outside this
        module); a table leaving a state leaves its place, so the tables of a state are in
        the order they entered it."""
        self._counts: dict[TableState, int] = dict.fromkeys(HELD, 0)
        self._held_by: Counter[str] = Counter()
        """LIVE tables per backend name ("": created without a key), for its quota."""
        self._unarmed: list[Session] = []
        """Tables installed without arming (recovery): armed by ``arm_deferred``."""
        self._create_requests: dict[tuple[str, str], str] = {}
        """(its sender's scope, ``ownership.scope_of``; CreateGame request id) -> the table
        it created (another sender's same id creates a table of its own)."""

    # --- reading ---------------------------------------------------------------------------

    def state_of(self, game_id: str) -> TableState:
        """The state of ``game_id`` here (GONE: not held)."""
        return self.by_game.get(game_id, _GONE).state

    def session(self, game_id: str) -> Session | None:
        """The LIVE session of ``game_id``, or None (the hot path: one dict get, one slot)."""
        return self.by_game.get(game_id, _GONE).live

    def resting(self, game_id: str) -> RestingTable | None:
        """The listing of ``game_id`` if it is RESTING here."""
        entry = self.by_game.get(game_id, _GONE)
        return entry.resting if entry.state is S.RESTING else None

    def unavailable(self, game_id: str) -> Session | None:
        """The discarded session of ``game_id`` if it is UNAVAILABLE here."""
        entry = self.by_game.get(game_id, _GONE)
        return entry.session if entry.state is S.UNAVAILABLE else None

    def quarantined(self, game_id: str) -> Quarantined | None:
        """What is known of ``game_id`` if it is QUARANTINED here."""
        return self.by_game.get(game_id, _GONE).damaged

    def listed(self, game_id: str) -> Session | RestingTable | None:
        """What ``ListGames`` lists of ``game_id``: its LIVE session or its RESTING line."""
        entry = self.by_game.get(game_id, _GONE)
        return entry.live or entry.resting

    def count(self, *states: TableState) -> int:
        """How many tables are in ``states`` (kept, not counted)."""
        return sum(self._counts[state] for state in states)

    def held(self, scope: str) -> int:
        """How many LIVE tables a backend holds ("": created without a key)."""
        return self._held_by[scope]

    def create_request(self, scope: str, request_id: str) -> str | None:
        """The table a CreateGame ``request_id`` of ``scope`` created, if known here."""
        return self._create_requests.get((scope, request_id))

    def _answers(self, backend: str | None, request_id: str, game_id: str) -> None:
        """A retry of CreateGame ``request_id`` from ``backend`` (None: keyless): ``game_id``."""
        if request_id:
            self._create_requests[backend or "", request_id] = game_id

    def _entries(self, state: TableState) -> list[tuple[str, Entry]]:
        """The tables in ``state`` now (a copy, in the order they entered it: the caller may
        change them as it goes, and another thread may read it). A walk over the one map, for
        the sweeps, the start and the stop (none while the state is empty), never per call."""
        if not self._counts[state]:
            return []
        return [(game_id, entry) for game_id, entry in list(self.by_game.items())
                if entry.state is state]

    def sessions(self, state: TableState = S.LIVE) -> list[Session]:
        """The sessions of the tables in ``state`` (LIVE, UNAVAILABLE or CREATING) now."""
        return [entry.session for _, entry in self._entries(state) if entry.session is not None]

    def ids(self, state: TableState) -> list[str]:
        """The tables in ``state`` now."""
        return [game_id for game_id, _ in self._entries(state)]

    def resting_tables(self) -> list[tuple[str, RestingTable]]:
        """The RESTING tables now, with their listings."""
        return [(game_id, entry.resting) for game_id, entry in self._entries(S.RESTING)
                if entry.resting is not None]

    def quarantined_tables(self) -> list[tuple[str, Quarantined]]:
        """The QUARANTINED tables now, with what is known of them."""
        return [(game_id, entry.damaged) for game_id, entry in self._entries(S.QUARANTINED)
                if entry.damaged is not None]

    # --- the one transition ----------------------------------------------------------------

    def _move(self, game_id: str, to: TableState, from_: tuple[TableState, ...], *,
              session: Session | None = None, resting: RestingTable | None = None,
              damaged: Quarantined | None = None, restored: Restored | None = None,
              kept: Session | None = None, request_id: str = "", confirmed: bool = False,
              arm: bool = True) -> Entry:
        """Move ``game_id`` to ``to`` (from one of ``from_``, the states the calling method
        leaves), holding ``session``, ``resting`` or ``damaged``, and do what
        ``TRANSITIONS`` declares of it; its former entry. ``restored``: a table read back from
        the store (its tokens); ``kept``: the discarded session whose streams carry on;
        ``confirmed``: the caller confirmed this server owns the table at its epoch; ``arm``
        False: arming waits for ``arm_deferred`` (recovery)."""
        former = self.by_game.get(game_id, _GONE)
        was = former.state
        effects = TRANSITIONS.get((was, to))
        if was not in from_ or effects is None:
            raise TransitionError(f"table {game_id}: {was.value} -> {to.value} is not allowed")
        if effects.ownership and not confirmed:
            raise TransitionError(f"table {game_id}: {was.value} -> {to.value} needs its "
                                  "ownership confirmed first")
        if kept is not None and effects.streams != "keep":
            raise TransitionError(f"table {game_id}: {was.value} -> {to.value} keeps no streams")
        entry = None if to is S.GONE else _entry(game_id, to, session, resting, damaged)
        # leave the former state
        if former is not _GONE:
            del self.by_game[game_id]
            self._counts[was] -= 1
        left = former.session
        if was is _LIVE:
            assert left is not None
            self._held_by[left.ownership.backend or ""] -= 1
            metrics.GAMES.set(self._counts[_LIVE])
        if effects.timers == "cancel":
            assert left is not None
            left.cancel_timers()
        if effects.tokens == "forget":
            self.tokens.forget(game_id)
        # enter the new one
        if entry is not None:
            self.by_game[game_id] = entry
            self._counts[to] += 1
        if effects.listing == "live":
            assert session is not None
            owned = session.ownership
            self.lobby.put(game_id, session.created_ms, session.rules.kind,
                           owned.backend if owned.private else None,
                           session.table.game_over(session.rules))
        elif effects.listing == "rest":
            assert resting is not None
            self.lobby.put(game_id, resting.created_ms, resting.kind,
                           resting.backend if resting.private else None, True)
        elif effects.listing == "remove":
            self.lobby.remove(game_id)
        if to is _LIVE:
            assert session is not None
            owned = session.ownership
            self._held_by[owned.backend or ""] += 1
            metrics.GAMES.set(self._counts[_LIVE])
            if request_id:
                session.create_request_id = request_id
            self._answers(owned.backend, request_id, game_id)
        if effects.streams == "end" or (effects.streams == "keep" and to is _LIVE
                                        and left is not kept):
            assert left is not None  # a newer session than the one they wait on: they resume
            for subscriber in list(left.subscribers):
                subscriber.close()
        if kept is not None and session is not None:
            session.subscribers = kept.subscribers
            session.presence = kept.presence  # their seats' streams and timers (presence.py)
            session.published_sequence = min(kept.published_sequence, session.last_sequence)
        if effects.tokens == "load":
            assert restored is not None and session is not None
            for digest, seat in restored.tokens.items():
                self.tokens.add(digest, game_id, seat)
            for digest, spectator in restored.revoked.items():
                self.tokens.add_revoked(digest, game_id, spectator)
            self.restored(session)
        if effects.timers == "arm":
            assert session is not None
            if arm:
                self.arm(session)
            else:
                self._unarmed.append(session)
        return former

    # --- creating --------------------------------------------------------------------------

    def begin(self, session: Session) -> None:
        """GONE -> CREATING: its creation record is being written."""
        self._move(session.game_id, S.CREATING, (S.GONE,), session=session)

    def created(self, session: Session, request_id: str = "") -> None:
        """CREATING -> LIVE: its record is committed (its events durable); served, listed
        (its request id answered), published and armed."""
        self._move(session.game_id, S.LIVE, (S.CREATING,), session=session,
                   request_id=request_id)

    def not_created(self, session: Session, in_doubt: bool) -> None:
        """CREATING -> UNAVAILABLE (``in_doubt``: it may be stored, the healer reads it
        back) or GONE (the store kept nothing)."""
        self._move(session.game_id, S.UNAVAILABLE if in_doubt else S.GONE, (S.CREATING,),
                   session=session if in_doubt else None)

    # --- restoring, waking, rebuilding -----------------------------------------------------

    def install(self, restored: Restored, *, confirmed: bool, epoch: int | None = None,
                at_rest: bool = False, kept: Session | None = None, arm: bool = True) -> Session:
        """GONE, RESTING, UNAVAILABLE or QUARANTINED -> LIVE: a table restored from the store,
        once the caller ``confirmed`` this server owns it (``epoch``: the fencing epoch it is
        held at; ``at_rest``: its rest listing is still stored, its first input clears it;
        ``kept``: the discarded session whose streams and presence carry on, a rebuild);
        served with its tokens, then armed unless ``arm`` is False (recovery arms them all
        once every table is loaded: ``arm_deferred``)."""
        session = restored.session
        if epoch is not None:
            session.epoch = epoch
        session.at_rest = at_rest
        self._move(session.game_id, S.LIVE, (S.GONE, S.RESTING, S.UNAVAILABLE, S.QUARANTINED),
                   session=session, restored=restored, kept=kept,
                   request_id=restored.create_request_id, confirmed=confirmed, arm=arm)
        return session

    def unarmed(self) -> list[Session]:
        """The tables installed without arming (``install(arm=False)``) since the last call."""
        found, self._unarmed = self._unarmed, []
        return found

    def arm_deferred(self, session: Session) -> bool:
        """Arm a table installed without arming, if it is still LIVE (whether it is)."""
        if self.session(session.game_id) is not session:
            return False
        self.arm(session)
        return True

    def listed_at_rest(self, game_id: str, table: RestingTable,
                       answers_request: bool = False) -> None:
        """GONE -> RESTING: a table the store keeps at rest (recovery, a takeover), listed by
        it (``answers_request``: a retry of the CreateGame that made it gets it)."""
        self._move(game_id, S.RESTING, (S.GONE,), resting=table)
        if answers_request:
            self._answers(table.backend, table.request_id, game_id)

    # --- leaving memory --------------------------------------------------------------------

    def rest(self, session: Session) -> None:
        """LIVE -> RESTING: a finished table nothing keeps in memory leaves it (its timers
        stop, its tokens are forgotten); the store keeps it with its listing."""
        assert self.rest_store is not None
        listing = listing_of(session)
        game_id = session.game_id
        self._move(game_id, S.RESTING, (S.LIVE,),
                   resting=RestingTable.of(game_id, listing, session.epoch))
        written = self.rest_store.rested(game_id, listing, session.epoch)
        asyncio.ensure_future(written).add_done_callback(handled_elsewhere)

    def woken_input(self, session: Session) -> None:
        """The first input of a table loaded back from rest (LIVE, its rest listing still
        stored): the listing goes (queued before the input's own journal write), so a
        restart loads it."""
        session.at_rest = False
        if self.rest_store is not None:
            written = self.rest_store.woken(session.game_id, session.epoch)
            asyncio.ensure_future(written).add_done_callback(handled_elsewhere)

    def failed(self, session: Session) -> None:
        """LIVE -> UNAVAILABLE: its write failed; unlisted, its timers stop, its streams
        wait for the rebuild."""
        self._move(session.game_id, S.UNAVAILABLE, (S.LIVE,), session=session)

    def discard(self, game_id: str) -> Session | None:
        """LIVE -> GONE: forget a table in memory only (the store keeps it: another node
        serves it now, or ``drop`` deletes it); its streams end. The session it was (None:
        not live here)."""
        if self.session(game_id) is None:
            return None
        return self._move(game_id, S.GONE, (S.LIVE,)).session

    def unlist_resting(self, game_id: str) -> RestingTable | None:
        """RESTING -> GONE: a table at rest no longer kept here (dropped, handed off, or
        another node took it): unlisted. Its listing (None: not at rest here)."""
        if self.resting(game_id) is None:
            return None
        return self._move(game_id, S.GONE, (S.RESTING,)).resting

    def give_up(self, session: Session) -> None:
        """UNAVAILABLE -> GONE: a discarded table not rebuilt (another node owns it, or the
        store kept nothing, or a newer session serves it): its streams end (to resume where it
        is served)."""
        if self.unavailable(session.game_id) is session:
            self._move(session.game_id, S.GONE, (S.UNAVAILABLE,))
            return
        for subscriber in list(session.subscribers):  # no longer its table's: they end too
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
        asyncio.ensure_future(written).add_done_callback(handled_elsewhere)

    def quarantine(self, game_id: str, damaged: Quarantined, request_id: str = "") -> None:
        """GONE, RESTING, UNAVAILABLE (its streams end) or QUARANTINED -> QUARANTINED: kept
        apart, listed as damaged (``ListGames`` reads ``quarantined_tables``), refused; so is
        a retry of the CreateGame ``request_id`` that made it (its owner's, when known)."""
        self._move(game_id, S.QUARANTINED, (S.GONE, S.RESTING, S.UNAVAILABLE, S.QUARANTINED),
                   damaged=damaged)
        if damaged.owner is not None:
            self._answers(damaged.owner.backend, request_id, game_id)

    def install_failed(self, session: Session, damaged: Quarantined,
                       kept: Session | None = None) -> None:
        """LIVE -> QUARANTINED: ``session``'s install (or arming) raised part way; nothing of it
        stays (timers, listing, tokens, streams: ``kept``'s too); not LIVE yet: ``quarantine``."""
        if self.session(session.game_id) is session:
            self._move(session.game_id, S.QUARANTINED, (S.LIVE,), damaged=damaged)
        else:
            self.quarantine(session.game_id, damaged)
        if kept is not None:
            for subscriber in list(kept.subscribers):
                subscriber.close()

    # --- stopping --------------------------------------------------------------------------

    def end_streams(self) -> None:
        """The server stops: every open stream (live or awaiting a rebuild) ends."""
        for session in [*self.sessions(S.LIVE), *self.sessions(S.UNAVAILABLE)]:
            for subscriber in list(session.subscribers):
                subscriber.close()

    def stop(self) -> None:
        """The server stops: every live table's timers stop and its streams end (the tables
        stay where they are: the store keeps them)."""
        for session in self.sessions(S.LIVE):
            session.cancel_timers()
            for subscriber in list(session.subscribers):
                subscriber.close()


def _entry(game_id: str, state: TableState, session: Session | None,
           resting: RestingTable | None, damaged: Quarantined | None) -> Entry:
    """The entry of a table entering ``state``, holding what that state holds (and nothing
    else); a ``TransitionError`` when it is not given."""
    if state is S.RESTING:
        entry = Entry(state, resting=resting)
    elif state is S.QUARANTINED:
        entry = Entry(state, damaged=damaged)
    else:
        entry = Entry(state, session)
    if entry.session is None and entry.resting is None and entry.damaged is None:
        raise TransitionError(f"table {game_id}: {state.value} holds nothing")
    return entry

