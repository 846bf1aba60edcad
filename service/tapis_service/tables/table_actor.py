"""The table actor: every input to a table this server holds goes through here.

A person's action (``submit``), a join (``claim``), a backend's replacement of a seat's holder
(``replace``), a new table (``open``), a server move (``play``: a bot's, a turn timer's) and
the end of an abandoned table (``abandon``) each take the same steps in one function: check,
apply (the engine; a refusal changes nothing), await the journal write, publish, answer. A
person's or a backend's call (``SHIELDED``) runs as an input of its own (``shielding.Shield``:
a task's steps without a task): a caller that goes away (cancelled, past its deadline) changes
nothing of its input's fate — what is applied is committed (then published, and remembered
under its request id, whether or not anyone still waits) or discarded with its table's session
(``healing``). Memory never runs ahead of the journal for long: only committed inputs' events
are published.

The loop never interleaves inside a step, so a table's inputs are applied one at a time without
a lock, and their journal writes are queued in the order they were applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.errors import RuleError
from tapis_service.door import logcontext
from tapis_service.door.ratelimit import TokenBuckets
from tapis_service.observe import metrics
from tapis_service.observe.errors import ServiceError, from_rule_error
from tapis_service.stores.store import COMMITTED, CommitUnknown, StoreError
from tapis_service.tables import fanout, realtime
from tapis_service.tables.autoplay import Autoplay
from tapis_service.tables.healing import store_refusal
from tapis_service.tables.ownership import spectator_token
from tapis_service.tables.replacing import Replacement, hand_over, replacement
from tapis_service.tables.session import (
    HANDED_OVER,
    Applied,
    PendingRequest,
    RequestKind,
    Session,
)
from tapis_service.tables.shielding import Shield, retrieve
from tapis_service.tables.streams import revoked
from tapis_service.tables.table_writes import NO_ENTRY, TableWrites
from tapis_service.tables.tokens import token_hash

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost

log = structlog.get_logger("tapis.host")

SHIELDED = ("submit", "claim", "replace", "rotate_spectator")
"""The table actor's methods run shielded: each hands its input's coroutine (the method of the
same name with a leading underscore) to the actor's ``Shield``."""


def _action_name(move: tbl.Input) -> str:
    if isinstance(move, tbl.Act):
        return type(move.action).__name__
    return type(move).__name__


class TableActor(TableWrites):
    """Applies, journals and publishes the inputs of every table of ``host``."""

    def __init__(self, host: GameHost) -> None:
        self.host = host
        self.committed = host  # declared by TableWrites (annotated again, mypyc visits it twice)
        self.tables = host.tables
        self.store = host.store
        self.clock = host.clock
        self._now_ms = host.clock.now_ms
        """The clock's reading, bound once (every action reads it)."""
        self.settings = host.settings
        self.keeps_journal = host.keeps_journal
        self.slaps = TokenBuckets(host.settings.slap_rate_per_s, host.settings.slap_burst)
        self.autoplay = Autoplay(host.settings, host.clock, self.play)
        self._moves: set[asyncio.Task[None]] = set()
        self._acted: dict[str, list[int]] = {}
        """Game kind -> its count of persons' inputs (``metrics.ACTIONS``)."""
        self.shield = Shield(host.keeps_journal)

    # --- the inputs, shielded (``SHIELDED``) -------------------------------------------------

    def submit(self, session: Session, seat: int, move: tbl.Input, request_id: str,
               expected_version: int | None, received: float | None = None
               ) -> Awaitable[Applied]:
        """A person's input, applied at most once per request id; answered once committed."""
        return self.shield.run(self._submit(session, seat, move, request_id, expected_version,
                                            received))

    def claim(self, session: Session, seat: int | None, name: str, request_id: str,
              scope: str = "") -> Awaitable[tuple[Session, int, str]]:
        """A person takes a seat: (the session, the seat, its secret token). With a
        ``request_id``, a retry from the same ``scope`` (``ownership.scope_of``) gets the same
        seat and token (even while the first commits); another scope's id is a join of its
        own."""
        return self.shield.run(self._claim(session, seat, name, request_id, scope))

    def replace(self, session: Session, seat: int, player_id: str, name: str,
                request_id: str) -> Awaitable[tuple[Session, Replacement]]:
        """The backend gives ``seat`` to ``player_id`` ("": to nobody; ``replacing``): the
        former token is revoked and its streams end at once; answered (the session and the
        replacement) once committed. A retry with the same ``request_id`` gets the same
        answer."""
        return self.shield.run(self._replace(session, seat, player_id, name, request_id))

    def rotate_spectator(self, session: Session, request_id: str
                         ) -> Awaitable[tuple[Session, int]]:
        """The backend revokes the table's spectator token and gets the next one: calls with
        the former one are refused TOKEN_REVOKED and its open streams end so at once (after
        what was published before); answered (the session and the new generation) once
        committed. A retry with the same ``request_id`` gets the same answer. No engine input:
        the journal entry carries the generation and the revoked token's hash."""
        return self.shield.run(self._rotate_spectator(session, request_id))

    # --- the inputs (the shielded ones' coroutines first) -------------------------------------

    async def _submit(self, session: Session, seat: int, move: tbl.Input, request_id: str,
                      expected_version: int | None, received: float | None) -> Applied:
        """``submit``'s input."""
        # discarded, moved or rested (finished, then loaded back) while this waited?
        session = self.tables.session(session.game_id) or await self.host.find(session.game_id)
        # 1. check
        asked = None  # the request a retry meanwhile waits on (only while a write is awaited)
        if request_id:
            if session.pending:
                earlier = session.pending.get(
                    PendingRequest(RequestKind.SEAT_ACTION, request_id, seat))
                if earlier is not None:  # the same input, being committed: its answer
                    return await earlier
            answers = session.request_ids.get(seat)
            if answers is not None and request_id in answers:  # committed already: its answer
                seen = session.remembered(seat, request_id)
                assert seen is not None
                return seen
        if expected_version is not None and expected_version != session.table.version:
            raise ServiceError(
                grpc.StatusCode.ABORTED, "STALE_VERSION",
                f"the game is at version {session.table.version}, not {expected_version}")
        now = self._now_ms()
        limited = realtime.LIMITED[session.rules.kind]  # is_rate_limited, inlined
        real_time = bool(limited) and isinstance(move, tbl.Act) and type(move.action) in limited
        if real_time and not self.slaps.allow((session.game_id, seat), now):
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED",
                               "too many slaps: slow down")
        # 2. apply
        try:
            applied = session.apply(move, now)
        except RuleError as error:
            raise _refused(session, seat, move, error) from error
        acted = self._acted.get(session.rules.kind)  # metrics.ACTIONS, its cell looked up once
        if acted is None:
            acted = self._acted[session.rules.kind] = metrics.ACTIONS.cell(session.rules.kind,
                                                                           "person")
        acted[0] += 1
        if real_time and received is not None:
            realtime.probe_outcomes(session.rules, move, applied, received, session.probes)
        # 3. await the journal write
        upto = session.table.next_sequence - 1
        entry = self._entry(session, move, now) if self.keeps_journal else NO_ENTRY
        if request_id and self.keeps_journal:
            entry["request_id"] = request_id
        write = self._queue(session, entry)
        if write is not COMMITTED:  # a store that keeps nothing: nothing to wait for
            if request_id:
                asked = PendingRequest(RequestKind.SEAT_ACTION, request_id, seat)
            try:
                await self._settle(session, write, asked)
            except ServiceError as refusal:  # the line says what the caller is told
                refusal.logged = True
                log.info("action_in_doubt" if refusal.reason == "COMMIT_UNKNOWN"
                         else "action_refused", game=session.game_id, seat=seat,
                         action=_action_name(move), code=refusal.code.name,
                         reason=refusal.reason)
                raise
        # 4. publish (and remember the answer)
        if request_id:
            session.remember(seat, request_id, applied)
        self._committed(session, upto)
        # 5. answer: the line is written once the answer is known (committed)
        if logcontext.per_action_lines:
            log.info("action_applied", game=session.game_id, seat=seat,
                     action=_action_name(move), version=applied.version,
                     events=len(applied.events))
        return applied

    async def _claim(self, session: Session, seat: int | None, name: str,
                     request_id: str, scope: str) -> tuple[Session, int, str]:
        """``claim``'s input."""
        session = self.tables.session(session.game_id) or await self.host.find(session.game_id)
        tokens = self.host.tokens
        # 1. check
        asked = PendingRequest(RequestKind.JOIN, request_id, scope=scope) if request_id else None
        if asked is not None:
            earlier = session.pending.get(asked)
            if earlier is not None:
                return await earlier
            known = session.join_requests.get((scope, request_id))
            if known == HANDED_OVER:  # its seat is another holder's now
                raise revoked()
            if known is not None:
                return session, known, tokens.issue(session.game_id, known, request_id)
        if seat is None:
            free = [i for i, s in enumerate(session.table.seats) if not s.claimed]
            if not free:
                raise ServiceError(grpc.StatusCode.FAILED_PRECONDITION, "NO_FREE_SEAT",
                                   "every seat of this game is taken")
            seat = free[0]
        token = tokens.issue(session.game_id, seat, request_id)
        digest = token_hash(token)
        # 2. apply
        now = self.clock.now_ms()
        session.name_holder(seat, name, session.apply(tbl.Claim(seat), now))
        # 3. await the journal write
        upto = session.last_sequence
        entry = {"input": {"input": "Claim", "seat": seat}, "now_ms": now,
                 "token_hash": digest, "name": name}
        if request_id:
            entry["join_request_id"] = request_id
            if scope:
                entry["join_scope"] = scope
        await self._journal(session, entry, asked)
        # 4. publish (and know the token)
        if self.tables.session(session.game_id) is session:
            tokens.add(digest, session.game_id, seat)
            if request_id:
                session.join_requests[scope, request_id] = seat
            log.info("seat_claimed", game=session.game_id, seat=seat)
        self._committed(session, upto)
        # 5. answer
        return session, seat, token

    async def _replace(self, session: Session, seat: int, player_id: str, name: str,
                       request_id: str) -> tuple[Session, Replacement]:
        """``replace``'s input."""
        session = self.tables.session(session.game_id) or await self.host.find(session.game_id)
        tokens = self.host.tokens
        # 1. check
        asked = PendingRequest(RequestKind.REPLACE, request_id) if request_id else None
        if asked is not None:
            earlier = session.pending.get(asked)
            if earlier is not None:
                return await earlier
            if request_id in session.replace_requests:
                return session, session.replace_requests[request_id]
        replaced = replacement(session, seat, player_id, name)
        # 2. apply (and revoke the former token, end its streams: what is queued still goes)
        now = self.clock.now_ms()
        move = tbl.Replace(seat)
        hand_over(session, replaced, "", self._apply(session, seat, move, now))
        tokens.revoke(session.game_id, seat)
        for subscriber in list(session.subscribers):
            if subscriber.seat == seat:
                subscriber.revoke()
        log.info("seat_replaced", game=session.game_id, seat=seat,
                 generation=replaced.generation, holder=bool(player_id))
        # 3. await the journal write
        upto = session.last_sequence
        token = replaced.token(tokens.key, session.game_id)
        entry = {"input": table_codec.encode_input(session.rules, move), "now_ms": now,
                 **replaced.entry()}
        if token:
            entry["token_hash"] = token_hash(token)
        if request_id:
            entry["replace_request_id"] = request_id
        await self._journal(session, entry, asked)
        # 4. publish (and know the new token)
        if self.tables.session(session.game_id) is session:
            if token:
                tokens.add(token_hash(token), session.game_id, seat)
            if request_id:
                session.replace_requests[request_id] = replaced
        self._committed(session, upto)
        # 5. answer
        return session, replaced

    async def _rotate_spectator(self, session: Session, request_id: str
                                ) -> tuple[Session, int]:
        """``rotate_spectator``'s input."""
        session = self.host.get(session.game_id)
        tokens = self.host.tokens
        # 1. check
        asked = PendingRequest(RequestKind.ROTATE, request_id) if request_id else None
        if asked is not None:
            earlier = session.pending.get(asked)
            if earlier is not None:
                return await earlier
            if request_id in session.rotate_requests:
                return session, session.rotate_requests[request_id]
        # 2. apply: revoke the former token, end its streams
        generation = session.spectator_generation + 1
        former = token_hash(spectator_token(tokens.key, session.game_id, generation - 1))
        session.spectator_generation = generation
        session.journal_length += 1
        tokens.add_revoked(former, session.game_id, spectator=True)
        for subscriber in list(session.subscribers):
            if subscriber.spectator_token:
                subscriber.revoke()
        log.info("spectator_token_rotated", game=session.game_id, generation=generation)
        # 3. await the journal write
        entry: dict[str, Any] = {"spectator_generation": generation, "revoked": former,
                                 "now_ms": self.clock.now_ms()}
        if request_id:
            entry["rotate_request_id"] = request_id
        await self._journal(session, entry, asked)
        # 4. answer (nothing to publish: spectators see no event of it)
        if request_id and self.tables.session(session.game_id) is session:
            session.rotate_requests[request_id] = generation
        return session, generation

    async def open(self, session: Session, record: dict[str, Any], request_id: str) -> Session:
        """A new table: served (and its request id answered) once its record is committed
        (the host runs it in a task of its own, counted among the tables being created)."""
        upto = session.last_sequence
        try:
            await self.store.created(session.game_id, record)
        except StoreError as error:
            # in doubt, it may be stored: healing reads it back
            self.tables.not_created(session, in_doubt=isinstance(error, CommitUnknown))
            self.committed.write_failed(None, error)
            raise store_refusal(error) from error
        except BaseException:
            self.tables.not_created(session, in_doubt=False)
            raise
        log.info("game_created", game=session.game_id, kind=session.rules.kind,
                 seats=len(session.table.seats),
                 bots=sum(s.bot is not None for s in session.table.seats))
        session.durable_sequence = max(session.durable_sequence, upto)  # committed
        self.tables.created(session, request_id)  # served, published and armed (lifecycle)
        if session.game_over():
            self.committed.finished(session)
        return session

    def play(self, session: Session, move: tbl.Input) -> None:
        """A server move (a bot's, a turn timer's), from its timer: published once committed
        (at once for a store that keeps nothing: a manual clock plays a bots' game out)."""
        if isinstance(move, tbl.BotMove):
            session.bot_timers.pop(move.seat, None)
        # 1. check
        if self.tables.session(session.game_id) is not session:
            return
        if isinstance(move, tbl.BotMove) and session.durable_sequence < session.last_sequence:
            # armed before an input awaiting its commit: it would react to a state nobody has
            # seen, too soon; it reacts from now instead (the commit's rearm draws again; 1 ms
            # at least: never due at once again while the commit cannot land)
            self.autoplay.arm_bot(session, move.seat, at_least_ms=1)
            return
        # 2. apply
        now = self.clock.now_ms()
        try:
            applied = session.apply(move, now)
        except RuleError as error:
            if isinstance(move, tbl.Timeout) and _due(session.table, move.seat, now):
                # the engine refuses a deadline that has passed (a bug): arming it again would
                # only fire it again at once
                log.error("turn_timer_refused", game=session.game_id, seat=move.seat,
                          reason=error.reason.value)
                return
            self.after_change(session)  # the world moved on; look again
            return
        metrics.ACTIONS.inc(session.rules.kind, "server")
        if logcontext.per_action_lines:
            log.info("server_move", game=session.game_id, seat=getattr(move, "seat", None),
                     input=type(move).__name__, version=applied.version)
        # 3. the journal write, and 4. publish once it is committed
        self._publish_once_committed(session, self._entry(session, move, now))

    def resume(self, session: Session) -> None:
        """A table read back into memory (restored, rebuilt, adopted), which nobody could play
        at meanwhile: each person awaited gets a whole turn from now at least (``tbl.Resume``:
        journaled, published once committed; ``tbl.MAX_RESUMES`` a move). Armed by its loading."""
        now = self._now_ms()
        if tbl.resume_due(session.table, now):
            move = tbl.Resume()
            session.apply(move, now)
            log.info("turn_timers_resumed", game=session.game_id,
                     deadlines=dict(session.table.deadlines))
            self._publish_once_committed(session, self._entry(session, move, now), arm=False)

    def _publish_once_committed(self, session: Session, entry: dict[str, Any],
                                arm: bool = True) -> None:
        """Queue a server input's journal write; once committed, publish (and re-arm the
        table, unless not ``arm``)."""
        upto = session.last_sequence
        write = self._queue(session, entry)
        if write is COMMITTED:
            self._published(session, upto, arm)
            return
        task = asyncio.ensure_future(self._once_committed(session, write, upto, arm))
        self._moves.add(task)
        task.add_done_callback(self._moves.discard)
        task.add_done_callback(retrieve)

    async def _once_committed(self, session: Session, write: Awaitable[None], upto: int,
                              arm: bool) -> None:
        try:
            await self._settle(session, write)
        except ServiceError:  # refused: healing's business
            return
        self._published(session, upto, arm)

    def _published(self, session: Session, upto: int, arm: bool) -> None:
        if arm:
            self._committed(session, upto)
            return
        session.durable_sequence = max(session.durable_sequence, upto)
        if self.tables.session(session.game_id) is session:
            fanout.publish(session)

    async def abandon(self, session: Session, by_backend: bool = False) -> None:
        """End a table nobody plays any more (housekeeping), or one its backend ends
        (``by_backend``, between games too): the ``Abandon`` input, journaled like any other so
        a restart replays it; its event tells every stream."""
        # 1. check
        if self.tables.session(session.game_id) is not session or session.table.abandoned \
                or (session.game_over() and not by_backend):
            return
        # 2. apply
        now = self.clock.now_ms()
        move = tbl.Abandon()
        session.apply(move, now)
        session.ended_by_backend = by_backend
        log.info("game_abandoned", game=session.game_id, version=session.table.version,
                 by_backend=by_backend)
        # 3. await the journal write (a refused one is healing's business)
        upto = session.last_sequence
        entry: dict[str, Any] = {"input": table_codec.encode_input(session.rules, move),
                                 "now_ms": now}
        if by_backend:
            entry["ended_by"] = "backend"
        write = self._queue(session, entry)
        try:
            await self._settle(session, write)
        except ServiceError:  # refused: healing's business
            if by_backend:
                raise
            return
        # 4. publish
        self._committed(session, upto)

    # --- the steps ---------------------------------------------------------------------------

    def _apply(self, session: Session, seat: int, move: tbl.Input, now: int) -> Applied:
        """The engine's step; a refusal (logged once: ``_refused``) changes nothing."""
        try:
            return session.apply(move, now)
        except RuleError as error:
            raise _refused(session, seat, move, error) from error

    def _committed(self, session: Session, upto: int) -> None:
        """The store committed every input up to the one whose last event is ``upto``: its
        events are durable; publish them (unless the session was discarded meanwhile)."""
        if upto > session.durable_sequence:
            session.durable_sequence = upto
        if self.tables.session(session.game_id) is session \
                and self._after_change(session):  # finished: it rests at once if it may
            self.committed.finished(session)

    def after_change(self, session: Session) -> None:
        """File a backend's results, publish what is durable, then arm the bots and timers
        the table now calls for (the lifecycle's arm: the lobby is told its status anew)."""
        session.listed_over = None
        self._after_change(session)

    def _after_change(self, session: Session) -> bool:
        """``after_change``; whether the table's game is over."""
        over = session.game_over()
        committed = self.committed
        committed.publishing(session, over)  # before it compacts a finished game
        fanout.publish(session)
        self.autoplay.rearm(session, over)
        committed.armed(session)
        return over

    async def settle(self) -> None:
        """Wait for the server moves in progress (stopping)."""
        while self._moves:
            await asyncio.gather(*list(self._moves), return_exceptions=True)


def _refused(session: Session, seat: int, move: tbl.Input, error: RuleError) -> ServiceError:
    """The refusal of an input the engine refused, logged (once, here)."""
    log.info("action_refused", game=session.game_id, seat=seat, action=_action_name(move),
             reason=error.reason.value)
    refusal = from_rule_error(error)
    refusal.logged = True
    return refusal


def _due(table: tbl.Table, seat: int, now: int) -> bool:
    """``seat`` has a deadline and it has passed."""
    at = table.deadline_of(seat)
    return at is not None and at <= now

