"""The game host: every live session, seat credentials, bots, turn timers and fan-out.

The servicer hands it domain values (already converted from protobuf) and gets domain values
back; refusals are ``ServiceError`` or the engine's ``RuleError``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import os
import random
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

import grpc
import structlog

from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import rules_for
from tapis_service import compaction, metrics, recovery
from tapis_service.adapters import ADAPTERS
from tapis_service.clock import Clock
from tapis_service.errors import ServiceError, failed_precondition, not_found
from tapis_service.ratelimit import TokenBuckets
from tapis_service.session import Applied, CompactedEvents, LoggedEvent, Session, Subscriber
from tapis_service.settings import Settings
from tapis_service.store import MemoryStore, Store

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
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.tokens: dict[str, tuple[str, int]] = {}
        self.create_requests: dict[str, str] = {}
        self.slaps = TokenBuckets(settings.slap_rate_per_s, settings.slap_burst)
        self._tasks: set[asyncio.Task[None]] = set()
        self._jitter = random.Random()
        self.join_key = join_key(settings)

    # --- lookups --------------------------------------------------------------------------

    def get(self, game_id: str) -> Session:
        session = self.sessions.get(game_id)
        if session is None:
            raise not_found(f"no game {game_id!r} on this server")
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
        """Create a table (bots sit at once); refusals raise before anything is kept."""
        if request_id and request_id in self.create_requests:
            existing = self.sessions.get(self.create_requests[request_id])
            if existing is not None:
                return existing
        if len(self.sessions) >= self.settings.max_games:
            self._evict_finished()
            if len(self.sessions) >= self.settings.max_games:
                raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_GAMES",
                                   "this server holds as many games as it may; try later")
        if stacked_deck is not None and not self.settings.allow_stacked_decks:
            raise failed_precondition(
                "STACKED_DECKS_DISABLED",
                "stacked decks are only accepted by a server started with --allow-stacked-decks")
        rules = rules_for(kind)
        assert rules is not None
        if seed is None:
            seed = secrets.randbits(64)
        setup = GameSetup(seats=seats, seed=seed, options=options, stacked_deck=stacked_deck,
                          stacked_first=stacked_first)
        now = self.clock.now_ms()
        table, events = tbl.new_table(rules, setup, bots, turn_time_ms, now)
        game_id = secrets.token_hex(8)
        session = Session(game_id=game_id, rules=rules, adapter=ADAPTERS[kind], table=table,
                          created_ms=now, names=["" for _ in range(seats)])
        session.record(events)
        self.sessions[game_id] = session
        metrics.GAMES.set(len(self.sessions))
        if request_id:
            self.create_requests[request_id] = game_id
        record = {"kind": kind, "table": tbl.encode_table(rules, table), "created_ms": now,
                  "initial": tbl.encode_table(rules, tbl.Table(
                      kind=kind, setup=setup, turn_time_ms=turn_time_ms,
                      seats=tuple(tbl.SeatSlot(bot=b, claimed=b is not None) for b in bots))),
                  "request_id": request_id}
        upto = session.last_sequence
        await _maybe(self.store.created(game_id, record))
        _committed(session, upto)
        log.info("game_created", game=game_id, kind=kind, seats=seats,
                 bots=sum(b is not None for b in bots))
        self._after_change(session)
        return session

    async def join(self, game_id: str, seat: int | None, name: str,
                   request_id: str = "") -> tuple[Session, int, str]:
        """Claim a person's seat; returns the session, the seat and its secret token.

        With a ``request_id``, a retry returns the same seat and token: the token is then an
        HMAC of the game, seat and id under the server's join key (never stored).
        """
        session = self.get(game_id)
        if request_id and request_id in session.join_requests:
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
        if request_id:
            session.join_requests[request_id] = seat
        self.tokens[digest] = (game_id, seat)
        await self._journal(session, entry)
        log.info("seat_claimed", game=game_id, seat=seat)
        self._after_change(session)
        return session, seat, token

    def _join_token(self, game_id: str, seat: int, request_id: str) -> str:
        mac = hmac.new(self.join_key, f"{game_id}\0{seat}\0{request_id}".encode(),
                       hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:24]).decode()

    # --- playing -----------------------------------------------------------------------------

    async def submit(self, session: Session, seat: int, move: tbl.Input, request_id: str,
                     expected_version: int | None, received: float | None = None) -> Applied:
        """Apply a person's input, at most once per request id."""
        if request_id:
            seen = session.remembered(seat, request_id)
            if seen is not None:
                return seen
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
                     action=type(move).__name__, reason=error.reason.value)
            raise
        if request_id:
            session.remember(seat, request_id, applied)
        metrics.ACTIONS.labels(session.rules.kind, "person").inc()
        if received is not None and isinstance(move, tbl.Act) \
                and type(move.action).__name__ == "Slap":
            for logged in applied.events:
                if type(logged.event.body).__name__ == "PileWon":
                    session.probes[logged.sequence] = received
        entry: dict[str, Any] = {"input": tbl.encode_input(session.rules, move), "now_ms": now}
        if request_id:
            entry["request_id"] = request_id
        log.info("action_applied", game=session.game_id, seat=seat,
                 action=_action_name(move), version=applied.version,
                 events=len(applied.events))
        await self._journal(session, entry)
        self._after_change(session)
        return applied

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

    # --- after every change: persistence, fan-out, bots, timers -----------------------------

    async def _journal(self, session: Session, entry: dict[str, Any]) -> None:
        """Write the input just applied; once committed, its events may be published."""
        index = session.journal_length
        upto = session.last_sequence
        pending = self.store.appended(session.game_id, index, entry)
        recovery.after_append(self, session)
        await _maybe(pending)
        _committed(session, upto)

    def _after_change(self, session: Session) -> None:
        self._publish(session)
        if session.table.game_over(session.rules) or not session.table.started:
            session.cancel_timers()
            return
        self._schedule_deadlines(session)
        self._schedule_bots(session)

    def _publish(self, session: Session) -> None:
        fresh = tuple(e for e in session.events_after(session.published_sequence)
                      if e.sequence <= session.durable_sequence)
        if fresh:
            session.published_sequence = fresh[-1].sequence
            session.publish(fresh)
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
        delay = self.settings.bot_delay_ms
        for seat in tbl.pending_bot_seats(session.rules, session.table):
            jitter = int(delay * self._jitter.uniform(-0.2, 0.2)) if delay else 0
            at = self.clock.now_ms() + delay + jitter
            session.bot_timers[seat] = self.clock.call_at(
                at, functools.partial(self._fire, session, tbl.BotMove(seat)))

    def _fire(self, session: Session, move: tbl.Input) -> None:
        """A bot's or a timer's move: applied now, journaled, then fanned out."""
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
        metrics.ACTIONS.labels(session.rules.kind, "server").inc()
        log.info("server_move", game=session.game_id, seat=move.seat, input=type(move).__name__,
                 version=applied.version)
        entry = {"input": tbl.encode_input(session.rules, move), "now_ms": now}
        upto = session.last_sequence
        pending = self.store.appended(session.game_id, session.journal_length, entry)
        recovery.after_append(self, session)
        if pending is None:
            _committed(session, upto)
            self._after_change(session)
            return

        async def settle() -> None:
            await pending
            _committed(session, upto)
            self._after_change(session)

        task = asyncio.ensure_future(settle())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _evict_finished(self) -> None:
        """Drop the oldest finished tables beyond the retention limit (or to make room)."""
        finished = [gid for gid, s in self.sessions.items() if s.table.game_over(s.rules)]
        excess = max(len(finished) - self.settings.finished_retention, 1)
        for game_id in finished[:excess]:
            self.drop(game_id)

    def drop(self, game_id: str) -> None:
        session = self.sessions.pop(game_id, None)
        if session is None:
            return
        metrics.GAMES.set(len(self.sessions))
        session.cancel_timers()
        for subscriber in session.subscribers:
            subscriber.close()
        for digest, (gid, _) in list(self.tokens.items()):
            if gid == game_id:
                del self.tokens[digest]
        self.store.dropped(game_id)

    async def recover(self) -> None:
        """Restore every stored table before serving (see recovery.py)."""
        await recovery.recover(self)

    async def close(self) -> None:
        for session in self.sessions.values():
            session.cancel_timers()
            for subscriber in session.subscribers:
                subscriber.close()
        for task in list(self._tasks):
            await task
        self.store.close()


def _action_name(move: tbl.Input) -> str:
    if isinstance(move, tbl.Act):
        return type(move.action).__name__
    return type(move).__name__


def _committed(session: Session, upto: int) -> None:
    """The store has committed every input up to the one whose last event is ``upto``."""
    if upto > session.durable_sequence:
        session.durable_sequence = upto


async def _maybe(pending: Awaitable[None] | None) -> None:
    if pending is not None:
        await pending
