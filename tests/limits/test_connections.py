"""What a stranger's connections may cost (tapis_service/door/connections.py): each address's share
of a port's connections, counted before TLS and before any request; the handshake deadline;
the listening sockets' filter; running out of descriptors."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import connections
from tapis_service.door.connections import (
    Acceptor,
    ConnectionLimits,
    RefusalBudget,
    address_key,
    key_of_peer,
)
from tapis_service.door.portsockets import attach_filter, descriptors, filter_program
from tapis_service.observe.clock import ManualClock
from tapis_service.ws.endpoint import EndpointLimits, WebSocketEndpoint
from tests.support.certificates import issue
from tests.support.relay import silent, tcp_state
from tests.support.server import ServerFactory
from tests.support.websocket import Client


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for sock in held:
        sock.close()


def test_connections_are_counted_by_address_and_ipv6_by_its_64() -> None:
    assert address_key(ipaddress.ip_address("10.1.2.3")) == ipaddress.ip_network("10.1.2.3/32")
    assert address_key(ipaddress.ip_address("2001:db8:1:2:aa::1")) == address_key(
        ipaddress.ip_address("2001:db8:1:2:bb::9")) == ipaddress.ip_network("2001:db8:1:2::/64")
    assert address_key(ipaddress.ip_address("::ffff:10.0.0.7")) == ipaddress.ip_network(
        "10.0.0.7/32")
    assert key_of_peer("ipv4:10.1.2.3:5678") == ipaddress.ip_network("10.1.2.3/32")
    assert key_of_peer("ipv6:[2001:db8::5]:443") == ipaddress.ip_network("2001:db8::/64")
    assert key_of_peer("unix:/tmp/socket") is None


def test_the_filter_program_drops_only_the_blocked_addresses() -> None:
    """The program read as the kernel would: version, then the source address's words."""
    keys = [ipaddress.ip_network("10.0.0.2/32"), ipaddress.ip_network("2001:db8:1:2::/64")]

    def run(packet: bytes) -> int:
        program, pc, a = filter_program(keys), 0, 0
        while True:
            code, jt, jf, k = program[pc]
            if code == 0x30:  # ldb [net + k]
                a = packet[k - (1 << 32) + 0x100000]
            elif code == 0x20:
                a = struct.unpack_from("!I", packet, k - (1 << 32) + 0x100000)[0]
            elif code == 0x74:
                a >>= k
            elif code == 0x15:
                pc += jt if a == k else jf
            elif code == 0x05:
                pc += k
            elif code == 0x06:
                return k
            pc += 1

    def v4(source: str) -> bytes:
        return bytes([0x45]) + bytes(11) + ipaddress.ip_address(source).packed + bytes(4)

    def v6(source: str) -> bytes:
        return bytes([0x60]) + bytes(7) + ipaddress.ip_address(source).packed + bytes(16)

    assert run(v4("10.0.0.2")) == 0
    assert run(v4("10.0.0.3")) == 0xFFFFFFFF
    assert run(v6("2001:db8:1:2::99")) == 0
    assert run(v6("2001:db8:1:3::99")) == 0xFFFFFFFF
    assert run(v6("2001:db8:9:2::99")) == 0xFFFFFFFF


def test_a_listening_socket_filter_drops_new_connections_of_blocked_addresses(
        sockets: list[socket.socket]) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    sockets.append(listener)
    port = listener.getsockname()[1]
    attach_filter(listener, [ipaddress.ip_network("127.0.0.2/32")])
    blocked = silent("127.0.0.2", port)
    sockets.append(blocked)
    other = socket.socket()
    sockets.append(other)
    other.bind(("127.0.0.3", 0))
    other.connect(("127.0.0.1", port))  # completes: its SYN went through
    assert tcp_state(other) == "ESTABLISHED"
    assert tcp_state(blocked) == "SYN_SENT"  # its SYN was dropped before any accept
    accepted, peer = listener.accept()
    sockets.append(accepted)
    assert peer[0] == "127.0.0.3"
    attach_filter(listener, [])  # taken off: new connections come again
    again = socket.socket()
    sockets.append(again)
    again.bind(("127.0.0.2", 0))
    again.connect(("127.0.0.1", port))
    assert tcp_state(again) == "ESTABLISHED"


def test_refused_calls_past_an_address_budget_cool_it_down_then_it_is_forgiven() -> None:
    clock = ManualClock()
    budget = RefusalBudget(rate_per_s=1.0, burst=3, cooldown_ms=60_000, now_ms=clock.now_ms)
    stranger, other = (ipaddress.ip_network(a) for a in ("10.0.0.2/32", "10.0.0.3/32"))
    assert [budget.refused(stranger) for _ in range(3)] == [False] * 3
    assert budget.refused(stranger)  # the fourth at once: past the burst
    assert budget.cooling(stranger) and not budget.cooling(other)
    assert budget.cooling_keys() == [stranger]
    assert not budget.refused(other)  # another address has its own budget
    clock.advance(59_999)
    assert budget.cooling(stranger)
    clock.advance(1)
    assert not budget.cooling(stranger) and budget.cooling_keys() == []
    assert [budget.refused(stranger) for _ in range(3)] == [False] * 3  # a fresh budget
    clock.advance(2_000)  # the rate refills it: two more
    assert [budget.refused(stranger) for _ in range(3)] == [False, False, True]
    assert not RefusalBudget(0, 1, 1, clock.now_ms).refused(stranger)  # rate 0: no budget


async def test_an_address_over_its_share_of_grpc_connections_is_cut_back_and_filtered(
        make_server: ServerFactory, sockets: list[socket.socket]) -> None:
    """The count and the cut by hand first (the server's own watch, every half second, would
    race the test's counting), then the watch on its own, for an address it has not seen."""
    harness = await make_server(clock=ManualClock(), max_connections_per_address=3)
    door = harness.running.connection_limits
    assert door is not None
    await door.stop()
    port = harness.running.port
    sockets += [silent("127.0.0.2", port) for _ in range(5)]
    sockets.append(silent("127.0.0.3", port))
    stranger = ipaddress.ip_network("127.0.0.2/32")
    while len([item for item in door.table.listed(port)
               if address_key(item.address) == stranger]) < 5:
        await asyncio.sleep(0.01)
    while len(descriptors(
            {item.inode for item in door.table.listed(port)})) < 7:  # grpc accepted them all
        await asyncio.sleep(0.01)
    door.watch_grpc()
    assert door.grpc_over == {stranger}
    while len([item for item in door.table.listed(port) if not item.listening
               and address_key(item.address) == stranger]) > 3:
        await asyncio.sleep(0.01)  # two shut down: grpc's core closes them
    late = silent("127.0.0.2", port)
    sockets.append(late)
    await harness.stub.ListGames(pb.ListGamesRequest())  # the host's own: never capped
    assert tcp_state(late) == "SYN_SENT"  # the filter drops the stranger's new ones
    fresh = silent("127.0.0.3", port)
    sockets.append(fresh)
    await harness.stub.ListGames(pb.ListGamesRequest())
    assert tcp_state(fresh) == "ESTABLISHED"
    sockets += [silent("127.0.0.4", port) for _ in range(5)]
    door.start()  # the server's watch finds the new address over its share by itself
    other = ipaddress.ip_network("127.0.0.4/32")
    while other not in door.grpc_over or len(
            [item for item in door.table.listed(port) if not item.listening
             and address_key(item.address) == other]) > 3:
        await asyncio.sleep(0.01)


def test_the_handshake_deadline_is_given_to_grpc() -> None:
    from tapis_service.process.server import server_options
    from tapis_service.settings import Settings

    options = dict(server_options(Settings(handshake_timeout_ms=3_000)))
    assert options["grpc.server_handshake_timeout_ms"] == 3_000


class TinyApi:
    """An API whose every method refuses to be called (these tests never get that far)."""

    def __getattr__(self, name: str) -> Any:
        async def method(*_: Any) -> Any:
            raise AttributeError(name)

        return method


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[WebSocketEndpoint, int]]:
    """A port with small caps and a handshake deadline of a second: long enough that the
    tests' own steps never race it on a busy host, short enough to wait for."""
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(  # type: ignore[arg-type]
        max_connections=4, max_connections_per_address=2, handshake_s=1.0))
    port = await served.start("127.0.0.1", 0)
    yield served, port
    await served.stop(0)


async def closed_by_server(sock: socket.socket) -> None:
    """Wait until the server closed ``sock`` (its end of file, or a reset)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            if await loop.sock_recv(sock, 100) == b"":
                return
        except ConnectionResetError:
            return


async def test_websocket_connections_are_capped_by_address_before_the_upgrade(
        endpoint: tuple[WebSocketEndpoint, int], sockets: list[socket.socket]) -> None:
    served, port = endpoint
    assert served.acceptor is not None
    held = [silent("127.0.0.2", port) for _ in range(2)]
    sockets += held
    while served.acceptor.open.total() < 2:
        await asyncio.sleep(0.01)
    third = silent("127.0.0.2", port)
    sockets.append(third)
    await asyncio.wait_for(closed_by_server(third), 5)  # closed as it came: before any byte
    assert served.acceptor.open[ipaddress.ip_network("127.0.0.2/32")] == 2
    client = await Client.open(f"ws://127.0.0.1:{port}/ws")  # another address: served
    client.close()
    for sock in held:  # and the silent ones are closed at the handshake deadline
        await asyncio.wait_for(closed_by_server(sock), 5)
    while served.acceptor.open.total():
        await asyncio.sleep(0.01)


async def test_out_of_descriptors_the_port_pauses_and_logs_once_a_period() -> None:
    """EMFILE on accept: the port stops accepting for a moment (no wake-up spinning on it),
    one line per period with the count (aiofastnet's accept loop raised AttributeError on
    every wake-up: 44,678 lines in 70 s)."""

    class Exhausted(socket.socket):
        def accept(self) -> tuple[socket.socket, Any]:
            raise OSError(errno.EMFILE, "Too many open files")

    listener = Exhausted(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    now = [0.0]
    acceptor = Acceptor([listener], "websocket", 10, 10, lambda sock, key: None)
    acceptor._exhausted.now = lambda: now[0]
    acceptor.start()
    loop = asyncio.get_running_loop()
    with structlog.testing.capture_logs() as logs:
        acceptor._accept(listener)
        assert acceptor.paused
        assert not loop.remove_reader(listener.fileno())  # not watched while paused
        for _ in range(5):
            acceptor._accept(listener)
        now[0] = connections.LOG_EVERY_S
        acceptor._accept(listener)
    lines = [line for line in logs if line["event"] == "out_of_descriptors"]
    assert [line["count"] for line in lines] == [1, 6]
    acceptor._resume()
    assert not acceptor.paused and loop.remove_reader(listener.fileno())
    acceptor.close()


def test_a_cut_address_is_refused_at_the_websocket_accept(tmp_path: Path) -> None:
    clock = ManualClock()
    door = ConnectionLimits(RefusalBudget(1.0, 1, 10_000, clock.now_ms))
    served: list[object] = []
    acceptor = Acceptor([], "websocket", 10, 10, lambda sock, key: served.append(key), door)
    stranger = ipaddress.ip_network("10.0.0.2/32")
    door.budget.refused(stranger)
    door.budget.refused(stranger)
    assert door.budget.cooling(stranger)
    pair = socket.socketpair()
    acceptor._admit(pair[0], ipaddress.ip_address("10.0.0.2"))
    assert served == [] and pair[0].fileno() == -1  # closed as it came
    acceptor._admit(pair[1], ipaddress.ip_address("10.0.0.3"))
    assert served == [ipaddress.ip_network("10.0.0.3/32")]
    pair[1].close()


async def test_with_tls_a_silent_connection_is_closed_at_the_handshake_deadline(
        tmp_path: Path, sockets: list[socket.socket]) -> None:
    """Before TLS is done the socket is not picows's yet: the TLS handshake has the deadline
    too (asyncio's default kept a silent one 60 s), and a good client is served meanwhile."""
    issued = issue(tmp_path, "server")
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(issued.cert, issued.key)
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(handshake_s=1.0))  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0, ssl_context=server_side)
    assert served.acceptor is not None
    quiet = silent("127.0.0.2", port)
    sockets.append(quiet)
    client = await Client.open(f"wss://127.0.0.1:{port}/ws",
                               ssl_context=ssl.create_default_context(cafile=str(issued.ca)))
    await asyncio.wait_for(closed_by_server(quiet), 5)
    while served.acceptor.open[ipaddress.ip_network("127.0.0.2/32")]:
        await asyncio.sleep(0.01)  # and its place given back
    assert served.acceptor.open.total() == 1  # the client's, still open
    client.close()
    await served.stop(0)


async def test_stopping_the_port_closes_the_connections_not_upgraded_yet(
        sockets: list[socket.socket]) -> None:
    served = WebSocketEndpoint(TinyApi(), EndpointLimits(handshake_s=60))  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0)
    assert served.acceptor is not None
    acceptor = served.acceptor
    quiet = silent("127.0.0.2", port)
    sockets.append(quiet)
    while not acceptor.open:
        await asyncio.sleep(0.01)
    await served.stop(0)
    await asyncio.wait_for(closed_by_server(quiet), 5)
