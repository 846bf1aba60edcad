"""A cluster node: membership, ownership, takeover, the orphan sweep, graceful hand-off, and
the routing of every GameService call to the node that owns its table.

Any node answers any call. A call for a table this node holds is served here; for a table
another live node owns, its bytes are relayed there unchanged (only field 1, the table id, is
read); for a table whose owner is dead or gone, this node takes it over (bumps the fencing
epoch) and loads it from the database (snapshot + journal replay), then serves it. Writes are
decided by the journal's primary key: a node whose append is refused has lost the table; the
host discards its session and tells us (``lost_listeners``), and from then on we forward.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hmac
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

import asyncpg
import grpc
import structlog
from google.protobuf.message import DecodeError

from tapis.v1 import game_service_pb2 as pb
from tapis_service import convert, logcontext, not_served
from tapis_service.cluster import metrics, tunnel
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.wire import game_id_of
from tapis_service.errors import ServiceError, to_status
from tapis_service.game_api import MAX_PAGE, page_bounds
from tapis_service.host import GameHost
from tapis_service.postgres_store import PostgresStore
from tapis_service.servicer import GameServicer, method_handlers, stream_ender
from tapis_service.settings import Settings
from tapis_service.streams import too_slow
from tapis_service.tls import ClusterTls

log = structlog.get_logger("tapis.cluster")

SERVICE = "tapis.v1.GameService"
FORWARDED = "tapis-forwarded"
"""Metadata on a relayed call (its value: the cluster's relay key): the receiving node serves
it or refuses it, never relays it."""
FORWARDED_FOR = "tapis-forwarded-for"
"""Metadata on a relayed call: the client's own peer (``ipv4:ADDRESS:PORT``). The owner counts
the call's streams and rate limits against it, not against the relaying node, when the call
carries the relay key."""
LOCAL_ONLY = "tapis-local"
"""Metadata on a ListGames fan-out: answer with this node's tables only."""
SWEEP_EVERY_S = 1.0
SWEEP_BATCH = 50
LIST_ADOPTS = 200
"""Orphan tables a ListGames takes over before listing, at most (the sweep takes the rest)."""
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   # a node gone without a reset (a machine lost): its tunnel ends within 30 s
                   ("grpc.keepalive_time_ms", 20_000), ("grpc.keepalive_timeout_ms", 10_000)]
_DROPPED_HEADERS = ("user-agent", FORWARDED, FORWARDED_FOR, LOCAL_ONLY)

REQUESTS: dict[str, Any] = {
    "CreateGame": pb.CreateGameRequest, "JoinGame": pb.JoinGameRequest,
    "GetGame": pb.GetGameRequest, "SubmitAction": pb.SubmitActionRequest,
    "StreamEvents": pb.StreamEventsRequest, "ListGames": pb.ListGamesRequest,
    "CreateSpectatorToken": pb.CreateSpectatorTokenRequest, "EndTable": pb.EndTableRequest,
}


DATABASE_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def table_moved(game_id: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                        f"game {game_id} is moving to another node; retry")


def new_node_id() -> str:
    return secrets.token_hex(6)


async def open_store(settings: Settings) -> PostgresStore:
    """A cluster node's store: fenced, owning what it creates, loading nothing at start (its
    tables are adopted one by one); the node id is bound to every log line from here on."""
    assert settings.database_url is not None
    node_id = settings.node_id or new_node_id()
    logcontext.bind_process(node=node_id)
    return await PostgresStore.open(settings.database_url, node_id=node_id, fenced=True,
                                    preload=False)


class ClusterNode:
    """This process as a member of the cluster (``--advertise``)."""

    def __init__(self, settings: Settings, host: GameHost, store: PostgresStore,
                 tls: ClusterTls | None = None) -> None:
        assert settings.advertise is not None and store.node_id is not None
        self.settings = settings
        self.tls = tls
        """How this node reaches the others over TLS (None: in clear, a server without
        TLS)."""
        self.host = host
        self.store = store
        self.node_id = store.node_id
        self.relay_key = store.relay_key.hex()
        self.directory = Directory(store.pool, self.node_id, settings.advertise,
                                   settings.node_ttl_s)
        self.leaving = False
        self._locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, tuple[str, float]] = {}
        """game id -> (its owner's address, until when that is trusted without a look in the
        directory: one TTL, so that a frozen owner whose connection stays open, a machine gone
        without a reset, is looked past once its membership expires)."""
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._methods: dict[tuple[str, str], Any] = {}
        self._tunnels: dict[str, tunnel.TunnelClient] = {}
        self._tunnel_server: tunnel.TunnelServer | None = None
        self._relayed: set[grpc.aio.Call | tunnel.RelayedStream] = set()
        self._cut: set[grpc.aio.Call | tunnel.RelayedStream] = set()
        """Relayed streams this node ended because it is leaving."""
        self._tasks: list[asyncio.Task[None]] = []
        self._orphans_asked: dict[bool, float] = {}
        """When ListGames last asked the database for orphans (without / with finished)."""
        host.lost_listeners.append(self._lost)

    # --- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Join. A node that restarts with the same ``--node-id`` holds nothing in memory yet:
        what its earlier life owned is handed off first, for the others (or itself) to adopt."""
        stale = await self.directory.hand_off()
        await self.directory.renew()
        if stale:
            log.info("stale_ownership_released", tables=stale)
        self._tasks = [asyncio.ensure_future(self._heartbeat()),
                       asyncio.ensure_future(self._sweep())]
        log.info("cluster_joined", address=self.settings.advertise,
                 ttl_s=self.settings.node_ttl_s)

    async def leave(self) -> None:
        """Graceful stop: hand every table off (the others take them over on their next call
        or sweep), end the relayed streams (their clients resume elsewhere), leave."""
        self.leaving = True
        for task in self._tasks:
            task.cancel()
        for call in list(self._relayed):
            self._cut.add(call)
            call.cancel()
        for game_id in list(self.host.sessions):
            self.host.discard(game_id)
        await self.store.settled()
        handed = await self.directory.hand_off()
        await self.directory.leave()
        if self._tunnel_server is not None:  # answer what was relayed to us, then close
            await self._tunnel_server.drain(self.settings.grace_s)
        metrics.TABLES_OWNED.set(0)
        log.info("cluster_left", tables_handed_off=handed)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for client in self._tunnels.values():
            client.close()
        for channel in self._channels.values():
            await channel.close()

    async def _heartbeat(self) -> None:
        every = min(1.0, self.settings.node_ttl_s / 3)
        while True:
            await asyncio.sleep(every)
            try:
                if await self.directory.renew():
                    await self._recheck()
            except Exception as error:  # the database is away: writes fail on their own
                log.warning("heartbeat_failed", error=str(error)[:200])
            metrics.TABLES_OWNED.set(len(self.host.sessions))

    async def _recheck(self) -> None:
        """Our membership had lapsed (a pause, a partition): give up every table another
        node took meanwhile."""
        owned = await self.directory.owned()
        for game_id in list(self.host.sessions):
            session = self.host.sessions.get(game_id)
            if session is not None and owned.get(game_id) != session.epoch:
                self.host.discard(game_id)
                self._lost(game_id)
        log.warning("membership_lapsed", kept=len(self.host.sessions))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                orphans = await self.directory.sweep_orphans(SWEEP_BATCH)
            except Exception as error:
                log.warning("sweep_failed", error=str(error)[:200])
                continue
            for game_id, epoch in orphans:
                try:
                    await self._adopt(game_id, epoch, "sweep")
                except Exception as error:  # quarantined, or the database went away
                    log.warning("adopt_failed", game=game_id, error=str(error)[:200])

    def _lost(self, game_id: str) -> None:
        self._routes.pop(game_id, None)
        metrics.TABLES_LOST.inc()
        log.info("table_lost_to_another_node", game=game_id)

    # --- routing ---------------------------------------------------------------------------

    async def _adopt(self, game_id: str, epoch: int, trigger: str) -> None:
        session = await self.host.adopt(game_id, epoch)
        if session is None:
            return
        if trigger:
            metrics.TAKEOVERS.labels(trigger).inc()
            log.info("table_taken_over", game=game_id, epoch=epoch, trigger=trigger)

    async def route(self, game_id: str, forwarded: bool) -> str | None:
        """Where a call for ``game_id`` is served: None here, else the owner's address."""
        if game_id in self.host.sessions or not game_id:
            return None
        cached = self._routes.get(game_id)
        if cached is not None and not forwarded and cached[1] > time.monotonic():
            return cached[0]
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        try:
            async with lock:
                for _ in range(3):
                    if game_id in self.host.sessions:
                        return None
                    owner = await self.directory.owner_of(game_id)
                    if owner is None:
                        return None  # the servicer says GAME_NOT_FOUND
                    if owner.node_id == self.node_id:
                        if self.leaving:
                            raise table_moved(game_id)
                        await self._adopt(game_id, owner.epoch, "")
                        return None
                    if owner.alive and owner.address:
                        if forwarded:
                            raise table_moved(game_id)
                        self._routes[game_id] = (owner.address,
                                                 time.monotonic() + self.settings.node_ttl_s)
                        return owner.address
                    if self.leaving:
                        raise table_moved(game_id)
                    epoch = await self.directory.take_over(game_id, owner.epoch)
                    if epoch is not None:
                        await self._adopt(game_id, epoch, "call")
                        return None
                raise table_moved(game_id)
        finally:
            if not lock.locked():
                self._locks.pop(game_id, None)

    def _unary_to(self, address: str, path: str) -> Any:
        """The (cached) raw-bytes unary method ``path`` on the node at ``address``."""
        key = (address, path)
        method = self._methods.get(key)
        if method is None:
            method = self._methods[key] = self._channel(address).unary_unary(path)
        return method

    def _tunnel(self, address: str) -> tunnel.TunnelClient:
        """The (open) tunnel to the node at ``address``."""
        client = self._tunnels.get(address)
        if client is None or client.broken:
            client = self._tunnels[address] = tunnel.TunnelClient(
                self._channel(address), self.relay_key, FORWARDED)
        return client

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = (grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
                       if self.tls is None else grpc.aio.secure_channel(
                           address, self.tls.credentials(),
                           options=[*CHANNEL_OPTIONS, *self.tls.channel_options()]))
            self._channels[address] = channel
        return channel

    def _metadata(self, context: grpc.aio.ServicerContext
                  ) -> tuple[str | None, list[tuple[str, str | bytes]]]:
        """The client's peer if another node relayed this call to us (it carries the relay
        key; a client's own ``tapis-forwarded`` headers count for nothing), and the headers to
        relay it with."""
        key_seen: str | bytes = ""
        origin: str | bytes = ""
        kept: list[tuple[str, str | bytes]] = []
        for key, value in context.invocation_metadata() or ():
            if key == FORWARDED:
                key_seen = value
            elif key == FORWARDED_FOR:
                origin = value
            elif key not in _DROPPED_HEADERS and not key.startswith("grpc-"):
                kept.append((key, value))
        relayed = bool(key_seen) and hmac.compare_digest(_text(key_seen), self.relay_key)
        client = _text(origin) if relayed and origin else None
        kept.append((FORWARDED, self.relay_key))
        kept.append((FORWARDED_FOR, client or context.peer()))
        return client, kept

    @staticmethod
    def _as_client(context: grpc.aio.ServicerContext,
                   client: str | None) -> grpc.aio.ServicerContext:
        """The context the servicer sees: a relayed call's peer is the client's own."""
        return context if client is None else _Seen(context, peer=client)

    # --- the handlers ----------------------------------------------------------------------

    def handlers(self, servicer: GameServicer) -> tuple[grpc.GenericRpcHandler, ...]:
        """Every GameService method, on raw bytes: served here or relayed; and the tunnel
        other nodes relay unary calls through."""
        methods: dict[str, grpc.RpcMethodHandler] = {}
        served = {name: self._unary(servicer, name) for name in tunnel.METHODS}
        for name, serve in served.items():
            methods[name] = grpc.unary_unary_rpc_method_handler(serve)
        methods["CreateGame"] = grpc.unary_unary_rpc_method_handler(self._create(servicer))
        methods["ListGames"] = grpc.unary_unary_rpc_method_handler(self._list(servicer))
        stream = self._stream(servicer)
        methods["StreamEvents"] = grpc.unary_stream_rpc_method_handler(stream)
        for name in ("CreateSpectatorToken", "EndTable"):  # relayed as calls of their own
            methods[name] = grpc.unary_unary_rpc_method_handler(self._unary(servicer, name))
        # results are the backend's, not a table's: any node serves them from the database
        local = method_handlers(servicer)
        methods["WatchResults"] = local["WatchResults"]
        methods["AckResults"] = local["AckResults"]
        methods.update(not_served.method_handlers(servicer))
        self._tunnel_server = tunnel.TunnelServer(served, stream, self.relay_key, FORWARDED,
                                                  self.settings.max_in_flight)
        return (grpc.method_handlers_generic_handler(SERVICE, methods),
                self._tunnel_server.handler())

    def _local(self, servicer: GameServicer,
               name: str) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        method = getattr(servicer, name)
        parse = REQUESTS[name]

        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            response = await method(await _parsed(parse, raw, context), context)
            return _wire(response)

        return serve

    def _create(self, servicer: GameServicer
                ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        """CreateGame places a new table here; a retry (the same ``request_id``) whose table
        was created on any node is answered with that table's public view, as GetGame gives
        it from wherever the table is now (the two answers are the same bytes: field 1, the
        GameView)."""
        local = self._local(servicer, "CreateGame")
        view = self._unary(servicer, "GetGame", public=True)

        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            request_id = (await _parsed(pb.CreateGameRequest, raw, context)).request_id
            known = self.host.create_requests.get(request_id) if request_id else None
            if request_id and known not in self.host.sessions:
                try:
                    game_id = await self.directory.created_by(request_id)
                except DATABASE_ERRORS as error:
                    await context.abort_with_status(to_status(_database_away()))
                    raise AssertionError("unreachable") from error
                if game_id is not None:
                    return await view(pb.GetGameRequest(game_id=game_id).SerializeToString(),
                                      context)
            return await local(raw, context)

        return serve

    def _unary(self, servicer: GameServicer, name: str, public: bool = False
               ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        """``name`` served here or relayed to the table's owner (``public``: without the
        caller's headers, so the answer is what anyone at the table sees)."""
        local = self._local(servicer, name)
        path = f"/{SERVICE}/{name}"
        method = tunnel.METHODS.index(name) if name in tunnel.METHODS else -1
        tunneled = self.settings.relay == "tunnel" and method >= 0
        forwards = metrics.FORWARDS.labels(name)
        forward_seconds = metrics.FORWARD_SECONDS.labels(name)
        tunneled_calls = metrics.TUNNELED.labels(name)

        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            game_id = game_id_of(raw)
            client, relayed_headers = self._metadata(context)
            for attempt in range(2):
                address = await self._route_or_abort(game_id, client is not None, context)
                if address is None:
                    if public:
                        return _wire(await servicer.GetGame(pb.GetGameRequest(game_id=game_id),
                                                            _Seen(context, anonymous=True)))
                    return await local(raw, self._as_client(context, client))
                started = time.perf_counter()
                metadata = relayed_headers[-2:] if public else relayed_headers
                try:
                    if tunneled and tunnel.fits(raw):
                        # the relay key went with the tunnel's opening: not with each call
                        answer: bytes = await self._tunnel(address).call(
                            method, metadata[:-2] + metadata[-1:], raw)
                        tunneled_calls.inc()
                    else:
                        answer = await self._unary_to(address, path)(
                            raw, metadata=metadata, timeout=context.time_remaining())
                except (grpc.aio.AioRpcError, tunnel.RelayError) as error:
                    if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        self._routes.pop(game_id, None)  # moved, or its owner died: look again
                        if _unreachable(error) and attempt == 0:
                            continue
                    await _relay_error(context, error, game_id)
                    raise AssertionError("unreachable") from error
                forwards.inc()
                forward_seconds.observe(time.perf_counter() - started)
                return answer
            raise AssertionError("unreachable")

        return serve

    def _stream(self, servicer: GameServicer
                ) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
        path = f"/{SERVICE}/StreamEvents"
        forwards = metrics.FORWARDS.labels("StreamEvents")
        tunneled_streams = metrics.TUNNELED.labels("StreamEvents")

        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            game_id = game_id_of(raw)
            client, relayed_headers = self._metadata(context)
            address = await self._route_or_abort(game_id, client is not None, context)
            if address is None:
                session = self.host.sessions.get(game_id)
                async for response in servicer.StreamEvents(
                        await _parsed(pb.StreamEventsRequest, raw, context),
                        self._as_client(context, client)):
                    yield _wire(response)
                if session is not None and self.host.sessions.get(game_id) is not session:
                    # the table left this node: the client resumes wherever it is now
                    await context.abort_with_status(to_status(table_moved(game_id)))
                return
            forwards.inc()
            last = [b""]  # the last message relayed (where a cut one resumes)
            call: grpc.aio.Call | tunnel.RelayedStream
            if self.settings.relay == "tunnel" and tunnel.fits(raw):
                call = self._tunnel(address).stream(
                    relayed_headers[:-2] + relayed_headers[-1:], raw,
                    self.settings.stream_queue_size,
                    functools.partial(_cut_slow, context, asyncio.current_task(), raw, last))
                tunneled_streams.inc()
            else:
                call = self._channel(address).unary_stream(path)(
                    raw, metadata=relayed_headers, timeout=context.time_remaining())
            self._relayed.add(call)
            try:
                try:
                    while (chunk := await call.read()) is not grpc.aio.EOF:
                        last[0] = chunk
                        yield chunk
                except asyncio.CancelledError:
                    if call not in self._cut:
                        raise  # our own client went away (or read too slowly)
                    await context.abort_with_status(to_status(table_moved(game_id)))
                except (grpc.aio.AioRpcError, tunnel.RelayError) as error:
                    if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        self._routes.pop(game_id, None)
                    if call in self._cut:  # we are leaving: resume on another node
                        await context.abort_with_status(to_status(table_moved(game_id)))
                    await _relay_error(context, error, game_id)
            finally:
                self._relayed.discard(call)
                self._cut.discard(call)
                call.cancel()

        return serve

    async def _route_or_abort(self, game_id: str, forwarded: bool,
                              context: grpc.aio.ServicerContext) -> str | None:
        try:
            try:
                return await self.route(game_id, forwarded)
            except DATABASE_ERRORS as error:
                log.warning("route_failed", game=game_id, error=str(error)[:200])
                raise _database_away() from error
        except ServiceError as error:
            await context.abort_with_status(to_status(error))
            raise AssertionError("unreachable") from error

    def _list(self, servicer: GameServicer
              ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        local = self._local(servicer, "ListGames")

        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            if _has(context, LOCAL_ONLY):
                return await local(raw, context)
            request = await _parsed(pb.ListGamesRequest, raw, context)
            try:
                start, size = _page(request)
            except ServiceError as error:
                await context.abort_with_status(to_status(error))
                raise AssertionError("unreachable") from error
            games: list[pb.GameListing] = []
            try:
                if not self.leaving:
                    await self._adopt_orphans(request.include_finished)
                members = await self.directory.live_members()
            except DATABASE_ERRORS as error:
                await context.abort_with_status(to_status(_database_away()))
                raise AssertionError("unreachable") from error
            for node_id in sorted(members):
                games.extend(await self._list_node(node_id, members[node_id], request, local,
                                                   context))
            page = games[start:start + size]
            token = ""
            if start + size < len(games):
                token = base64.urlsafe_b64encode(str(start + size).encode()).decode()
            return bytes(pb.ListGamesResponse(games=page, next_page_token=token)
                         .SerializeToString())

        return serve

    async def _adopt_orphans(self, include_finished: bool) -> None:
        """Take over (up to ``LIST_ADOPTS``) the tables of dead or departed owners that the
        sweep has not reached yet, so that the listing has them too (the database is asked at
        most once per sweep period, however often clients list)."""
        now = time.monotonic()
        if now - self._orphans_asked.get(include_finished, -SWEEP_EVERY_S) < SWEEP_EVERY_S:
            return
        self._orphans_asked[include_finished] = now
        for game_id in await self.directory.orphans(include_finished, LIST_ADOPTS):
            try:
                await self.route(game_id, False)
            except ServiceError:  # moved meanwhile: listed by its node
                continue
            except DATABASE_ERRORS:
                raise
            except Exception as error:  # its records are damaged (the host quarantines it)
                log.warning("adopt_failed", game=game_id, error=str(error)[:200])

    async def _list_node(self, node_id: str, address: str, request: pb.ListGamesRequest,
                         local: Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]],
                         context: grpc.aio.ServicerContext) -> list[pb.GameListing]:
        """One node's tables (all its pages); a node that does not answer has none."""
        out: list[pb.GameListing] = []
        token = ""
        while True:
            ask = pb.ListGamesRequest(kind=request.kind, include_finished=request.include_finished,
                                      page_size=MAX_PAGE, page_token=token)
            if node_id == self.node_id:
                if self.leaving:
                    return out
                raw = await local(ask.SerializeToString(), context)
            else:
                try:
                    raw = await self._channel(address).unary_unary(f"/{SERVICE}/ListGames")(
                        ask.SerializeToString(), metadata=[(LOCAL_ONLY, "1")], timeout=5)
                except grpc.aio.AioRpcError:
                    return out
            answer = pb.ListGamesResponse.FromString(raw)
            out.extend(answer.games)
            token = answer.next_page_token
            if not token:
                return out


async def _parsed(message: Any, raw: bytes, context: grpc.aio.ServicerContext) -> Any:
    """``raw`` decoded as ``message``; bytes that are not one are INVALID_REQUEST."""
    try:
        return message.FromString(raw)
    except DecodeError as error:
        refusal = ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST",
                               f"the request is not a valid "
                               f"{message.DESCRIPTOR.name.removesuffix('Request')} message")
        await context.abort_with_status(to_status(refusal))
        raise AssertionError("unreachable") from error


def _database_away() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                        "the database cannot be reached; retry")


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


class _Seen:
    """A call's servicer context as the servicer should see it: a relayed call's peer is the
    client's (so stream caps and rate limits count that client, not the relaying node), and an
    anonymous one shows none of the caller's headers (no seat token)."""

    def __init__(self, context: grpc.aio.ServicerContext, peer: str | None = None,
                 anonymous: bool = False) -> None:
        self._context = context
        self._peer = peer
        self._anonymous = anonymous

    def peer(self) -> str:
        return self._peer if self._peer is not None else str(self._context.peer())

    def invocation_metadata(self) -> Any:
        return () if self._anonymous else self._context.invocation_metadata()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _cut_slow(context: grpc.aio.ServicerContext, task: asyncio.Task[Any] | None, request: bytes,
              last: list[bytes]) -> None:
    """A relayed stream whose client reads too slowly (its messages overflowed this node's
    queue): ended as the owner ends its own slow streams, STREAM_TOO_SLOW with the sequence to
    resume after."""
    if last[0]:
        resume = pb.StreamEventsResponse.FromString(last[0]).events[-1].sequence
    else:
        resume = pb.StreamEventsRequest.FromString(request).after_sequence
    stream_ender(context)(too_slow(resume))
    if task is not None:
        task.cancel()


def _page(request: pb.ListGamesRequest) -> tuple[int, int]:
    start, size = page_bounds(request)
    if request.kind:
        convert.kind_of(request.kind)
    return start, size


def _has(context: grpc.aio.ServicerContext, key: str) -> bool:
    return any(k == key for k, _ in (context.invocation_metadata() or ()))


def _unreachable(error: grpc.aio.AioRpcError | tunnel.RelayError) -> bool:
    """The owner did not answer at all (dead, restarting, stopping), as opposed to refusing.
    (CANCELLED here is the owner's doing: our own client's cancellation cancels this task.)"""
    if error.code() == grpc.StatusCode.CANCELLED:
        return True
    if error.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    return not any(k == "grpc-status-details-bin" for k, _ in (error.trailing_metadata() or ()))


class _Relayed(NamedTuple("_Relayed", [("code", grpc.StatusCode), ("details", str),
                                         ("trailing_metadata", tuple[Any, ...])]),
               grpc.Status):
    """A ``grpc.Status``: the owner's refusal as it sent it."""


def relayed_status(error: grpc.aio.AioRpcError | tunnel.RelayError,
                   game_id: str) -> grpc.Status:
    """The owner's refusal, passed on unchanged: its code, message and ErrorInfo (the
    ``grpc-status-details-bin`` bytes). A status without ErrorInfo (the owner went away, or
    its gRPC core answered) becomes TABLE_MOVED: the client retries and is routed afresh."""
    trailing = tuple((k, v) for k, v in (error.trailing_metadata() or ())
                     if k == "grpc-status-details-bin")
    if not trailing:
        return to_status(table_moved(game_id))
    return _Relayed(error.code(), error.details() or "", trailing)


async def _relay_error(context: grpc.aio.ServicerContext,
                       error: grpc.aio.AioRpcError | tunnel.RelayError, game_id: str) -> None:
    await context.abort_with_status(relayed_status(error, game_id))


def _wire(response: Any) -> bytes:
    """A servicer answer as bytes: the fan-out may have serialized it already."""
    if isinstance(response, bytes | bytearray | memoryview):
        return bytes(response)
    return bytes(response.SerializeToString())
