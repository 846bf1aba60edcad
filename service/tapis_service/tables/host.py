"""The game host: the tables this server holds, and what indexes them.

It holds one map of its tables and their states (``lifecycle.Tables``: live, at rest, being
created, awaiting a rebuild, quarantined; every change of state is made there), the seat
tokens and the create request ids; it creates tables, claims seats
and hands inputs to the table actor (``table_actor``), which applies, journals and publishes
them; it restores tables from the store at start (``recover``) and one by one in a cluster
(``adopt``), lets finished ones rest out of memory and loads them back on demand
(``find``; shelf.py and resting.py), and forgets finished ones beyond the retention
limit (shelf.py). Refusals are ``ServiceError`` or the engine's ``RuleError``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
import structlog

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import rules_for
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.door.limits import quote
from tapis_service.observe.clock import Clock
from tapis_service.observe.errors import ServiceError, failed_precondition, not_found
from tapis_service.settings import Settings
from tapis_service.stores.joinkey import join_key
from tapis_service.stores.results import MemoryResults, ResultsFeed
from tapis_service.stores.store import MemoryStore, RestingStore, Store, StoreError
from tapis_service.tables.healing import Healing, quarantined_refusal, store_unavailable
from tapis_service.tables.lifecycle import Tables, TableState
from tapis_service.tables.lobby import Lobby
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.presence import Presence
from tapis_service.tables.recovery import recover_all
from tapis_service.tables.results_clerk import ResultsClerk
from tapis_service.tables.session import CompactedEvents, LoggedEvent, Session, Subscriber
from tapis_service.tables.shelf import Shelf
from tapis_service.tables.table_actor import TableActor
from tapis_service.tables.tokens import SeatTokens

log = structlog.get_logger("tapis.host")


class GameHost:
    """Holds the sessions of this server process."""

    def __init__(self, settings: Settings, clock: Clock, store: Store | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.store: Store = store or MemoryStore()
        self.keeps_journal = self.store.keeps_journal
        """False for a store that keeps nothing (``--store memory``)."""
        self.rest_store = self.store if isinstance(self.store, RestingStore) else None
        """The store, when tables may rest in it (else finished ones stay in memory)."""
        self.tokens = SeatTokens(join_key(settings))
        self.lobby = Lobby()
        """What ListGames lists (the tables in memory and at rest), indexed (lobby.py)."""
        self.tables = Tables(self.lobby, self.tokens, self.store,
                             arm=lambda session: self.actor.after_change(session),
                             restored=self._restored)
        """The one map of the tables held here and their states (``tables.session``: a live
        one, one dict get); the only place one changes (lifecycle.py)."""
        self.stopping = False
        """Set once the server is stopping (``end_streams``)."""
        self.health_listeners: list[Callable[[bool], None]] = []
        """Told False when a write fails and True once the store commits again."""
        self.lost_listeners: list[Callable[[str], None]] = []
        """Told the game id when the store says another writer appended first."""
        self.stop_listeners: list[Callable[[], None]] = []
        """Told once the open event streams were ended at a stop (``end_streams``)."""
        self.restored_listeners: list[Callable[[Session], None]] = []
        """Told each table read back from the store into memory: recovered at start, woken
        from rest, rebuilt after a failed write, adopted from another node (housekeeping: its
        idle periods start again there)."""
        self.confirm_owner: Callable[[str, int], Awaitable[bool]] = _always_owner
        """Whether this server still owns a table at a fencing epoch, asked before a table
        it let go of (a failed write: ``healing``; at rest: ``shelf``) is served again: a
        cluster node asks the database (a ``StoreError`` when it cannot); a single server
        always owns its tables."""
        self.healing = Healing(self)
        self.clerk = ResultsClerk(ResultsFeed(MemoryResults()), clock.now_ms)
        """Files the results of backends' tables (a durable ledger set by the server)."""
        self.actor = TableActor(self)
        self.presence = Presence(self)  # who is connected at each table (presence.py)
        self._create_calls: dict[tuple[str, str], asyncio.Future[Any]] = {}
        """(scope, CreateGame request id) -> the creation in progress (a retry waits on it)."""
        self.shelf = Shelf(self)
        """The finished tables' life: rest, wake, retention (shelf.py)."""

    # --- lookups --------------------------------------------------------------------------

    def get(self, game_id: str) -> Session:
        session = self.tables.session(game_id)
        if session is None:
            state = self.tables.state_of(game_id)
            if state is TableState.UNAVAILABLE:
                raise store_unavailable()
            if state is TableState.QUARANTINED:
                raise quarantined_refusal(game_id)
            raise not_found(f"no game {quote(game_id)} on this server")
        return session

    def in_memory(self, game_id: str) -> Session | None:
        """The table of a call if it is in memory, else None (``find`` loads it back or
        refuses): the lookup of a table in memory, without a coroutine."""
        session = self.tables.session(game_id)
        if session is not None and self.rest_store is not None:
            self.shelf.used(game_id)
        return session

    async def find(self, game_id: str) -> Session:
        """The table of a call: in memory, or loaded back from rest; refused as ``get``."""
        session = self.in_memory(game_id)
        if session is None and self.tables.state_of(game_id) is TableState.RESTING:
            session = await self.shelf.wake(game_id)
            if session is not None and self.rest_store is not None:
                self.shelf.used(game_id)
        return self.get(game_id) if session is None else session

    def seat_of(self, session: Session, token: str | None) -> int | None:
        """The caller's seat from its token; None for a spectator (no token)."""
        return self.tokens.seat_of(session, token)

    # --- creating, joining, playing ------------------------------------------------------------

    async def create(
        self,
        kind: str,
        seats: int,
        seed: int | None,
        turn_time_ms: int,
        bots: Sequence[str | None],
        options: Any,
        stacked_deck: tuple[Any, ...] | None,
        stacked_first: int | None,
        request_id: str = "",
        ownership: Ownership | None = None,
    ) -> Session:
        """Create a table (bots sit at once); refusals raise before anything is kept. The
        table is served (and its request id, its backend's, answered) once committed."""
        scope = "" if ownership is None else ownership.backend or ""
        if request_id:
            if (scope, request_id) in self._create_calls:
                await asyncio.wait([self._create_calls[scope, request_id]])
            # its table, wherever it is: live, at rest, being rebuilt (STORE_UNAVAILABLE: a
            # retry gets it), quarantined (refused), never a second one
            created = self.tables.create_request(scope, request_id)
            if created is not None and self.tables.state_of(created) is not TableState.GONE:
                return await self.find(created)
        in_memory = (TableState.LIVE, TableState.CREATING)
        if self.tables.count(*in_memory) >= self.settings.max_games:
            self.shelf.make_room()
            if self.tables.count(*in_memory) >= self.settings.max_games:
                raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_GAMES",
                                   "this server holds as many games as it may; try later")
        if stacked_deck is not None and not self.settings.allow_stacked_decks:
            raise failed_precondition(
                "STACKED_DECKS_DISABLED",
                "stacked decks are only accepted by a server started with --allow-stacked-decks")
        rules = rules_for(kind)
        assert rules is not None
        seed_chosen = seed is not None
        if seed is None:
            seed = secrets.randbits(64)
        setup = GameSetup(seats=seats, seed=seed, options=options, stacked_deck=stacked_deck,
                          stacked_first=stacked_first, salt=secrets.token_hex(16),
                          seed_chosen=seed_chosen)
        now = self.clock.now_ms()
        table, events = tbl.new_table(rules, setup, bots, turn_time_ms, now)
        game_id = secrets.token_hex(8)
        session = Session(game_id=game_id, rules=rules, adapter=ADAPTERS[kind], table=table,
                          created_ms=now, names=["" for _ in range(seats)])
        session.record(events)
        record = {"kind": kind, "table": table_codec.encode_table(rules, table), "created_ms": now,
                  "initial": table_codec.encode_table(rules, tbl.Table(
                      kind=kind, setup=setup, turn_time_ms=turn_time_ms,
                      seats=tuple(tbl.SeatSlot(bot=b, claimed=b is not None) for b in bots))),
                  "request_id": request_id}
        if ownership is not None and ownership != Ownership():
            session.ownership = ownership
            record["ownership"] = ownership.encode()
        self.tables.begin(session)
        opening = asyncio.ensure_future(self.actor.open(session, record, request_id))
        if not request_id:
            return await asyncio.shield(opening)
        key = (scope, request_id)
        self._create_calls[key] = opening
        try:
            return await asyncio.shield(opening)
        finally:
            if opening.done():
                self._create_calls.pop(key, None)
            else:
                opening.add_done_callback(lambda _: self._create_calls.pop(key, None))

    async def join(self, game_id: str, seat: int | None, name: str,
                   request_id: str = "", scope: str = "") -> tuple[Session, int, str]:
        """Claim a person's seat: the session, the seat and its secret token (a retry with
        the same ``request_id`` from the same ``scope`` gets the same seat and token)."""
        return await self.actor.claim(await self.find(game_id), seat, name, request_id, scope)

    async def abandon(self, session: Session) -> None:
        """End a table nobody plays any more (housekeeping)."""
        await self.actor.abandon(session)

    # --- streams -------------------------------------------------------------------------------

    def subscribe(self, session: Session, seat: int | None, after: int
                  ) -> tuple[Subscriber, list[CompactedEvents], list[LoggedEvent]]:
        """Open a stream: the backlog after ``after`` (finished games' compacted events, then
        the live log's), and a queue for what follows."""
        subscriber = Subscriber(seat, self.settings.stream_queue_size)
        session.subscribers.add(subscriber)
        backlog = [e for e in session.events_after(after)
                   if e.sequence <= session.published_sequence]
        return subscriber, list(session.compacted), backlog

    def unsubscribe(self, session: Session, subscriber: Subscriber) -> None:
        """A stream ended; a finished table whose last stream it was rests at once."""
        session.subscribers.discard(subscriber)
        current = self.tables.session(session.game_id) \
            or self.tables.unavailable(session.game_id)
        if current is not None and current is not session:
            current.subscribers.discard(subscriber)
        if current is not None and not current.subscribers:  # its last: a finished one rests
            self.shelf.rest_if_done(current)

    # --- what the table actor calls around a commit (table_hooks.Committed) -----------------

    def publishing(self, session: Session, over: bool) -> None:
        if session.ownership.backend is not None:  # a backend's table: its results filed,
            self.clerk.note(session)  # before the publication compacts a finished game
        if over is not session.listed_over:  # the listing changes only when a game ends or
            session.listed_over = over       # starts (and is told anew at each arm)
            self.lobby.finished(session.game_id, over)

    def armed(self, session: Session) -> None:
        if self.presence.idle_ms and session.ownership.backend is not None:
            self.presence.changed(session)

    def finishing(self, session: Session) -> None:
        self.shelf.enforce_retention(keep=session.game_id)

    def finished(self, session: Session) -> None:
        self.shelf.rest_if_done(session)

    def write_failed(self, session: Session | None, error: StoreError) -> None:
        self.healing.store_failed(session, error)

    # --- adopting a table (a cluster) ----------------------------------------------------------

    async def adopt(self, game_id: str, epoch: int) -> Session | None:
        """Load one table from the store (snapshot-checked journal replay) under the fencing
        ``epoch`` this server now holds it at, arm its timers and bots, and serve it; None
        when the store does not hold it. One that cannot be restored or installed, whatever
        ``restore`` or the install raises, is quarantined alone and refused with
        GAME_QUARANTINED; the store's failure
        (``StoreError``) is raised as it is."""
        if (held := self.tables.session(game_id)) is not None:
            return held
        stored = await self.store.load_game(game_id)
        if stored is None:
            return None
        if (held := self.tables.session(game_id)) is not None:  # adopted meanwhile
            return held
        # listed where it is until served or quarantined
        was_resting = self.tables.state_of(game_id) is TableState.RESTING
        restored = self.healing.restore_or_quarantine(game_id, stored)
        if restored is None:
            raise quarantined_refusal(game_id)
        # its first input clears a stored rest listing
        # the caller (the locator) took or holds it at ``epoch`` in the database
        session = self.healing.install_or_quarantine(restored, confirmed=True, epoch=epoch,
                                                     at_rest=was_resting)
        if session is None:
            raise quarantined_refusal(game_id)
        return session

    # --- start and stop ------------------------------------------------------------------------

    async def recover(self) -> None:
        """Restore every stored table not at rest before serving (``recovery.recover_all``)."""
        await recover_all(self)

    def end_streams(self) -> None:
        """The server is stopping: every open event stream ends now (UNAVAILABLE /
        SERVER_STOPPING, with where to resume) instead of holding the stop for its grace."""
        self.stopping = True
        self.tables.end_streams()
        for listener in list(self.stop_listeners):
            listener()

    def _restored(self, session: Session) -> None:
        """A table read back from the store (``Tables``' ``load`` effect): its turn timers
        resumed (``TableActor.resume``), its results filed, its listeners told."""
        self.actor.resume(session)
        self.clerk.restored(session)
        for listener in self.restored_listeners:
            listener(session)

    async def close(self) -> None:
        self.stopping = True
        self.actor.autoplay.stopped = True  # a commit that lands below arms no timer again
        self.tables.stop()
        self.healing.stop()
        for session in self.tables.sessions():
            await asyncio.gather(*session.writes, return_exceptions=True)
        self.store.close()


async def _always_owner(game_id: str, epoch: int) -> bool:
    """A single server's answer to ``confirm_owner``: its tables are its own."""
    return True
