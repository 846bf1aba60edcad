"""The game service's logic, free of any transport: one method per RPC of tapis.v1.GameService.

Each method takes the request message and the ``Caller`` and returns the response message (the
answers of ``SubmitAction`` and of ``StreamEvents`` come already serialized: the fan-out builds
each event's bytes once per view and every stream of that view shares them). A refusal is a
``ServiceError`` (an engine refusal is turned into one here): the transport maps it to its own
status once — the gRPC adapter (``servicer``), a cluster node's tunnel. Refusals are counted and
logged here, where they are decided, so a relayed refusal is not counted twice.

Compiled by mypyc (``tools/compiled.py``): the two server streams, async generators, which it
does not compile, are ``tables.event_streams``, opened here (``open_stream``,
``results_backend``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_service.codec import convert, wire
from tapis_service.codec.moves import move_from_read
from tapis_service.codec.requests import ActionRequest
from tapis_service.door import logcontext
from tapis_service.door.api_keys import Backend, require
from tapis_service.door.caller import Caller
from tapis_service.door.capacity import Capacity
from tapis_service.door.limits import (
    QUOTE_CHARS,
    check_game_id,
    check_sizes,
    check_text,
    clip,
    peer_host,
)
from tapis_service.door.proxies import TrustedProxies
from tapis_service.door.quotas import CREATES, JOINS, LISTS, QuotaLimits, Quotas
from tapis_service.door.ratelimit import PeerLimits
from tapis_service.door.rpcs import BY_NAME
from tapis_service.door.security import Security
from tapis_service.observe import metrics
from tapis_service.observe.errors import (
    ServiceError,
    failed_precondition,
    from_rule_error,
    invalid_argument,
)
from tapis_service.stores.results import CursorAhead
from tapis_service.tables import event_streams, lobby, ownership
from tapis_service.tables.fanout import StreamWriter
from tapis_service.tables.healing import rebuilding_in_doubt
from tapis_service.tables.host import GameHost
from tapis_service.tables.housekeeping import Housekeeping
from tapis_service.tables.paging import page_cursor, page_size
from tapis_service.tables.session import Session
from tapis_service.tables.streams import EndStream, OpenStream, StreamGuard

log = structlog.get_logger("tapis.rpc")

R = TypeVar("R")


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


def _caused(error: ServiceError, cause: BaseException | None) -> ServiceError:
    """``error`` caused by ``cause``, as ``raise error from cause`` leaves it: this module is
    compiled, and mypyc compiles a ``raise``'s ``from`` into nothing (a cause is read:
    ``_cause``, ``connections.counts_against_address``)."""
    error.__cause__ = cause  # and __suppress_context__, as ``from`` does
    return error


def _cause(error: BaseException) -> ServiceError | None:
    """The refusal ``error`` answers, if any (the wrong token a ``RATE_LIMITED`` answered), kept
    as its cause when it is raised again: ``connections.counts_against_address`` reads it."""
    cause = error.__cause__
    return cause if isinstance(cause, ServiceError) else None


def rpc(method: Callable[[GameApi, Any, Caller], Awaitable[R]]
        ) -> Callable[[GameApi, Any, Caller], Awaitable[R]]:
    """A unary RPC: its name and table bound to the logs, the request's sizes checked before
    any other work, every refusal raised as a counted and logged ``ServiceError``."""
    # compiled, a method's __name__ is qualified ("GameApi.join_game"): its last part is the name
    name = "".join(part.title() for part in method.__name__.rpartition(".")[2].split("_"))
    writes = BY_NAME[name].writes  # every @rpc method is an RPC of the table (a KeyError if not)

    @functools.wraps(method)
    async def wrapper(self: GameApi, request: Any, caller: Caller) -> R:
        game_id = getattr(request, "game_id", None)
        bound = logcontext.enter(rpc=name, game=game_id if game_id is None or len(
            game_id) <= QUOTE_CHARS else clip(game_id))  # clip, inlined: every call
        try:
            if isinstance(request, ActionRequest):
                request.check_sizes()
            else:
                check_sizes(request)
            if not game_id and game_id is not None:
                check_game_id(game_id)
            return await method(self, request, caller)
        except (RuleError, ServiceError) as error:
            if writes and (discarded := self.host.tables.unavailable(game_id or "")) is not None:
                error = rebuilding_in_doubt(discarded, request.request_id, error)
            raise _caused(account(name, game_id, error), _cause(error))
        finally:
            if bound is not None:  # None: added into the call's own context (every transport)
                logcontext.leave(bound)

    return wrapper


def _rate_limited(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", message)


def _token_required() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REQUIRED",
                        "acting needs your seat token (authorization: Bearer <token>)")


def _bad_authorization() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                        "send the seat token as `authorization: Bearer <token>`")


class GameApi:
    """Every RPC of tapis.v1.GameService, over the tables this server holds."""

    def __init__(self, host: GameHost, streams: StreamGuard | None = None,
                 peers: PeerLimits | None = None,
                 housekeeping: Housekeeping | None = None,
                 security: Security | None = None) -> None:
        self.host = host
        self.security = security or Security()
        self.housekeeping = housekeeping or Housekeeping(host)
        settings = host.settings
        capacity = Capacity.of(settings)
        self.streams = streams or StreamGuard(
            host.clock, settings.max_streams_per_table, settings.max_streams_per_connection,
            settings.max_streams_per_peer, settings.stream_stall_ms,
            spectators=capacity.spectator_streams, seated=capacity.seat_streams)
        self.quotas = Quotas(QuotaLimits.from_settings(settings))
        self.proxies = TrustedProxies.parse(settings.trusted_proxies)
        """Whose ``x-forwarded-for`` the transports believe (the Caller's peer)."""
        self.peers = peers or PeerLimits(settings.create_rate_per_s, settings.create_burst,
                                         settings.bad_token_rate_per_s, settings.bad_token_burst)

    def seat_of(self, session: Session, caller: Caller) -> int | None:
        """The caller's seat from its token (None: a spectator); a wrong token counts against
        the caller's address."""
        try:
            if caller.bad_authorization:
                raise _bad_authorization()
            return self.host.tokens.seat_of(session, caller.seat_token, caller.remembered)
        except ServiceError as error:
            if error.code == grpc.StatusCode.UNAUTHENTICATED and not self.peers.allow_bad_token(
                    peer_host(caller.peer), self.host.clock.now_ms()):
                raise _caused(_rate_limited("too many calls with a wrong seat token; slow down"),
                              error)
            raise

    def backend_of(self, caller: Caller) -> Backend | None:
        """The backend the caller acts as (None: no key); a wrong key counts against the
        caller's address like a wrong seat token."""
        try:
            return self.security.backend_of(caller.api_key)
        except ServiceError as error:
            if not self.peers.allow_bad_token(peer_host(caller.peer), self.host.clock.now_ms()):
                raise _caused(_rate_limited("too many calls with a wrong key; slow down"), error)
            raise

    @rpc
    async def create_game(self, request: pb.CreateGameRequest,
                          caller: Caller) -> pb.CreateGameResponse:
        backend: Backend | None = self.backend_of(caller)
        if backend is None and not self.security.open_mode:
            require(backend, "CreateGame on this server")
        now_ms = self.host.clock.now_ms()
        if backend is None:
            address = peer_host(caller.peer)
            if not (self.peers.allow_create(address, now_ms)
                    and self.quotas.allow_address(CREATES, address, now_ms)):
                raise _rate_limited("too many tables created from your address; try again "
                                    "later")
        if not self.quotas.allow_create(None if backend is None else backend.name, now_ms):
            raise _rate_limited("too many tables created without a key right now; try again "
                                "later" if backend is None
                                else "your backend creates tables faster than its quota")
        arguments = convert.create_arguments(request, self.host.settings.allow_stacked_decks)
        owned = ownership.decide(request, arguments["seats"], backend)
        name = None if backend is None else backend.name
        scope = ownership.scope_of(backend)  # a request id is its sender's, never another's
        if (not request.request_id
                or self.host.tables.create_request(scope, request.request_id) is None) \
                and not self.quotas.may_hold_another(name, self.host.tables.held(scope)):
            raise ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_GAMES",
                               "tables created without a key: as many as the server holds"
                               if backend is None else "your backend holds as many tables "
                               "as its quota allows; end some (EndTable) first")
        session = await self.host.create(**arguments, ownership=owned)
        tokens = []
        for seat in session.ownership.reserved_seats():  # claimed now (again, on a retry)
            generation = session.generations.get(seat, 0)
            if generation:  # a retry, the seat replaced since: its holder's now (ReplaceSeat's)
                token = ownership.seat_token(self.host.tokens.key, session.game_id, seat,
                                             generation)
            else:
                _, _, token = await self.host.join(session.game_id, seat,
                                                   session.ownership.names[seat],
                                                   f"{ownership.RESERVED_REQUEST}{seat}", scope)
            tokens.append(pb.SeatToken(seat=seat, seat_token=token,
                                       player_id=session.ownership.player_ids[seat]))
        return pb.CreateGameResponse(game=self.backend_view(session, caller), seat_tokens=tokens)

    def view(self, session: Session, seat: int | None) -> pb.GameView:
        """What ``seat`` (None: a spectator) sees of the table."""
        view = session.ownership.annotate(convert.view(session, seat))
        if session.table.abandoned:
            view.abandon_reason = (pb.ABANDON_REASON_ENDED_BY_BACKEND
                                   if session.ended_by_backend else pb.ABANDON_REASON_IDLE)
        return view

    def backend_view(self, session: Session, caller: Caller) -> pb.GameView:
        """A spectator's view, with the labels for the table's backend (its key, no token)."""
        view = self.view(session, None)
        if caller.seat_token is None:
            session.ownership.label(self.backend_of(caller), view.labels)
        return view

    def seated(self, session: Session, seat: int | None, caller: Caller) -> bool:
        """A seated player's stream or its backend's: counted apart from spectators', on the
        table and server-wide, so strangers never lock it out."""
        return seat is not None or (session.ownership.backend is not None
                                    and session.ownership.belongs_to(self.backend_of(caller)))

    @rpc
    async def end_table(self, request: pb.EndTableRequest,
                        caller: Caller) -> pb.EndTableResponse:
        """The backend ends its table for good (idempotent: an ended table answers its
        view)."""
        convert.check_id(request.request_id, "request_id")
        session = await self.host.find(request.game_id)
        session.ownership.check_backend(self.backend_of(caller), "EndTable")
        await self.host.actor.abandon(session, by_backend=True)
        return pb.EndTableResponse(game=self.backend_view(self.host.shelf.answering(session),
                                                          caller))

    @rpc
    async def replace_seat(self, request: pb.ReplaceSeatRequest,
                           caller: Caller) -> pb.ReplaceSeatResponse:
        """The backend gives a seat to a player (``replacing``): the former token is revoked
        at once and a bot plays the seat until the new holder reclaims it."""
        request_id = convert.check_id(request.request_id, "request_id")
        player_id = convert.check_id(request.player_id, "player_id")
        name = convert.check_id(request.display_name, "display_name")
        session = await self.host.find(request.game_id)
        session.ownership.check_backend(self.backend_of(caller), "ReplaceSeat")
        session, replaced = await self.host.actor.replace(session, request.seat, player_id,
                                                          name, request_id)
        return pb.ReplaceSeatResponse(
            seat_token=replaced.to_proto(self.host.tokens.key, session.game_id),
            game=self.backend_view(self.host.shelf.answering(session), caller))

    def viewer(self, session: Session, caller: Caller) -> int | None:
        """The caller's seat (None: a spectator, which a private table allows to its backend
        and to the holders of its spectator token only)."""
        if ownership.is_spectator_token(self.host.tokens.key, session.game_id, caller.seat_token,
                                        session.spectator_generation):
            return None
        seat = self.seat_of(session, caller)
        if seat is None:
            session.ownership.check_watch(False, self.backend_of(caller))
        return seat

    def watch_results(self, request: pb.WatchResultsRequest, caller: Caller,
                      end: EndStream | None = None) -> AsyncIterator[pb.WatchResultsResponse]:
        """The calling backend's results after ``after_cursor``: the missed ones, then each
        as it is filed (``event_streams.results``; ``end``, a stream's ender as every stream is
        given one, is not needed: a results stream is never cut for its reader's pace)."""
        return event_streams.results(self, request, caller)

    def results_backend(self, caller: Caller) -> Backend:
        """The backend a WatchResults stream reads for (its counted refusal if none)."""
        try:
            return require(self.backend_of(caller), "WatchResults")
        except ServiceError as error:
            raise _caused(account("WatchResults", None, error), _cause(error))

    @rpc
    async def ack_results(self, request: pb.AckResultsRequest,
                          caller: Caller) -> pb.AckResultsResponse:
        backend = require(self.backend_of(caller), "AckResults")
        try:
            acknowledged = await self.host.clerk.acknowledge(backend.name, request.cursor)
        except CursorAhead as error:
            raise _caused(invalid_argument("INVALID_CURSOR", str(error)), error)
        return pb.AckResultsResponse(acknowledged_cursor=acknowledged)

    @rpc
    async def create_spectator_token(self, request: pb.CreateSpectatorTokenRequest,
                                     caller: Caller) -> pb.CreateSpectatorTokenResponse:
        session = await self.host.find(request.game_id)
        session.ownership.check_backend(self.backend_of(caller), "CreateSpectatorToken")
        return pb.CreateSpectatorTokenResponse(spectator_token=ownership.spectator_token(
            self.host.tokens.key, session.game_id, session.spectator_generation))

    @rpc
    async def rotate_spectator_token(self, request: pb.RotateSpectatorTokenRequest,
                                     caller: Caller) -> pb.RotateSpectatorTokenResponse:
        """The backend revokes the spectator token (TOKEN_REVOKED) and gets the next one."""
        request_id = convert.check_id(request.request_id, "request_id")
        session = await self.host.find(request.game_id)
        session.ownership.check_backend(self.backend_of(caller), "RotateSpectatorToken")
        session, generation = await self.host.actor.rotate_spectator(session, request_id)
        return pb.RotateSpectatorTokenResponse(spectator_token=ownership.spectator_token(
            self.host.tokens.key, session.game_id, generation))

    @rpc
    async def join_game(self, request: pb.JoinGameRequest,
                        caller: Caller) -> pb.JoinGameResponse:
        backend = self.backend_of(caller)
        now_ms = self.host.clock.now_ms()
        if backend is None and not self.quotas.allow_address(JOINS, peer_host(caller.peer),
                                                             now_ms):
            raise _rate_limited("too many seats taken without a key from your address right "
                                "now; try again later")
        if not self.quotas.allow_join(None if backend is None else backend.name, now_ms):
            raise _rate_limited("too many seats taken without a key right now; try again later")
        name = convert.check_id(request.display_name, "display_name")
        seat = request.seat if request.HasField("seat") else None
        request_id = convert.check_id(request.request_id, "request_id")
        scope = ownership.scope_of(backend)  # a request id is its sender's, never another's
        found = await self.host.find(request.game_id)
        owned = found.ownership
        if request_id.startswith(ownership.RESERVED_REQUEST):
            raise failed_precondition("SEAT_RESERVED", "this request id names a reserved seat")
        owned.check_join(seat, backend)
        if seat is None and owned.player_ids:  # the first free seat that is not reserved
            table = found.table
            free = [i for i, slot in enumerate(table.seats)
                    if not slot.claimed and not owned.reserved(i)]
            if not free and (scope, request_id) not in found.join_requests:
                raise failed_precondition("NO_FREE_SEAT", "every free seat is reserved")
            seat = free[0] if free else None
        session, seat, token = await self.host.join(request.game_id, seat, name, request_id,
                                                    scope)
        self.housekeeping.touched(session)
        return pb.JoinGameResponse(seat=seat, seat_token=token, game=self.view(session, seat))

    @rpc
    async def get_game(self, request: pb.GetGameRequest, caller: Caller) -> pb.GetGameResponse:
        session = await self.host.find(request.game_id)
        seat = self.viewer(session, caller)
        return pb.GetGameResponse(game=self.view(session, seat) if seat is not None
                                  else self.backend_view(session, caller))

    @rpc
    async def submit_action(self, request: ActionRequest, caller: Caller) -> bytes:
        """The serialized ``SubmitActionResponse``, once the action is committed (the request
        read by ``codec.requests``, on every transport)."""
        received = time.perf_counter()
        session = self.host.in_memory(request.game_id) or await self.host.find(request.game_id)
        if caller.seat_token is None and not caller.bad_authorization:
            raise _token_required()
        try:
            seat = self.seat_of(session, caller)
        except ServiceError as error:  # say so when it is the table's spectator token
            if error.reason == "INVALID_TOKEN" and ownership.is_spectator_token(
                    self.host.tokens.key, session.game_id, caller.seat_token,
                    session.spectator_generation):
                raise _caused(ServiceError(
                    grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                    "a spectator token watches; acting needs a seat token"), None)
            raise
        assert seat is not None
        meant = request.seat
        if meant is not None and meant != seat:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_SEAT",
                               f"your token is for seat {seat}, not seat {meant}")
        action = request.action
        if action is None:
            raise invalid_argument("INVALID_ACTION", "the request has no action")
        request_id = check_text(request.request_id, "request_id")  # compiled: every action
        move = move_from_read(session, seat, action)
        if isinstance(move, tbl.NextGame):
            session.ownership.check_next_game(session.table.game_number)
        expected = request.expected_version
        logcontext.add(seat=seat)  # until the wrapper's leave (or the call's end)
        applied = await self.host.actor.submit(session, seat, move, request_id, expected,
                                               received)
        self.housekeeping.touched(session)
        return wire.answer_wire(session, applied, seat)

    def stream_events(self, request: pb.StreamEventsRequest, caller: Caller,
                      end: EndStream, writer: StreamWriter | None = None
                      ) -> AsyncIterator[bytes]:
        """Each message a serialized ``StreamEventsResponse``: the missed events, then each
        change as it is published (``event_streams.events``). A stream that falls too far
        behind, or that the server ends because it stops, ends with a refusal saying where to
        resume. ``end`` is how the transport ends this stream from outside (the slow-stream
        watchdog); ``writer``, how it writes a change at once while the stream is idle
        (``fanout.LiveFeed``)."""
        return event_streams.events(self, request, caller, end, writer)

    async def open_stream(self, request: pb.StreamEventsRequest, caller: Caller,
                          end: EndStream) -> tuple[Session, int | None, OpenStream]:
        """A StreamEvents call's checks, its table, the caller's seat and its place among the
        open streams (``StreamGuard``'s caps), or its counted refusal."""
        try:
            check_sizes(request)
            check_game_id(request.game_id)
            session = await self.host.find(request.game_id)
            seat = self.viewer(session, caller)
            beyond_the_log(request.after_sequence, session.last_sequence)
            seated = self.seated(session, seat, caller)
            spectators = 0 if seated else sum(1 for subscriber in session.subscribers
                                              if subscriber.seat is None)
            stream = self.streams.open_stream(caller.peer, spectators, end, seated)
        except (RuleError, ServiceError) as error:
            raise _caused(account("StreamEvents", request.game_id, error), _cause(error))
        return session, seat, stream

    @rpc
    async def list_games(self, request: pb.ListGamesRequest,
                         caller: Caller) -> pb.ListGamesResponse:
        """A page of the tables the caller may see, oldest first, then the quarantined ones:
        the work of a page is the page (lobby.py), whatever the tables held."""
        size, cursor = page_size(request), page_cursor(request)
        kind = convert.listed_kind(request.kind)  # unknown: refused, never "every kind"
        backend = self.backend_of(caller)
        name = None if backend is None else backend.name
        now_ms = self.host.clock.now_ms()
        if backend is None and not self.quotas.allow_address(LISTS, peer_host(caller.peer),
                                                             now_ms):
            raise _rate_limited("too many listings from your address right now; try again "
                                "later")
        if not self.quotas.allow_list(name, now_ms):
            raise _rate_limited("too many listings right now; try again later")
        host, finished_too = self.host, request.include_finished
        found: list[tuple[str, pb.GameListing]] = []
        more = False  # a line beyond the page: there is a next one
        if cursor.quarantined_after is None:
            for row in host.lobby.page(name, kind, finished_too, cursor.after):
                table = host.tables.listed(row[1])
                if table is None or (isinstance(table, Session) and not finished_too
                                     and table.table.game_over(table.rules)):
                    continue  # unlisted meanwhile, or its game just ended
                if len(found) == size:
                    more = True
                    break
                if isinstance(table, Session):
                    line = convert.listing(table)
                    table.ownership.label(backend, line.labels)
                else:
                    line = table.to_proto(backend)
                found.append((lobby.token_after(row), line))
        for game_id, damaged in [] if more else sorted(host.tables.quarantined_tables()):
            if (cursor.quarantined_after is None or game_id > cursor.quarantined_after) \
                    and (kind is None or damaged.kind == kind) and damaged.listed_to(backend):
                if len(found) == size:
                    more = True
                    break
                found.append((lobby.token_after(quarantined=game_id),
                              convert.quarantined_listing(game_id, damaged.kind)))
        return pb.ListGamesResponse(games=[line for _, line in found],
                                    next_page_token=found[-1][0] if more else "")


def beyond_the_log(after: int, last: int) -> None:
    """A stream asked for events after a sequence its table never reached: refused, never
    a silent wait (a client that read a log this table does not have: the table restored
    from an older backup). docs/api.md, StreamEvents."""
    if after > last:
        raise invalid_argument(
            "INVALID_CURSOR",
            f"after_sequence {after} is beyond this table's last event ({last}): its log is "
            "not the one you read (restored from an older copy?); read the table again "
            "(GetGame) and stream from its last_sequence")
