"""The tapis.v1.GameService servicer: thin adapters from RPCs to the game host."""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_engine.errors import RuleError
from tapis_service import compaction, convert, logcontext, metrics
from tapis_service.callguard import UNDECODABLE, checks_decoding, invalid_request
from tapis_service.errors import ServiceError, from_rule_error, invalid_argument, to_status
from tapis_service.host import GameHost
from tapis_service.housekeeping import Housekeeping
from tapis_service.limits import check_game_id, check_sizes, clip, peer_host
from tapis_service.ratelimit import PeerLimits
from tapis_service.session import Applied, Session
from tapis_service.streams import StreamGuard, resume_at, stopping, too_slow

log = structlog.get_logger("tapis.rpc")

R = TypeVar("R")
SERVICE = pb.DESCRIPTOR.services_by_name["GameService"].full_name
MAX_PAGE = 1000
BACKLOG_CHUNK = 64
"""Missed events sent per stream message when a stream catches up."""


def _token(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            text = value if isinstance(value, str) else value.decode()
            scheme, _, token = text.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                                   "send the seat token as `authorization: Bearer <token>`")
            return token.strip()
    return None


def _refusal(error: Exception) -> ServiceError:
    if isinstance(error, RuleError):
        return from_rule_error(error)
    assert isinstance(error, ServiceError)
    return error


def unary(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Bind the RPC name to the logs and map every refusal to its status, once."""

    rpc = method.__name__

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        game_id = getattr(request, "game_id", None)
        bound = logcontext.bind(rpc=rpc, game=None if game_id is None else clip(game_id))
        try:
            check_sizes(request)  # before any other work
            if game_id is not None:
                check_game_id(game_id)
            return await method(self, request, context)
        except (RuleError, ServiceError) as error:
            refusal = _refusal(error)
            metrics.REFUSALS.labels(refusal.code.name, refusal.reason).inc()
            if not refusal.logged:  # else an action_refused line said it all
                log.info("refused", code=refusal.code.name, reason=refusal.reason)
            await context.abort_with_status(to_status(refusal))
            raise AssertionError("unreachable") from error
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


def _observe(probes: dict[int, float], sequence: int) -> None:
    """A probed event is about to be sent for the first time: record its latency."""
    received = probes.pop(sequence, None)
    if received is not None:
        metrics.SLAP_TO_PILE_WON.observe(time.perf_counter() - received)


def _rate_limited(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", message)


class GameServicer(pb_grpc.GameServiceServicer):
    """Every RPC of tapis.v1.GameService."""

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

    def _seat(self, session: Session, context: grpc.aio.ServicerContext,
              token: str | None = None) -> int | None:
        """The caller's seat (from ``token``, else from the call's headers); a wrong token
        counts against the caller's address."""
        try:
            return self.host.seat_of(session, token if token is not None else _token(context))
        except ServiceError as error:
            if error.code == grpc.StatusCode.UNAUTHENTICATED and not self.peers.allow_bad_token(
                    peer_host(context.peer()), self.host.clock.now_ms()):
                raise _rate_limited("too many calls with a wrong seat token; slow down") \
                    from error
            raise

    @unary
    async def CreateGame(self, request: pb.CreateGameRequest,
                         context: grpc.aio.ServicerContext) -> pb.CreateGameResponse:
        if not self.peers.allow_create(peer_host(context.peer()), self.host.clock.now_ms()):
            raise _rate_limited("too many tables created from your address; try again later")
        arguments = convert.create_arguments(request, self.host.settings.allow_stacked_decks)
        session = await self.host.create(**arguments)
        return pb.CreateGameResponse(game=convert.view(session, None))

    @unary
    async def JoinGame(self, request: pb.JoinGameRequest,
                       context: grpc.aio.ServicerContext) -> pb.JoinGameResponse:
        name = convert.check_id(request.display_name, "display_name")
        seat = request.seat if request.HasField("seat") else None
        request_id = convert.check_id(request.request_id, "request_id")
        session, seat, token = await self.host.join(request.game_id, seat, name, request_id)
        self.housekeeping.touched(session)
        return pb.JoinGameResponse(seat=seat, seat_token=token,
                                   game=convert.view(session, seat))

    @unary
    async def GetGame(self, request: pb.GetGameRequest,
                      context: grpc.aio.ServicerContext) -> pb.GetGameResponse:
        session = self.host.get(request.game_id)
        seat = self._seat(session, context)
        return pb.GetGameResponse(game=convert.view(session, seat))

    @unary
    async def SubmitAction(  # type: ignore[override]
            self, request: pb.SubmitActionRequest, context: grpc.aio.ServicerContext) -> bytes:
        """The answer is the serialized ``SubmitActionResponse`` (see ``add_to_server``); a
        store that commits at once answers without a coroutine below this one."""
        received = time.perf_counter()
        session = self.host.get(request.game_id)
        token = _token(context)
        if token is None:
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REQUIRED",
                               "acting needs your seat token (authorization: Bearer <token>)")
        seat = self._seat(session, context, token)
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
        applied = self.host.submit_now(session, seat, move, request_id, expected, received)
        if not isinstance(applied, Applied):  # a store that commits later: wait for it
            applied = await applied
        self.housekeeping.touched(session)
        return compaction.answer_wire(session, applied, seat)

    @checks_decoding
    async def StreamEvents(  # type: ignore[override]
            self, request: pb.StreamEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Each message is a serialized ``StreamEventsResponse``, shared by every stream of
        the same view (see ``add_to_server``)."""
        try:
            if request is UNDECODABLE:  # CallGuard's decoder: bytes that are no request
                raise invalid_request("StreamEvents")
            check_sizes(request)
            check_game_id(request.game_id)
            session = self.host.get(request.game_id)
            seat = self._seat(session, context)
            stream = self.streams.open_stream(context.peer(), len(session.subscribers), context)
        except ServiceError as error:
            metrics.REFUSALS.labels(error.code.name, error.reason).inc()
            bound = logcontext.bind(rpc="StreamEvents",
                                    game=clip(getattr(request, "game_id", "")) or None)
            log.info("refused", code=error.code.name, reason=error.reason)
            logcontext.reset(bound)
            await context.abort_with_status(to_status(error))
            return
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
                await context.abort_with_status(to_status(too_slow(last), resume_at(last)))
            if self.host.stopping:
                await context.abort_with_status(to_status(stopping(last), resume_at(last)))
        finally:
            metrics.STREAMS.dec()
            self.streams.close_stream(stream)
            self.host.unsubscribe(session, subscriber)

    @unary
    async def ListGames(self, request: pb.ListGamesRequest,
                        context: grpc.aio.ServicerContext) -> pb.ListGamesResponse:
        start, size = page_bounds(request)
        kind = convert.kind_of(request.kind) if request.kind else None
        listed: list[Session | tuple[str, str]] = [
            s for s in self.host.sessions.values()
            if (kind is None or s.rules.kind == kind)
            and (request.include_finished or not s.table.game_over(s.rules))]
        listed.extend((game_id, game_kind)
                      for game_id, (game_kind, _) in self.host.quarantined.items()
                      if kind is None or game_kind == kind)
        page = listed[start:start + size]
        token = ""
        if start + size < len(listed):
            token = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return pb.ListGamesResponse(
            games=[convert.listing(s) if isinstance(s, Session)
                   else convert.quarantined_listing(*s) for s in page],
            next_page_token=token)


class _Registration:
    """Stands in for the server while the generated code registers the handlers."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.handlers = handlers


def _passing_bytes(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    def serializer(message: Any) -> bytes:
        return message if type(message) is bytes else serialize(message)

    return serializer


BYTES_ANSWERS = frozenset({"SubmitAction", "StreamEvents"})
"""Methods whose answers are always serialized bytes already: grpc sends them as they are."""


def add_to_server(servicer: GameServicer, server: grpc.aio.Server) -> None:
    """Register the servicer as the generated code does, except that an answer may already be
    serialized bytes (the fan-out serializes each event once per view, not once per stream)."""
    registration = _Registration()
    pb_grpc.add_GameServiceServicer_to_server(servicer, registration)
    handlers = {name: handler._replace(
                    response_serializer=None if name in BYTES_ANSWERS
                    else _passing_bytes(handler.response_serializer))
                for name, handler in registration.handlers.items()}
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
