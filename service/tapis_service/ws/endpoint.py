"""The WebSocket port: picows on the server's event loop, the web client on its plain HTTP side.

``GET /ws`` with an upgrade opens a player socket (a ``Connection``); any other ``GET`` is
answered from the built web client (the package ``tapis_webclient``: ``/`` is its index.html)
or with the server's public capabilities (``/capabilities.json``).
The port accepts its connections itself (``connections.Acceptor``): counted by address before
TLS and before the upgrade, a connection over the port's share of the descriptors or over its
address's share is closed as it comes; one that has not finished its TLS handshake, then its
upgrade request, within the handshake deadline is closed. Upgraded sockets are capped in all
and per client address (beyond: a ``TOO_MANY_STREAMS`` refusal and close 1013, as gRPC refuses
event streams beyond its caps); idle sockets are pinged and dropped when the pong does not come.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import mimetypes
import socket
import ssl
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiofastnet
import grpc
import structlog
from picows import (
    WSAutoPingStrategy,
    WSCloseCode,
    WSFrame,
    WSListener,
    WSTransport,
    WSUpgradeRequest,
    WSUpgradeResponse,
    WSUpgradeResponseWithListener,
)
from picows.picows import WSProtocol  # type: ignore[attr-defined]  # not in its stubs

import tapis_webclient
from tapis_service.door.capacity import Capacity
from tapis_service.door.connections import Acceptor, ConnectionLimits
from tapis_service.door.door import Door, socket_peer
from tapis_service.door.limits import peer_host
from tapis_service.door.portsockets import Key, listening_sockets
from tapis_service.door.proxies import FORWARDED_FOR, TrustedProxies
from tapis_service.door.rpcs import Route, local_routes
from tapis_service.observe.errors import ServiceError
from tapis_service.settings import Settings
from tapis_service.ws import frames
from tapis_service.ws.connection import Connection, SocketLimits, socket_calls
from tapis_service.ws.frames import Format
from tapis_service.ws.sink import TransportSink, on_frame

if TYPE_CHECKING:
    from tapis_service.game_api import GameApi

log = structlog.get_logger("tapis.ws")

SOCKET_PATH = b"/ws"
CAPABILITIES = b"/capabilities.json"
_HARD_FRAME_LIMIT = 4 * frames.MAX_FRAME_BYTES
"""picows drops a socket sending a frame over this; up to it, a frame over the limit gets a
VALUE_TOO_LONG refusal first."""


@dataclass(frozen=True, slots=True)
class EndpointLimits:
    """The WebSocket port's limits (docs/websocket.md)."""

    socket: SocketLimits = field(default_factory=SocketLimits)
    max_sockets: int = 20_000
    """Sockets open at once, in all."""
    max_sockets_per_peer: int = 1000
    """Sockets open at once from one client address."""
    max_connections: int = 20_000
    """Connections open at once, upgraded or not (each a descriptor), in all."""
    max_connections_per_address: int = 1000
    """Connections open at once from one address (the connection's own, before any proxy's
    header is read)."""
    handshake_s: float = 5.0
    """A connection's TLS handshake, then its upgrade request, must come within this."""
    ping_idle_s: float = 60.0
    """Ping a socket silent this long..."""
    ping_timeout_s: float = 20.0
    """...and drop it when the pong does not come within this."""

    @classmethod
    def of(cls, settings: Settings) -> EndpointLimits:
        """The limits the server's settings give (the keepalive is gRPC's)."""
        capacity = Capacity.of(settings)
        return cls(SocketLimits(settings.ws_max_in_flight, settings.ws_max_streams),
                   settings.ws_max_sockets or capacity.ws_connections,
                   settings.ws_max_sockets_per_peer,
                   max_connections=capacity.ws_connections,
                   max_connections_per_address=capacity.ws_connections_per_address,
                   handshake_s=settings.handshake_timeout_ms / 1000,
                   ping_idle_s=settings.keepalive_time_ms / 1000,
                   ping_timeout_s=settings.keepalive_timeout_ms / 1000)


def ping_reply_s(limits: EndpointLimits) -> float:
    """How long a pinged socket has to answer: ``ping_timeout_s``, but never longer than
    ``ping_idle_s``. picows refuses a longer wait (an assertion in each connection's protocol,
    which closed every socket as it opened), while gRPC takes any ``keepalive_timeout_ms``
    with any ``keepalive_time_ms``: a server keeping a short keepalive time for gRPC drops an
    unanswering socket after that time instead (docs/websocket.md, "Keepalive")."""
    return min(limits.ping_timeout_s, limits.ping_idle_s)


def _too_many_sockets(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS", message)


def grpc_peer(transport: WSTransport) -> str:
    """The client's address named as gRPC names a peer (``ipv4:1.2.3.4:5678``), so that
    per-address limits count both transports alike."""
    address = transport.underlying_transport.get_extra_info("peername")
    if not address:
        return "unknown"
    host, port = address[0], address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def _forwarded_for(request: WSUpgradeRequest) -> list[str]:
    """The ``x-forwarded-for`` headers of the upgrade request, in order."""
    headers = request.headers
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return [str(v) for v in getall(FORWARDED_FOR, ())]
    found = headers.get(FORWARDED_FOR)
    return [] if found is None else [str(found)]


class WebClient:
    """The built web client's files, read once, by URL path; and ``/capabilities.json``, what
    the page may do on this server (public: ``{"api_keys": true}`` when creating a table needs
    a backend's key, so the page offers no create button)."""

    def __init__(self, folder: Path = tapis_webclient.STATIC, *, api_keys: bool = False) -> None:
        self.files: dict[bytes, tuple[bytes, str]] = {
            CAPABILITIES: (json.dumps({"api_keys": api_keys}).encode(), "application/json")}
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file():
                    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                    if kind.startswith("text/") or kind.endswith("javascript"):
                        kind += "; charset=utf-8"
                    self.files[b"/" + path.name.encode()] = (path.read_bytes(), kind)
        if b"/index.html" in self.files:
            self.files[b"/"] = self.files[b"/index.html"]

    def response(self, path: bytes) -> WSUpgradeResponse | None:
        found = self.files.get(path.split(b"?", 1)[0])
        if found is None:
            return None
        body, kind = found
        return WSUpgradeResponse.create_ok_response(body, {
            "Content-Type": kind, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache",
            "Content-Security-Policy": "default-src 'self'; connect-src 'self' ws: wss:"})


_PICOWS_LOG = logging.getLogger("picows.server")


class _Held:
    """An admitted connection's place in its acceptor's counts, given back once."""

    __slots__ = ("acceptor", "key", "sock")

    def __init__(self, acceptor: Acceptor, key: Key, sock: socket.socket) -> None:
        self.acceptor: Acceptor | None = acceptor
        self.key = key
        self.sock = sock

    def release(self) -> None:
        if self.acceptor is not None:
            self.acceptor.release(self.key, self.sock)
            self.acceptor = None


class _Protocol(WSProtocol):
    """picows's server protocol (what ``ws_create_server`` makes), which gives its connection's
    place back when the connection ends."""

    held: _Held | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.held is not None:
            self.held.release()


class _Socket(WSListener):
    """picows's callbacks for one socket, handed to its Connection."""

    def __init__(self, endpoint: WebSocketEndpoint) -> None:
        self.endpoint = endpoint
        self.connection: Connection | None = None
        self.peer = ""

    def on_ws_connected(self, transport: WSTransport) -> None:
        direct = grpc_peer(transport)
        self.peer = socket_peer(direct, _forwarded_for(transport.request),
                                self.endpoint.proxies)
        sink = TransportSink(transport)
        refusal = self.endpoint.admit(self.peer)
        if refusal is not None:
            sink.send(frames.encode(frames.refusal(0, refusal), Format.BINARY))
            sink.close(WSCloseCode.TRY_AGAIN_LATER.value, "too many sockets")
            return
        self.endpoint.transports.add(transport)
        # its refusals are told to the door, counted against the connection's own address
        self.connection = Connection(self.endpoint.api, self.peer, sink,
                                     self.endpoint.limits.socket, self.endpoint.door,
                                     self.endpoint.calls, direct=direct)
        self.endpoint.connections.add(self.connection)
        # from now on picows hands each frame to the compiled ``on_frame`` itself: it looks
        # ``on_ws_frame`` up on the listener (a Python subclass) for every frame, and finds
        # this before the method below, without a Python frame per message
        self.__dict__["on_ws_frame"] = functools.partial(on_frame, self.connection)

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        """A frame before the socket is admitted or after it is gone: nothing to serve it."""

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.endpoint.transports.discard(transport)
        self.__dict__.pop("on_ws_frame", None)
        if self.connection is not None:
            self.connection.disconnected()
            self.endpoint.connections.discard(self.connection)
            self.endpoint.release(self.peer)
            self.connection = None

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.pause_writing()

    def resume_writing(self) -> None:
        if self.connection is not None:
            self.connection.resume_writing()


class WebSocketEndpoint:
    """The player WebSocket port: sockets to the GameApi, and the web client."""

    def __init__(self, api: GameApi, limits: EndpointLimits | None = None,
                 webclient: WebClient | None = None,
                 proxies: TrustedProxies | None = None, door: Door | None = None,
                 routes: dict[str, Route] | None = None) -> None:
        self.api = api
        self.door = door or Door(max_in_flight=1 << 30, proxies=proxies)
        """What every transport passes (the server's; alone, in a test: its own)."""
        self.proxies = proxies or self.door.proxies
        """Behind one of these, a socket's client is the one ``x-forwarded-for`` names."""
        self.calls = socket_calls(
            local_routes(api, frames.CARRIED) if routes is None else routes, self.door)
        """Each request field's call, derived once: the routes gRPC takes too (a cluster
        node's relay a table's calls to its owner)."""
        self.limits = limits or EndpointLimits()
        self.webclient = webclient or WebClient()
        self.sockets: Counter[str] = Counter()
        """Open sockets by client address."""
        self.transports: set[WSTransport] = set()
        self.connections: set[Connection] = set()
        self.acceptor: Acceptor | None = None
        """Accepts the port's connections (None: not listening)."""
        self.opening: set[asyncio.Task[None]] = set()
        self.ssl_context: ssl.SSLContext | None = None

    def admit(self, peer: str) -> ServiceError | None:
        """Count a new socket from ``peer``, or the refusal if that is one too many."""
        host = peer_host(peer)
        if self.sockets.total() >= self.limits.max_sockets:
            return _too_many_sockets("the server holds as many sockets as it may")
        if self.sockets[host] >= self.limits.max_sockets_per_peer:
            return _too_many_sockets("too many sockets from your address: close one first")
        self.sockets[host] += 1
        return None

    def release(self, peer: str) -> None:
        host = peer_host(peer)
        self.sockets[host] -= 1
        if self.sockets[host] <= 0:
            del self.sockets[host]

    def _route(self, request: WSUpgradeRequest
               ) -> WSListener | WSUpgradeResponseWithListener | None:
        if request.headers.get("upgrade", "").lower() == "websocket":
            return _Socket(self) if request.path.split(b"?", 1)[0] == SOCKET_PATH else None
        response = self.webclient.response(request.path)
        return None if response is None else WSUpgradeResponseWithListener(response, None)

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                    connection_limits: ConnectionLimits | None = None) -> int:
        """Listen on ``host:port`` (0: a free port), over TLS when ``ssl_context`` is given
        (wss and https with the gRPC port's certificate); returns the port.
        ``connection_limits``: the server's, which this port's connections count in (and,
        with a door of the endpoint's own, the budget its sockets' refusals spend)."""
        if connection_limits is not None and self.door.limits is None:
            self.door.limits = connection_limits
        self.ssl_context = ssl_context
        sockets = listening_sockets(host, port)
        self.acceptor = Acceptor(sockets, "websocket", self.limits.max_connections,
                                 self.limits.max_connections_per_address, self._serve,
                                 connection_limits)
        if connection_limits is not None:
            connection_limits.acceptors.append(self.acceptor)
        self.acceptor.start()
        return int(sockets[0].getsockname()[1])

    def _protocol(self) -> _Protocol:
        limits = self.limits
        return _Protocol(None, None, False, self._route, _PICOWS_LOG, True,
                         limits.handshake_s, True, limits.ping_idle_s,
                         ping_reply_s(limits), WSAutoPingStrategy.PING_WHEN_IDLE, True,
                         _HARD_FRAME_LIMIT, None, 16 * 1024)

    def _serve(self, sock: socket.socket, key: Key) -> None:
        """An admitted connection: its TLS handshake (bounded), then picows's protocol."""
        task = asyncio.get_running_loop().create_task(self._open(sock, key))
        self.opening.add(task)
        task.add_done_callback(self.opening.discard)

    async def _open(self, sock: socket.socket, key: Key) -> None:
        assert self.acceptor is not None
        held = _Held(self.acceptor, key, sock)

        def protocol() -> _Protocol:
            made = self._protocol()
            made.held = held
            return made

        loop = asyncio.get_running_loop()
        try:  # aiofastnet: picows's own transports (what ws_create_server uses)
            if self.ssl_context is None:
                await aiofastnet.connect_accepted_socket(loop, protocol, sock)
            else:
                await aiofastnet.connect_accepted_socket(
                    loop, protocol, sock, ssl=self.ssl_context,
                    ssl_handshake_timeout=self.limits.handshake_s)
        except BaseException:  # the handshake failed or timed out, or the port is stopping
            held.release()
            sock.close()

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop listening, let the requests in flight and the streams the server is ending
        finish (for up to ``grace_s``; None: no limit), cut the requests left (each answered
        ``stopping.cut``, as gRPC's), then close every socket (going away, 1001)."""
        if self.acceptor is None:
            return
        self.acceptor.close()
        for task in list(self.opening):
            task.cancel()
        running = [task for connection in self.connections for task in connection.running()]
        if running:
            await asyncio.wait(running, timeout=grace_s)
        cut = [request for connection in self.connections for request in connection.cut()]
        if cut:  # each answered with a precise status before its socket closes
            log.warning("ws_requests_cut_at_stop", requests=len(cut))
            await asyncio.wait(cut)
        for transport in list(self.transports):
            transport.send_close(WSCloseCode.GOING_AWAY)
            transport.disconnect()
        for key in list(self.acceptor.by_address):  # and those not upgraded (yet)
            self.acceptor.close_address(key)
        self.acceptor = None
