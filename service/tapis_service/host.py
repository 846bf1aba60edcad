"""The game host: every live session, seat credentials, bots, turn timers and fan-out.

The servicer hands it domain values (already converted from protobuf) and gets domain values
back; refusals are ``ServiceError`` or the engine's ``RuleError``.

The commit path: an input is applied in memory, its journal write is queued, and everything
that follows (publication, the request id's answer, bots and timers) runs from the write's
completion, not from the caller, so a cancelled call changes nothing of the input's fate. A
write the store refuses discards the game's session; it is rebuilt from its durable prefix once
the store commits again, and every call that waited on the write is answered UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import inspect
import os
import random
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import structlog

from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import rules_for
from tapis_service import compaction, convert, logcontext, metrics
from tapis_service.adapters import ADAPTERS
from tapis_service.clock import Clock
from tapis_service.errors import (
    ServiceError,
    failed_precondition,
    from_rule_error,
    not_found,
)
from tapis_service.limits import quote
from tapis_service.ratelimit import TokenBuckets
from tapis_service.recovery import RecoveryError, Restored, restore, snapshot_data
from tapis_service.session import Applied, CompactedEvents, LoggedEvent, Session, Subscriber
from tapis_service.settings import Settings
from tapis_service.store import (
    CommitUnknown,
    CreateConflict,
    JournalConflict,
    MemoryStore,
    Store,
    StoreError,
)

T = TypeVar("T")

log = structlog.get_logger("tapis.host")

RATE_LIMITED_ACTIONS = frozenset({"Slap"})
"""Engine action classes limited per seat (slaps: hammering the button is never a strategy)."""


def join_key(settings: Settings) -> bytes:
    """The secret that retried joins derive their tokens from: kept in the data directory
    (created once, readable by the server's user only), or per process without one."""
    if settings.data_dir is None or settings.store == "memory":
        return secrets.token_bytes(32)
    path = Path(settings.data_dir) / "join.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as key_file:
            key_file.write(secrets.token_bytes(32))
            key_file.flush()
            os.fsync(key_file.fileno())
    return path.read_bytes()


@functools.lru_cache(maxsize=1 << 16)
def token_hash(token: str) -> str:
    """Seat tokens are kept (and persisted) only as this hash (cached: every call hashes its
    token)."""
    return hashlib.sha256(token.encode()).hexdigest()


class GameHost:
    """Holds the sessions of this server process."""

    def __init__(self, settings: Settings, clock: Clock, store: Store | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.store: Store = store or MemoryStore()
        self.keeps_journal = self.store.keeps_journal
        """False for a store that keeps nothing (``--store memory``)."""
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.tokens: dict[str, tuple[str, int]] = {}
        self.create_requests: dict[str, str] = {}
        self.slaps = TokenBuckets(settings.slap_rate_per_s, settings.slap_burst)
        self.stopping = False
        """Set once the server is stopping (``end_streams``)."""
        self.quarantined: dict[str, tuple[str, str]] = {}
        """Stored games that cannot be restored faithfully -> (kind, why); kept on disk
        untouched, listed, and refused with GAME_QUARANTINED."""
        self.unavailable: dict[str, Session] = {}
        """Games whose last write failed -> their discarded session (its streams wait on it),
        until they are rebuilt from the store."""
        self.store_healthy = True
        self.health_listeners: list[Callable[[bool], None]] = []
        """Told False when a write fails and True once the store commits again."""
        self.lost_listeners: list[Callable[[str], None]] = []
        """Told the game id when the store says another writer appended first."""
        self._creating: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._healing: asyncio.Task[None] | None = None
        self._jitter = random.Random()
        self.join_key = join_key(settings)

    # --- lookups --------------------------------------------------------------------------

    def get(self, game_id: str) -> Session:
        session = self.sessions.get(game_id)
        if session is None:
            if game_id in self.unavailable:
                raise _store_unavailable()
            if game_id in self.quarantined:
                raise quarantined_refusal(game_id)
            raise not_found(f"no game {quote(game_id)} on this server")
        return session

    def seat_of(self, session: Session, token: str | None) -> int | None:
        """The caller's seat from its token; None for a spectator (no token)."""
        if token is None:
            return None
        owner = self.tokens.get(token_hash(token))
        if owner is None:
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                               "this seat token is not valid on this server")
        if owner[0] != session.game_id:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "TOKEN_FOR_ANOTHER_GAME",
                               "this seat token belongs to another game")
        return owner[1]

    # --- creating and joining -----------------------------------------------------------------

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
    ) -> Session:
        """Create a table (bots sit at once); refusals raise before anything is kept. The
        table is served (and its request id answered) only once its record is committed."""
        if request_id:
            if request_id in self._creating:
                await _settled(self._creating[request_id])
            if request_id in self.create_requests:
                existing = self.sessions.get(self.create_requests[request_id])
                if existing is not None:
                    return existing
        if len(self.sessions) + len(self._creating) >= self.settings.max_games:
            self._evict_finished()
            if len(self.sessions) + len(self._creating) >= self.settings.max_games:
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
        record = {"kind": kind, "table": tbl.encode_table(rules, table), "created_ms": now,
                  "initial": tbl.encode_table(rules, tbl.Table(
                      kind=kind, setup=setup, turn_time_ms=turn_time_ms,
                      seats=tuple(tbl.SeatSlot(bot=b, claimed=b is not None) for b in bots))),
                  "request_id": request_id}
        upto = session.last_sequence

        def committed() -> None:
            self.sessions[game_id] = session
            metrics.GAMES.set(len(self.sessions))
            if request_id:
                self.create_requests[request_id] = game_id
            _committed(session, upto)
            log.info("game_created", game=game_id, kind=kind, seats=seats,
                     bots=sum(b is not None for b in bots))
            self._after_change(session)

        def failed(error: BaseException) -> None:
            if isinstance(error, CommitUnknown):  # it may be stored: healing reads it back
                self.unavailable[game_id] = session
            self._store_failed(None, error)

        done = self._after_write(self.store.created(game_id, record), committed, failed)
        if done is not None:
            key = request_id or f"\0{game_id}"
            self._creating[key] = done
            done.add_done_callback(lambda _: self._creating.pop(key, None))
            await _answer(done)
        return session

    async def join(self, game_id: str, seat: int | None, name: str,
                   request_id: str = "") -> tuple[Session, int, str]:
        """Claim a person's seat; returns the session, the seat and its secret token.

        With a ``request_id``, a retry returns the same seat and token: the token is then an
        HMAC of the game, seat and id under the server's join key (never stored). A retry
        while the first is being committed waits for that commit.
        """
        session = self.get(game_id)
        if request_id:
            pending = session.pending.get((-1, request_id))
            if pending is not None:
                await _answer(pending)
                session = self.get(game_id)
            if request_id in session.join_requests:
                seat = session.join_requests[request_id]
                return session, seat, self._join_token(game_id, seat, request_id)
        if seat is None:
            free = [i for i, s in enumerate(session.table.seats) if not s.claimed]
            if not free:
                raise failed_precondition("NO_FREE_SEAT", "every seat of this game is taken")
            seat = free[0]
        token = (self._join_token(game_id, seat, request_id) if request_id
                 else secrets.token_urlsafe(24))
        digest = token_hash(token)
        entry = {"input": {"input": "Claim", "seat": seat}, "now_ms": self.clock.now_ms(),
                 "token_hash": digest, "name": name}
        if request_id:
            entry["join_request_id"] = request_id
        session.apply(tbl.Claim(seat), entry["now_ms"])  # type: ignore[arg-type]
        session.names[seat] = name
        claimed = seat

        def committed() -> None:
            if self.sessions.get(game_id) is not session:
                return  # dropped or discarded meanwhile
            self.tokens[digest] = (game_id, claimed)
            if request_id:
                session.join_requests[request_id] = claimed
            log.info("seat_claimed", game=game_id, seat=claimed)

        done = self._journal(session, entry, committed)
        if done is not None:
            if request_id:
                self._track(session, (-1, request_id), done)
            await _answer(done)
        return session, seat, token

    def _join_token(self, game_id: str, seat: int, request_id: str) -> str:
        mac = hmac.new(self.join_key, f"{game_id}\0{seat}\0{request_id}".encode(),
                       hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:24]).decode()

    # --- playing -----------------------------------------------------------------------------

    async def submit(self, session: Session, seat: int, move: tbl.Input, request_id: str,
                     expected_version: int | None, received: float | None = None) -> Applied:
        """Apply a person's input, at most once per request id, and answer once committed."""
        if request_id:
            pending = session.pending.get((seat, request_id))
            if pending is not None:
                await _answer(pending)
        applied, done = self._play(session, seat, move, request_id, expected_version, received)
        if done is not None:
            await _answer(done)
        return applied

    def submit_now(self, session: Session, seat: int, move: tbl.Input, request_id: str,
                   expected_version: int | None, received: float | None = None
                   ) -> Applied | Awaitable[Applied]:
        """``submit``, answered without a coroutine when nothing is to be waited for (the
        store committed at once, no earlier call with the same request id in flight): the
        ``Applied``, else an awaitable of it."""
        if request_id and (seat, request_id) in session.pending:
            return self.submit(session, seat, move, request_id, expected_version, received)
        applied, done = self._play(session, seat, move, request_id, expected_version, received)
        if done is None:
            return applied
        return _answered(done, applied)

    def _play(self, session: Session, seat: int, move: tbl.Input, request_id: str,
              expected_version: int | None, received: float | None
              ) -> tuple[Applied, asyncio.Future[None] | None]:
        """The answer to a person's input, applied and journaled (or remembered from an
        earlier call with the same request id), and the commit to wait for, if any."""
        if request_id:
            seen = session.remembered(seat, request_id)
            if seen is not None:
                return seen, None
        if expected_version is not None and expected_version != session.table.version:
            raise ServiceError(
                grpc.StatusCode.ABORTED, "STALE_VERSION",
                f"the game is at version {session.table.version}, not {expected_version}")
        now = self.clock.now_ms()
        if isinstance(move, tbl.Act) and type(move.action).__name__ in RATE_LIMITED_ACTIONS \
                and not self.slaps.allow((session.game_id, seat), now):
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED",
                               "too many slaps: slow down")
        try:
            applied = session.apply(move, now)
        except RuleError as error:
            log.info("action_refused", game=session.game_id, seat=seat,
                     action=_action_name(move), reason=error.reason.value)
            refusal = from_rule_error(error)
            refusal.logged = True  # one log line per refusal: the servicer does not repeat it
            raise refusal from error
        metrics.ACTIONS.inc(session.rules.kind, "person")
        if received is not None and isinstance(move, tbl.Act) \
                and type(move.action).__name__ == "Slap":
            for logged in applied.events:
                if type(logged.event.body).__name__ == "PileWon":
                    session.probes[logged.sequence] = received
        entry: dict[str, Any] = _NO_ENTRY
        if self.keeps_journal:
            entry = {"input": tbl.encode_input(session.rules, move), "now_ms": now}
            if request_id:
                entry["request_id"] = request_id
        if logcontext.per_action_lines:
            log.info("action_applied", game=session.game_id, seat=seat,
                     action=_action_name(move), version=applied.version,
                     events=len(applied.events))

        def committed() -> None:
            if request_id:
                session.remember(seat, request_id, applied)

        done = self._journal(session, entry, committed)
        if done is not None and request_id:
            self._track(session, (seat, request_id), done)
        return applied, done

    async def abandon(self, session: Session) -> None:
        """End a table nobody plays any more (housekeeping): the ``Abandon`` input, journaled
        like any other so a restart replays it; its event tells every stream."""
        if self.sessions.get(session.game_id) is not session \
                or session.table.game_over(session.rules):
            return
        now = self.clock.now_ms()
        move = tbl.Abandon()
        session.apply(move, now)
        log.info("game_abandoned", game=session.game_id, version=session.table.version)
        done = self._journal(session, {"input": tbl.encode_input(session.rules, move),
                                       "now_ms": now})
        if done is not None:  # a refused write is handled by the commit path (rebuilt later)
            await _settled(done)

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
        session.subscribers.discard(subscriber)
        current = self.sessions.get(session.game_id) or self.unavailable.get(session.game_id)
        if current is not None and current is not session:
            current.subscribers.discard(subscriber)

    # --- the commit path ------------------------------------------------------------------------

    def _journal(self, session: Session, entry: dict[str, Any],
                 committed: Callable[[], None] | None = None) -> asyncio.Future[None] | None:
        """Queue the input just applied. Once the store has committed it: ``committed``, then
        its events are published and bots and timers re-armed. Returns the future of all that
        (None when the store committed at once), which fails with ``StoreError`` when the
        write is refused; it completes whether or not anyone still awaits it."""
        upto = session.last_sequence
        pending = self.store.appended(session.game_id, session.journal_length, entry)
        self._checkpoint(session)
        if pending is None:  # committed at once (the memory store): no future to settle
            self._on_commit(session, upto, committed)
            return None
        done = self._after_write(pending,
                                 functools.partial(self._on_commit, session, upto, committed),
                                 lambda error: self._store_failed(session, error))
        if done is not None:
            session.writes.add(done)
            done.add_done_callback(session.writes.discard)
        return done

    def _on_commit(self, session: Session, upto: int,
                   committed: Callable[[], None] | None) -> None:
        """The store committed the input whose last event is ``upto``: ``committed``, then
        publication, bots and timers (unless the session was discarded meanwhile)."""
        if committed is not None:
            committed()
        _committed(session, upto)
        if self.sessions.get(session.game_id) is session:
            self._after_change(session)

    def _after_write(self, pending: Awaitable[None] | None, on_commit: Callable[[], None],
                     on_failure: Callable[[BaseException], None]
                     ) -> asyncio.Future[None] | None:
        """Run ``on_commit`` (or ``on_failure``) from the write's own completion."""
        if pending is None:
            on_commit()
            return None
        write = asyncio.ensure_future(pending)
        done: asyncio.Future[None] = write.get_loop().create_future()  # no loop lookup
        done.add_done_callback(_retrieve)

        def settle(finished: asyncio.Future[None]) -> None:
            error = (StoreError("the write was cancelled") if finished.cancelled()
                     else finished.exception())
            if error is None:
                on_commit()
                done.set_result(None)
                return
            failure = error if isinstance(error, StoreError) else StoreError(str(error))
            on_failure(failure)
            done.set_exception(failure)

        write.add_done_callback(settle)
        return done

    def _track(self, session: Session, key: tuple[int, str], done: asyncio.Future[None]) -> None:
        session.pending[key] = done
        done.add_done_callback(lambda _: session.pending.pop(key, None))

    def _checkpoint(self, session: Session) -> None:
        """Snapshot every N inputs and at game end; at game end, enforce the retention."""
        every = self.settings.snapshot_every
        finished = session.table.game_over(session.rules)
        if self.keeps_journal and (finished or (every > 0
                                                and session.journal_length % every == 0)):
            written = self.store.snapshot(session.game_id, session.journal_length,
                                          snapshot_data(session))
            if written is not None:  # a failed snapshot costs nothing: the journal has it all
                asyncio.ensure_future(written).add_done_callback(_retrieve)
        if finished:
            self.enforce_retention(keep=session.game_id)

    def _store_failed(self, session: Session | None, error: BaseException) -> None:
        """A write was not committed: nothing of it may stay in memory."""
        if session is not None and self.sessions.get(session.game_id) is session:
            game_id = session.game_id
            del self.sessions[game_id]
            metrics.GAMES.set(len(self.sessions))
            session.cancel_timers()
            self._forget_tokens(game_id)
            if isinstance(error, JournalConflict):
                log.warning("table_lost", game=game_id, error=str(error)[:200])
                for subscriber in session.subscribers:
                    subscriber.close()
                for lost in self.lost_listeners:
                    lost(game_id)
                return
            log.error("game_discarded", game=game_id, error=str(error)[:200])
            self.unavailable[game_id] = session
        if isinstance(error, JournalConflict):
            return
        if self.store_healthy:
            self.store_healthy = False
            log.error("store_unavailable", error=str(error)[:200])
            for listener in self.health_listeners:
                listener(False)
        if self._healing is None or self._healing.done():
            self._healing = asyncio.ensure_future(self._heal())

    async def _heal(self) -> None:
        """Probe the store until it commits again, then rebuild every discarded game from its
        durable prefix (its open streams carry on from where they were)."""
        delay = self.settings.store_retry_ms / 1000
        while True:
            await asyncio.sleep(delay)
            try:
                await _maybe_value(self.store.probe())
                for game_id in list(self.unavailable):
                    await self._rebuild(game_id)
            except StoreError as error:
                log.info("store_still_unavailable", error=str(error)[:200])
                continue
            if not self.unavailable:
                break
        self.store_healthy = True
        log.info("store_available")
        for listener in self.health_listeners:
            listener(True)

    async def _rebuild(self, game_id: str) -> None:
        old = self.unavailable[game_id]
        await asyncio.gather(*old.writes, return_exceptions=True)
        stored = await _maybe_value(self.store.load_game(game_id))
        del self.unavailable[game_id]
        if stored is None:
            for subscriber in old.subscribers:
                subscriber.close()
            return
        try:
            restored = restore(game_id, *stored)
        except RecoveryError as error:
            self._quarantine(game_id, str(error), _kind(stored[0]))
            for subscriber in old.subscribers:
                subscriber.close()
            return
        fresh = restored.session
        fresh.subscribers = old.subscribers
        fresh.published_sequence = min(old.published_sequence, fresh.last_sequence)
        self._install(restored)
        log.info("game_rebuilt", game=game_id, inputs=fresh.journal_length)
        self._after_change(fresh)

    def _install(self, restored: Restored) -> None:
        session = restored.session
        self.sessions[session.game_id] = session
        metrics.GAMES.set(len(self.sessions))
        for digest, seat in restored.tokens.items():
            self.tokens[digest] = (session.game_id, seat)
        if restored.create_request_id:
            self.create_requests[restored.create_request_id] = session.game_id

    def _quarantine(self, game_id: str, why: str, kind: str = "") -> None:
        self.quarantined[game_id] = (kind, why)
        log.error("game_quarantined", game=game_id, error=why[:300])

    def _forget_tokens(self, game_id: str) -> None:
        for digest, (gid, _) in list(self.tokens.items()):
            if gid == game_id:
                del self.tokens[digest]

    # --- after every change: fan-out, bots, timers -------------------------------------------

    def _after_change(self, session: Session) -> None:
        self._publish(session)
        table = session.table
        if not table.started or table.game_over(session.rules):
            session.cancel_timers()
            return
        if table.deadlines or session.deadline_timers:
            self._schedule_deadlines(session)
        if session.bot_timers or table.seats is not session.seats_without_bots:
            self._schedule_bots(session)

    def _publish(self, session: Session) -> None:
        fresh = session.events_after(session.published_sequence)
        if not fresh:
            return
        durable = session.durable_sequence
        if fresh[-1].event.sequence > durable:  # the log is in sequence order: a durable prefix
            fresh = [e for e in fresh if e.sequence <= durable]
            if not fresh:
                return
        session.published_sequence = fresh[-1].event.sequence
        _fan_out(session, tuple(fresh))
        compaction.compact_finished(session)

    def _schedule_deadlines(self, session: Session) -> None:
        wanted = set(session.table.deadlines)
        for key in list(session.deadline_timers):
            if key not in wanted:
                session.deadline_timers.pop(key).cancel()
        for seat, at in wanted:
            if (seat, at) not in session.deadline_timers:
                session.deadline_timers[(seat, at)] = self.clock.call_at(
                    at, functools.partial(self._fire, session, tbl.Timeout(seat)))

    def _schedule_bots(self, session: Session) -> None:
        for handle in session.bot_timers.values():
            handle.cancel()
        session.bot_timers.clear()
        seats = session.table.seats
        if not any(slot.bot_controlled for slot in seats):
            session.seats_without_bots = seats  # nothing to schedule until the seats change
            return
        delay = self.settings.bot_delay_ms
        for seat in tbl.pending_bot_seats(session.rules, session.table):
            jitter = int(delay * self._jitter.uniform(-0.2, 0.2)) if delay else 0
            at = self.clock.now_ms() + delay + jitter
            session.bot_timers[seat] = self.clock.call_at(
                at, functools.partial(self._fire, session, tbl.BotMove(seat)))

    def _fire(self, session: Session, move: tbl.Input) -> None:
        """A bot's or a timer's move: applied now, journaled, then fanned out once committed."""
        if self.sessions.get(session.game_id) is not session:
            return
        if isinstance(move, tbl.BotMove):
            session.bot_timers.pop(move.seat, None)
        now = self.clock.now_ms()
        try:
            applied = session.apply(move, now)
        except RuleError:
            self._after_change(session)  # the world moved on; look again
            return
        metrics.ACTIONS.inc(session.rules.kind, "server")
        if logcontext.per_action_lines:
            log.info("server_move", game=session.game_id, seat=move.seat,
                     input=type(move).__name__, version=applied.version)
        self._journal(session, {"input": tbl.encode_input(session.rules, move), "now_ms": now})

    # --- retention ---------------------------------------------------------------------------

    def enforce_retention(self, keep: str | None = None) -> None:
        """Drop (from memory and from the store) the oldest finished tables beyond the limit."""
        limit = self.settings.finished_retention
        if len(self.sessions) <= limit:
            return
        finished = [gid for gid, s in self.sessions.items()
                    if gid != keep and s.table.game_over(s.rules)]
        excess = len(finished) - limit + (1 if keep is not None else 0)
        for game_id in finished[:max(excess, 0)]:
            self.drop(game_id)

    def _evict_finished(self) -> None:
        """Drop the oldest finished tables beyond the retention limit (or to make room)."""
        finished = [gid for gid, s in self.sessions.items() if s.table.game_over(s.rules)]
        excess = max(len(finished) - self.settings.finished_retention, 1)
        for game_id in finished[:excess]:
            self.drop(game_id)

    def drop(self, game_id: str) -> None:
        """Forget a table, in memory and in the store."""
        if not self.discard(game_id):
            return
        written = self.store.dropped(game_id)
        if written is not None:
            asyncio.ensure_future(written).add_done_callback(_retrieve)

    def discard(self, game_id: str) -> bool:
        """Forget a table in memory only (the store keeps it: another node serves it now, or
        ``drop`` deletes it); False when this server did not hold it."""
        session = self.sessions.pop(game_id, None)
        if session is None:
            return False
        metrics.GAMES.set(len(self.sessions))
        session.cancel_timers()
        for subscriber in session.subscribers:
            subscriber.close()
        self._forget_tokens(game_id)
        return True

    async def adopt(self, game_id: str) -> Session | None:
        """Load one table from the store (snapshot-checked journal replay), arm its timers and
        bots, and serve it; None when the store does not hold it. A damaged one is
        quarantined (and refused with GAME_QUARANTINED)."""
        if game_id in self.sessions:
            return self.sessions[game_id]
        stored = await _maybe_value(self.store.load_game(game_id))
        if stored is None:
            return None
        if game_id in self.sessions:  # adopted meanwhile
            return self.sessions[game_id]
        try:
            restored = restore(game_id, *stored)
        except RecoveryError as error:
            self._quarantine(game_id, str(error), _kind(stored[0]))
            raise quarantined_refusal(game_id) from error
        self.quarantined.pop(game_id, None)
        self._install(restored)
        self._after_change(restored.session)
        return restored.session

    # --- start and stop ------------------------------------------------------------------------

    async def recover(self) -> None:
        """Restore every stored table before serving; a damaged one is quarantined alone."""
        started = time.perf_counter()
        stored = await _maybe_value(self.store.load())
        inputs = 0
        for game_id, record, snapshot, journal in stored:
            inputs += len(journal)
            try:
                restored = restore(game_id, record, snapshot, journal)
            except RecoveryError as error:
                self._quarantine(game_id, str(error), _kind(record))
                continue
            self._install(restored)
        self.enforce_retention()
        for session in self.sessions.values():
            self._after_change(session)  # publish nothing yet, arm the timers and the bots
        if stored:
            log.info("recovered", games=len(self.sessions), quarantined=len(self.quarantined),
                     dropped=len(stored) - len(self.sessions) - len(self.quarantined),
                     inputs=inputs, seconds=round(time.perf_counter() - started, 3))

    def end_streams(self) -> None:
        """The server is stopping: every open event stream ends now (UNAVAILABLE /
        SERVER_STOPPING, with where to resume) instead of holding the stop for its grace."""
        self.stopping = True
        for session in [*self.sessions.values(), *self.unavailable.values()]:
            for subscriber in list(session.subscribers):
                subscriber.close()

    async def close(self) -> None:
        self.stopping = True
        for session in self.sessions.values():
            session.cancel_timers()
            for subscriber in session.subscribers:
                subscriber.close()
        if self._healing is not None:
            self._healing.cancel()
        for session in list(self.sessions.values()):
            await asyncio.gather(*session.writes, return_exceptions=True)
        self.store.close()


def quarantined_refusal(game_id: str) -> ServiceError:
    """What a call for a quarantined game is told."""
    return failed_precondition("GAME_QUARANTINED", f"game {game_id} is quarantined: its stored "
                               "records are damaged; an operator must look at it")


def _store_unavailable() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                        "the store is not accepting writes; nothing of this request was kept: "
                        "retry it (with the same request_id)")


def store_refusal(error: StoreError) -> ServiceError:
    """What a caller whose input was not committed is told."""
    if isinstance(error, CreateConflict):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                            "another server created the table of this request_id; retry with "
                            "the same request_id to get it")
    if isinstance(error, JournalConflict):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                            "another server took this table over; retry")
    if isinstance(error, CommitUnknown):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                            "the store cannot tell whether this request was committed: it "
                            "may have been applied; retry with the same request_id")
    return _store_unavailable()


def _fan_out(session: Session, batch: tuple[LoggedEvent, ...]) -> None:
    """Hand every stream of the table the change's events with their message as its seat
    sees them, built once per view (once for everyone when the game hides nothing)."""
    public = not session.rules.hides_events
    messages: dict[int | None, bytes] = {}
    for subscriber in list(session.subscribers):
        view = None if public else subscriber.seat
        message = messages.get(view)
        if message is None:
            message = messages[view] = convert.events_wire(session, batch, view)
        subscriber.offer(batch, message)


_NO_ENTRY: dict[str, Any] = {}
"""The journal entry handed to a store that keeps nothing (``MemoryStore``): never filled."""


async def _answered(done: asyncio.Future[None], applied: Applied) -> Applied:
    """``applied``, once ``done`` (its commit) has settled as ``_answer`` answers it."""
    await _answer(done)
    return applied


async def _answer(done: asyncio.Future[None]) -> None:
    """Wait for a commit without being able to cancel it; a refused write is UNAVAILABLE."""
    try:
        await asyncio.shield(done)
    except StoreError as error:
        raise store_refusal(error) from error


async def _settled(done: asyncio.Future[None]) -> None:
    await asyncio.wait([done])


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception retrieved (its failure is handled elsewhere)."""
    if not future.cancelled():
        future.exception()


def _kind(record: Any) -> str:
    kind = record.get("kind") if isinstance(record, dict) else None
    return kind if isinstance(kind, str) else ""


def _action_name(move: tbl.Input) -> str:
    if isinstance(move, tbl.Act):
        return type(move.action).__name__
    return type(move).__name__


def _committed(session: Session, upto: int) -> None:
    """The store has committed every input up to the one whose last event is ``upto``."""
    if upto > session.durable_sequence:
        session.durable_sequence = upto


async def _maybe_value(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value
