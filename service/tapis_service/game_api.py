"""The game service's logic, free of any transport: one method per RPC of tapis.v1.GameService.

Each method takes the request message and the ``Caller`` and returns the response message (the
answers of ``SubmitAction`` and of ``StreamEvents`` come already serialized: the fan-out builds
each event's bytes once per view and every stream of that view shares them). A refusal is a
``ServiceError`` (an engine refusal is turned into one here): the transport maps it to its own
status once — the gRPC adapter (``servicer``), a cluster node's tunnel. Refusals are counted and
logged here, where they are decided, so a relayed refusal is not counted twice.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_engine.errors import RuleError
from tapis_service import compaction, convert, logcontext, metrics
from tapis_service.caller import Caller
from tapis_service.errors import ServiceError, from_rule_error, invalid_argument
from tapis_service.host import GameHost
from tapis_service.housekeeping import Housekeeping
from tapis_service.limits import check_game_id, check_sizes, clip, peer_host
from tapis_service.ratelimit import PeerLimits
from tapis_service.resting import RestingTable
from tapis_service.session import Session
from tapis_service.streams import StreamGuard, stopping, too_slow

log = structlog.get_logger("tapis.rpc")

R = TypeVar("R")
MAX_PAGE = 1000
BACKLOG_CHUNK = 64
"""Missed events sent per stream message when a stream catches up."""

EndStream = Callable[[ServiceError], None]
"""How a transport ends an open stream from outside its own task (the slow-stream watchdog):
with this refusal, sent behind what the transport already holds."""


def refusal_of(error: RuleError | ServiceError) -> ServiceError:
    """The service refusal for any refusal (an engine's is mapped once, here)."""
    return from_rule_error(error) if isinstance(error, RuleError) else error


def account(rpc: str, game_id: str | None, error: RuleError | ServiceError) -> ServiceError:
    """Count and log a refusal (once: one decided deeper down is logged there already)."""
    refusal = refusal_of(error)
    metrics.REFUSALS.labels(refusal.code.name, refusal.reason).inc()
    if not refusal.logged:
        bound = logcontext.bind(rpc=rpc, game=None if not game_id else clip(game_id))
        log.info("refused", code=refusal.code.name, reason=refusal.reason)
        logcontext.reset(bound)
        refusal.logged = True
    return refusal


def rpc(method: Callable[[GameApi, Any, Caller], Awaitable[R]]
        ) -> Callable[[GameApi, Any, Caller], Awaitable[R]]:
    """A unary RPC: its name and table bound to the logs, the request's sizes checked before
    any other work, every refusal raised as a counted and logged ``ServiceError``."""
    name = "".join(part.title() for part in method.__name__.split("_"))

    @functools.wraps(method)
    async def wrapper(self: GameApi, request: Any, caller: Caller) -> R:
        game_id = getattr(request, "game_id", None)
        bound = logcontext.bind(rpc=name, game=None if game_id is None else clip(game_id))
        try:
            check_sizes(request)
            if game_id is not None:
                check_game_id(game_id)
            return await method(self, request, caller)
        except (RuleError, ServiceError) as error:
            raise account(name, game_id, error) from None
        finally:
            logcontext.reset(bound)

    return wrapper


def page_bounds(request: pb.ListGamesRequest) -> tuple[int, int]:
    """(first position, page size) of a ListGames page, checked."""
    size = request.page_size or 100
    if size > MAX_PAGE:
        raise invalid_argument("INVALID_PAGE_SIZE", f"page_size is at most {MAX_PAGE}")
    start = 0
    if request.page_token:
        try:
            start = int(base64.urlsafe_b64decode(request.page_token.encode()).decode())
        except ValueError as error:
            raise invalid_argument("INVALID_PAGE_TOKEN", "page_token is not valid") from error
    return start, size


def page_token(start: int, size: int, total: int) -> str:
    """The ``next_page_token`` after the page of ``size`` from ``start`` ("" at the end)."""
    if start + size >= total:
        return ""
    return base64.urlsafe_b64encode(str(start + size).encode()).decode()


def _rate_limited(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", message)


def _token_required() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REQUIRED",
                        "acting needs your seat token (authorization: Bearer <token>)")


def _bad_authorization() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                        "send the seat token as `authorization: Bearer <token>`")


def _observe(probes: dict[int, float], sequence: int) -> None:
    """A probed event is about to be sent for the first time: record its latency."""
    received = probes.pop(sequence, None)
    if received is not None:
        metrics.SLAP_TO_PILE_WON.observe(time.perf_counter() - received)


class GameApi:
    """Every RPC of tapis.v1.GameService, over the tables this server holds."""

    def __init__(self, host: GameHost, streams: StreamGuard | None = None,
                 peers: PeerLimits | None = None,
                 housekeeping: Housekeeping | None = None) -> None:
        self.host = host
        self.housekeeping = housekeeping or Housekeeping(host)
        settings = host.settings
        self.streams = streams or StreamGuard(
            host.clock, settings.max_streams_per_table, settings.max_streams_per_connection,
            settings.max_streams_per_peer, settings.stream_stall_ms)
        self.peers = peers or PeerLimits(settings.create_rate_per_s, settings.create_burst,
                                         settings.bad_token_rate_per_s, settings.bad_token_burst)

    def seat_of(self, session: Session, caller: Caller) -> int | None:
        """The caller's seat from its token (None: a spectator); a wrong token counts against
        the caller's address."""
        try:
            if caller.bad_authorization:
                raise _bad_authorization()
            return self.host.seat_of(session, caller.seat_token)
        except ServiceError as error:
            if error.code == grpc.StatusCode.UNAUTHENTICATED and not self.peers.allow_bad_token(
                    peer_host(caller.peer), self.host.clock.now_ms()):
                raise _rate_limited("too many calls with a wrong seat token; slow down") \
                    from error
            raise

    @rpc
    async def create_game(self, request: pb.CreateGameRequest,
                          caller: Caller) -> pb.CreateGameResponse:
        if not self.peers.allow_create(peer_host(caller.peer), self.host.clock.now_ms()):
            raise _rate_limited("too many tables created from your address; try again later")
        arguments = convert.create_arguments(request, self.host.settings.allow_stacked_decks)
        session = await self.host.create(**arguments)
        return pb.CreateGameResponse(game=convert.view(session, None))

    @rpc
    async def join_game(self, request: pb.JoinGameRequest,
                        caller: Caller) -> pb.JoinGameResponse:
        name = convert.check_id(request.display_name, "display_name")
        seat = request.seat if request.HasField("seat") else None
        request_id = convert.check_id(request.request_id, "request_id")
        session, seat, token = await self.host.join(request.game_id, seat, name, request_id)
        self.housekeeping.touched(session)
        return pb.JoinGameResponse(seat=seat, seat_token=token,
                                   game=convert.view(session, seat))

    @rpc
    async def get_game(self, request: pb.GetGameRequest, caller: Caller) -> pb.GetGameResponse:
        session = await self.host.find(request.game_id)
        return pb.GetGameResponse(game=convert.view(session, self.seat_of(session, caller)))

    @rpc
    async def submit_action(self, request: pb.SubmitActionRequest, caller: Caller) -> bytes:
        """The serialized ``SubmitActionResponse``, once the action is committed."""
        received = time.perf_counter()
        session = await self.host.find(request.game_id)
        if caller.seat_token is None and not caller.bad_authorization:
            raise _token_required()
        seat = self.seat_of(session, caller)
        assert seat is not None
        if request.HasField("seat") and request.seat != seat:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_SEAT",
                               f"your token is for seat {seat}, not seat {request.seat}")
        if not request.HasField("action"):
            raise invalid_argument("INVALID_ACTION", "the request has no action")
        request_id = convert.check_id(request.request_id, "request_id")
        move = convert.move_from_proto(session, seat, request.action)
        expected = request.expected_version if request.HasField("expected_version") else None
        logcontext.add(seat=seat)  # until the wrapper's reset
        applied = await self.host.submit(session, seat, move, request_id, expected, received)
        self.housekeeping.touched(session)
        return compaction.answer_wire(session, applied, seat)

    async def stream_events(self, request: pb.StreamEventsRequest, caller: Caller,
                            end: EndStream) -> AsyncIterator[bytes]:
        """Each message a serialized ``StreamEventsResponse``: the missed events, then each
        change as it is published. A stream that falls too far behind, or that the server ends
        because it stops, ends with a refusal saying where to resume. ``end`` is how the
        transport ends this stream from outside (the slow-stream watchdog)."""
        try:
            check_sizes(request)
            check_game_id(request.game_id)
            session = await self.host.find(request.game_id)
            seat = self.seat_of(session, caller)
            stream = self.streams.open_stream(caller.peer, len(session.subscribers), end)
        except (RuleError, ServiceError) as error:
            raise account("StreamEvents", request.game_id, error) from None
        clock = self.host.clock
        subscriber, compacted, backlog = self.host.subscribe(session, seat,
                                                             request.after_sequence)
        metrics.STREAMS.inc()
        try:
            last = request.after_sequence
            for message, sent in compaction.replay(compacted, seat, last, BACKLOG_CHUNK):
                last = sent
                stream.writing_since, stream.last = clock.now_ms(), last
                yield message
                stream.writing_since = None
            for start in range(0, len(backlog), BACKLOG_CHUNK):
                chunk = backlog[start:start + BACKLOG_CHUNK]
                last = chunk[-1].sequence
                stream.writing_since, stream.last = clock.now_ms(), last
                yield convert.events_wire(session, chunk, seat)
                stream.writing_since = None
            pending = subscriber.pending
            while True:
                while not pending:  # wait for the next change (None: the stream must end)
                    await subscriber.arrival()
                queued = pending.popleft()
                if queued is None:
                    break
                batch, response = queued
                if batch[0].event.sequence <= last:  # sent already in the backlog
                    batch = tuple(e for e in batch if e.sequence > last)
                    if not batch:
                        continue
                    response = convert.events_wire(session, batch, seat)
                last = batch[-1].event.sequence
                if session.probes:
                    for logged in batch:
                        _observe(session.probes, logged.sequence)
                stream.writing_since, stream.last = clock.now_ms(), last
                yield response
                stream.writing_since = None
            if subscriber.overflowed:
                raise too_slow(last)
            if self.host.stopping:
                raise stopping(last)
        finally:
            metrics.STREAMS.dec()
            self.streams.close_stream(stream)
            self.host.unsubscribe(session, subscriber)

    @rpc
    async def list_games(self, request: pb.ListGamesRequest,
                         caller: Caller) -> pb.ListGamesResponse:
        start, size = page_bounds(request)
        kind = convert.kind_of(request.kind) if request.kind else None
        listed: list[Session | RestingTable | tuple[str, str]] = [
            *self.host.listed(kind, request.include_finished)]
        listed.extend((game_id, game_kind)
                      for game_id, (game_kind, _) in self.host.quarantined.items()
                      if kind is None or game_kind == kind)
        page = listed[start:start + size]
        return pb.ListGamesResponse(
            games=[convert.listing(s) if isinstance(s, Session)
                   else s.to_proto() if isinstance(s, RestingTable)
                   else convert.quarantined_listing(*s) for s in page],
            next_page_token=page_token(start, size, len(listed)))
