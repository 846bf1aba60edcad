"""Connections: what a stranger's connections may cost the server (docs/limits.md).

Both ports count their connections by client address (an IPv4 address, an IPv6 address's
/64), before TLS and before any byte of HTTP:

- **the WebSocket port** accepts its connections itself (``Acceptor``): one over the server's
  share or over its address's share is closed as it is accepted, before its TLS handshake;
  running out of descriptors (``EMFILE``) stops accepting for a moment, logged once a period
  with the count, instead of failing on every wake-up;
- **the gRPC port** belongs to grpc's core, which offers no hook on a new connection: a watch
  (``ConnectionLimits.watch_grpc``) counts that port's connections by client address twice a
  second, from the kernel's list, and shuts down those beyond their address's share (grpc's
  core sees the connection end and frees its descriptor).

Past its budget of refused calls (``RefusalBudget``: no key, a wrong key, a bad token; the door
every transport passes tells ``ConnectionLimits.refused`` of each: ``door.Door.refused``), an
address is cut: its
connections on both ports closed at once, for a cool-down. An address at its share or cut has
its new connections dropped by the kernel before they reach either port: a classic BPF filter on the
listening sockets (``portsockets.filter_program``) drops its SYNs, so they cost no accept, no
descriptor and no handshake. A trusted proxy (``--trusted-proxies``) carries many clients:
it is never capped or cut here (the per-client limits behind it still apply), nor is the
host's own address (127.0.0.1, ::1).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable

import grpc
import structlog
from prometheus_client import Counter as PromCounter

from tapis_service.door.portsockets import (
    IPAddress,
    Key,
    Listed,
    SocketTable,
    address_of,
    attach_filter,
    borrowed,
    descriptors,
    shut_down,
)
from tapis_service.door.proxies import TrustedProxies
from tapis_service.observe.errors import ServiceError

log = structlog.get_logger("tapis.connections")


CLOSED = PromCounter("tapis_connections_closed_total",
                     "Connections the server closed or dropped as they came, by port and why",
                     ["port", "why"])

WATCH_EVERY_S = 0.5
"""How often the gRPC port's connections are counted."""
LOG_EVERY_S = 10.0
"""At most one line per period for each kind of closing (with the count)."""
MAX_BLOCKED = 512
"""Addresses a listening socket's filter drops at most (the filter's length grows with them;
beyond, the watch still closes their connections)."""
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_RETRY_S = 0.5
"""How long the WebSocket port stops accepting when the process is out of descriptors."""


_OWN = (ipaddress.IPv4Network("127.0.0.1/32"), ipaddress.IPv6Network("::/64"))
"""The keys of 127.0.0.1 and ::1 (the loopback's /64)."""


def address_key(address: IPAddress) -> Key:
    """The key an address's connections are counted under (IPv6: its /64, one subscriber's
    block; an IPv4-mapped IPv6 address: the IPv4 address)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return ipaddress.IPv4Network(address.ipv4_mapped)
        return ipaddress.IPv6Network((address, 64), strict=False)
    return ipaddress.IPv4Network(address)


def key_of_peer(peer: str) -> Key | None:
    """The key of a gRPC peer string (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``), None for
    anything else (a unix socket)."""
    scheme, _, rest = peer.partition(":")
    if scheme not in ("ipv4", "ipv6"):
        return None
    host = rest.rpartition(":")[0].strip("[]")
    try:
        return address_key(ipaddress.ip_address(host))
    except ValueError:
        return None


class _Logged:
    """Counts of one kind of closing, logged at most once per ``every_s`` with the count since
    the last line."""

    def __init__(self, event: str, every_s: float = LOG_EVERY_S,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.event = event
        self.every_s = every_s
        self.now = now
        self.count = 0
        self.last = -every_s

    def add(self, n: int = 1, **fields: object) -> None:
        self.count += n
        at = self.now()
        if at - self.last >= self.every_s:
            self.last = at
            log.warning(self.event, count=self.count, **fields)
            self.count = 0


class RefusalBudget:
    """Refused calls per address (no key, a wrong key, a bad token): ``rate_per_s`` with a
    burst of ``burst``; past it, the address cools down for ``cooldown_ms`` (its connections
    cut, its new ones dropped). The clock is injected (milliseconds); a rate of 0: no budget."""

    def __init__(self, rate_per_s: float, burst: int, cooldown_ms: int,
                 now_ms: Callable[[], int]) -> None:
        self.rate_per_ms = rate_per_s / 1000
        self.burst = float(burst)
        self.cooldown_ms = cooldown_ms
        self.now_ms = now_ms
        self._tokens: dict[Key, tuple[float, int]] = {}
        self._until: dict[Key, int] = {}
        """Addresses cooling down, and until when."""

    def refused(self, key: Key) -> bool:
        """Count one refused call of ``key``; True when it puts the address past its budget
        (it cools down from now)."""
        if self.rate_per_ms <= 0:
            return False
        now = self.now_ms()
        tokens, last = self._tokens.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate_per_ms) - 1
        if tokens >= 0:
            self._tokens[key] = (tokens, now)
            if len(self._tokens) > 100_000:
                self._prune(now)
            return False
        self._tokens.pop(key, None)  # a fresh budget once the cool-down is over
        self._until[key] = now + self.cooldown_ms
        return True

    def cooling(self, key: Key) -> bool:
        until = self._until.get(key)
        if until is None:
            return False
        if self.now_ms() < until:
            return True
        del self._until[key]
        return False

    def cooling_keys(self) -> list[Key]:
        """The addresses cooling down now (the ended cool-downs forgotten)."""
        now = self.now_ms()
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
        return list(self._until)

    def _prune(self, now: int) -> None:
        for key, (tokens, last) in list(self._tokens.items()):
            if tokens + (now - last) * self.rate_per_ms >= self.burst:
                del self._tokens[key]


def counts_against_address(error: ServiceError) -> bool:
    """Whether a refusal is one a stranger's flood is made of: no key, a wrong key, a bad or
    missing seat token (``UNAUTHENTICATED``), or the rate limit such calls ran into."""
    if error.code is grpc.StatusCode.UNAUTHENTICATED:
        return True
    cause = error.__cause__
    return (error.reason == "RATE_LIMITED" and isinstance(cause, ServiceError)
            and cause.code is grpc.StatusCode.UNAUTHENTICATED)


class ConnectionLimits:
    """The server's connection limits, on both ports: the refusal budget, the per-address
    shares, the listening sockets' filters, the gRPC port's watch."""

    def __init__(self, budget: RefusalBudget, proxies: TrustedProxies | None = None,
                 grpc_port: int = 0, grpc_per_address: int = 0,
                 keys_valid: Callable[[str], bool] | None = None) -> None:
        self.budget = budget
        self.proxies = proxies or TrustedProxies()
        self.grpc_port = grpc_port
        self.grpc_per_address = grpc_per_address
        self.keys_valid = keys_valid
        """Whether an ``x-api-key`` is one of the server's (a keyed caller's refusals are its
        key's business, never its address's)."""
        self.acceptors: list[Acceptor] = []
        self.grpc_over: set[Key] = set()
        """Addresses at their share of gRPC connections at the last count."""
        self._grpc_listeners: list[int] = []
        self._filtered: dict[int, list[Key]] = {}
        self.table = SocketTable()
        self._task: asyncio.Task[None] | None = None
        self._cut = _Logged("address_cut")
        self._capped = _Logged("grpc_connections_over_address_share")

    def exempt(self, key: Key) -> bool:
        """The host's own address (127.0.0.1, ::1: a sidecar or local proxy carries every
        client) and a trusted proxy's: never capped or cut."""
        return key in _OWN or self.proxies.trusted(key.network_address)

    def blocked(self, at_share: Iterable[Key]) -> list[Key]:
        """The addresses a listener drops: those cooling down and ``at_share``."""
        keys = {*self.budget.cooling_keys(), *at_share}
        return sorted((k for k in keys if not self.exempt(k)),
                      key=lambda k: (k.version, k))[:MAX_BLOCKED]

    def refused(self, peer: str, error: ServiceError, api_key: str | None = None) -> None:
        """A call from ``peer`` (its connection's) was refused with ``error``: counted against
        its address when it is a stranger's refusal; past the budget, the address is cut at
        once. Every transport's refusals come through the door (``door.Door.refused``)."""
        if not counts_against_address(error):
            return
        if api_key and self.keys_valid is not None and self.keys_valid(api_key):
            return
        key = key_of_peer(peer)
        if key is None or self.exempt(key) or not self.budget.refused(key):
            return
        self._cut.add(address=str(key), cooldown_s=self.budget.cooldown_ms / 1000)
        self.cut(key)

    def cut(self, key: Key) -> None:
        """Close ``key``'s connections on both ports and drop its new ones (the filters)."""
        closed = sum(acceptor.close_address(key) for acceptor in self.acceptors)
        if self.grpc_port:
            listed = self._grpc_listed()
            closed += self._shut([item for item in listed
                                  if not item.listening and address_key(item.address) == key])
        CLOSED.labels("any", "cut").inc(closed)
        self.refilter()

    def _grpc_listed(self) -> list[Listed]:
        """The gRPC port's sockets; its listeners' descriptors found once."""
        listed = self.table.listed(self.grpc_port)
        if not self._grpc_listeners:
            self._grpc_listeners = sorted(descriptors(
                {item.inode for item in listed if item.listening}).values())
        return listed

    def _shut(self, doomed: list[Listed]) -> int:
        """Shut down the gRPC port's connections ``doomed`` (those accepted by now)."""
        fds = descriptors({item.inode for item in doomed})
        return sum(shut_down(fds[item.inode], self.grpc_port, item.address)
                   for item in doomed if item.inode in fds)

    def refilter(self) -> None:
        """Bring the listening sockets' filters up to date."""
        wanted = {fd: self.blocked(self.grpc_over) for fd in self._grpc_listeners}
        for acceptor in self.acceptors:
            for sock in acceptor.sockets:
                wanted[sock.fileno()] = self.blocked(acceptor.at_share())
        for fd, keys in wanted.items():
            if self._filtered.get(fd, []) == keys:
                continue
            held = borrowed(fd)
            if held is None:
                continue
            try:
                attach_filter(held, keys)
                self._filtered[fd] = keys
            except OSError as error:
                log.warning("filter_failed", error=str(error))
            finally:
                held.detach()

    def watch_grpc(self) -> None:
        """Count the gRPC port's connections by address; shut down those beyond an address's
        share (the most recent first) and those of addresses cooling down."""
        by_key: dict[Key, list[Listed]] = {}
        for item in self._grpc_listed():
            if not item.listening:
                by_key.setdefault(address_key(item.address), []).append(item)
        over: set[Key] = set()
        beyond: list[Listed] = []
        cooling: list[Listed] = []
        for key, held in by_key.items():
            if self.exempt(key):
                continue
            if self.budget.cooling(key):
                cooling += held
            elif len(held) >= self.grpc_per_address:
                over.add(key)
                held.sort(key=lambda item: item.inode)
                beyond += held[self.grpc_per_address:]
        if beyond:
            closed = self._shut(beyond)
            CLOSED.labels("grpc", "address_share").inc(closed)
            self._capped.add(closed, per_address=self.grpc_per_address, addresses=len(over))
        if cooling:
            CLOSED.labels("grpc", "cut").inc(self._shut(cooling))
        self.grpc_over = over
        self.refilter()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            try:
                if self.grpc_port and self.grpc_per_address:
                    self.watch_grpc()
                else:
                    self.refilter()
            except OSError as error:  # no sock_diag here: the gRPC port is not counted
                log.warning("connection_watch_unavailable", error=str(error))
                self.grpc_per_address = 0
            except Exception:  # never let the watch die: the next round
                log.exception("connection_watch_failed")
            await asyncio.sleep(WATCH_EVERY_S)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.table.close()


# --- the WebSocket port: accepted here, counted before TLS and before the upgrade ----------


class Acceptor:
    """Accepts a port's connections itself: counted by address before anything is read, one
    over the port's share (``max_total``) or its address's share (``per_address``) closed as
    it comes, out of descriptors handled by pausing. ``serve(sock, key)`` takes each admitted
    connection; ``release(key)`` must follow when it ends."""

    def __init__(self, sockets: list[socket.socket], name: str, max_total: int,
                 per_address: int, serve: Callable[[socket.socket, Key], None],
                 door: ConnectionLimits | None = None) -> None:
        self.sockets = sockets
        self.name = name
        self.max_total = max_total
        self.per_address = per_address
        self.serve = serve
        self.door = door
        self.open: Counter[Key] = Counter()
        self.by_address: dict[Key, set[socket.socket]] = {}
        """The admitted connections' sockets, to cut an address."""
        self.paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exhausted = _Logged("out_of_descriptors")
        self._full = _Logged("connections_over_share")

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sock in self.sockets:
            sock.setblocking(False)
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting and close the listening sockets."""
        if self._loop is not None:
            for sock in self.sockets:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(sock.fileno())
        for sock in self.sockets:
            sock.close()
        self._loop = None

    def at_share(self) -> list[Key]:
        return [key for key, n in self.open.items() if n >= self.per_address]

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(128):
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as error:
                if error.errno not in OUT_OF_DESCRIPTORS:
                    log.warning("accept_failed", port=self.name, error=str(error))
                    return
                self._pause(listener)
                return
            self._admit(sock, address_of(peer))

    def _pause(self, listener: socket.socket) -> None:
        """Out of descriptors: stop accepting for a moment (the pending connections wait in the
        kernel's queue), logged once a period with the count."""
        CLOSED.labels(self.name, "out_of_descriptors").inc()
        self._exhausted.add(port=self.name, open=self.open.total(), retry_s=ACCEPT_RETRY_S)
        loop = self._loop
        if loop is None or self.paused:
            return
        self.paused = True
        for sock in self.sockets:
            loop.remove_reader(sock.fileno())
        loop.call_later(ACCEPT_RETRY_S, self._resume)

    def _resume(self) -> None:
        self.paused = False
        if self._loop is not None:
            for sock in self.sockets:
                self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _admit(self, sock: socket.socket, address: IPAddress) -> None:
        key = address_key(address)
        why = None
        exempt = self.door is not None and self.door.exempt(key)
        if self.door is not None and not exempt and self.door.budget.cooling(key):
            why = "cut"
        elif self.open.total() >= self.max_total:
            why = "server_share"
        elif not exempt and self.open[key] >= self.per_address:
            why = "address_share"
        if why is not None:
            with contextlib.suppress(OSError):  # reset: nothing left behind (no TIME_WAIT)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            CLOSED.labels(self.name, why).inc()
            self._full.add(port=self.name, why=why, open=self.open.total())
            return
        self.open[key] += 1
        self.by_address.setdefault(key, set()).add(sock)
        sock.setblocking(False)
        self.serve(sock, key)

    def release(self, key: Key, sock: socket.socket | None = None) -> None:
        """One of ``key``'s connections ended."""
        self.open[key] -= 1
        if self.open[key] <= 0:
            del self.open[key]
        held = self.by_address.get(key)
        if held is not None and sock is not None:
            held.discard(sock)
            if not held:
                del self.by_address[key]

    def close_address(self, key: Key) -> int:
        """Shut down every connection of ``key`` (each is released as it ends)."""
        closed = 0
        for sock in list(self.by_address.get(key, ())):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                closed += 1
        return closed
