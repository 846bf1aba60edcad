"""The kernel's side of the connection limits (tapis_service/door/connections.py): a listening
socket's filter (classic BPF) that drops the SYNs of some addresses, the TCP sockets of a port
as the kernel lists them (sock_diag: grpc's core owns the gRPC port's), this process's
descriptors of some of them, shutting one down, and listening sockets to accept from."""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Key = ipaddress.IPv4Network | ipaddress.IPv6Network
"""What connections are counted by: an IPv4 address (/32) or an IPv6 /64."""


# --- the listening sockets' filter (classic BPF, SO_ATTACH_FILTER) ------------------------

SO_ATTACH_FILTER = 26
SO_DETACH_FILTER = 27
_NET = -0x100000
"""SKF_NET_OFF: loads relative to the packet's network (IP) header."""
_LD_W_ABS, _LD_B_ABS = 0x20, 0x30
_RSH_K, _JEQ_K, _JA, _RET_K = 0x74, 0x15, 0x05, 0x06
_ACCEPT, _DROP = 0xFFFFFFFF, 0
Instruction = tuple[int, int, int, int]


def _word(value: int) -> int:
    return value & 0xFFFFFFFF


def filter_program(keys: Iterable[Key]) -> list[Instruction]:
    """A socket filter that drops the packets of ``keys`` (IPv4 addresses, IPv6 /64s) and
    lets every other through. On a listening socket it sees only new connections' packets:
    their SYNs are dropped before any accept (the client's connect times out)."""
    v4 = [int(k.network_address) for k in keys if k.version == 4]
    v6 = [int(k.network_address) >> 64 for k in keys if k.version == 6]
    six: list[Instruction] = []
    for prefix in v6:  # the source address is at 8..24 of the IPv6 header: its first 8 bytes
        six += [(_LD_W_ABS, 0, 0, _word(_NET + 8)), (_JEQ_K, 0, 3, prefix >> 32),
                (_LD_W_ABS, 0, 0, _word(_NET + 12)), (_JEQ_K, 0, 1, prefix & 0xFFFFFFFF),
                (_RET_K, 0, 0, _DROP)]
    six.append((_RET_K, 0, 0, _ACCEPT))
    four: list[Instruction] = [(_LD_W_ABS, 0, 0, _word(_NET + 12))]  # IPv4's source
    for address in v4:
        four += [(_JEQ_K, 0, 1, address), (_RET_K, 0, 0, _DROP)]
    four.append((_RET_K, 0, 0, _ACCEPT))
    return [(_LD_B_ABS, 0, 0, _word(_NET)), (_RSH_K, 0, 0, 4), (_JEQ_K, 0, 1, 4),
            (_JA, 0, 0, len(six)), *six, *four]


def attach_filter(sock: socket.socket, keys: list[Key]) -> None:
    """Drop the new connections of ``keys`` on the listening socket ``sock`` (none: the filter
    is taken off, so that connections accepted from then on carry none)."""
    if not keys:
        with contextlib.suppress(OSError):  # none attached
            sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
        return
    program = filter_program(keys)
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in program))
    fprog = struct.pack("HL", len(program), ctypes.addressof(code))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


# --- the gRPC port: grpc's core owns it; the kernel lists its sockets (sock_diag) ---------

_SOCK_DIAG_BY_FAMILY, _NLMSG_ERROR, _NLMSG_DONE = 20, 2, 3
_NLM_F_REQUEST_DUMP = 0x301
_NETLINK_SOCK_DIAG = 4
_BC_S_EQ = 11
"""inet_diag bytecode: the local port equals the next op's ``no``."""
LISTEN, ESTABLISHED, CLOSE_WAIT = 10, 1, 8
_STATES = (1 << LISTEN) | (1 << ESTABLISHED) | (1 << CLOSE_WAIT)


@dataclass(frozen=True, slots=True)
class Listed:
    """A TCP socket on the port, as the kernel lists it."""

    listening: bool
    address: IPAddress
    """The client's (the listener's own for a listener)."""
    inode: int


def _diag_request(family: int, port: int) -> bytes:
    bytecode = struct.pack("BBHBBH", _BC_S_EQ, 8, 12, 0, 0, port)
    attribute = struct.pack("HH", 4 + len(bytecode), 1) + bytecode  # INET_DIAG_REQ_BYTECODE
    body = struct.pack("BBBBI", family, socket.IPPROTO_TCP, 0, 0, _STATES) + bytes(48)
    body += attribute
    return struct.pack("IHHII", 16 + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP,
                       1, 0) + body


class SocketTable:
    """The TCP sockets of one local port (its listeners and its connections, accepted or
    waiting to be), from the kernel's sock_diag: one request, a few milliseconds for
    thousands, whoever owns them (grpc's core here)."""

    def __init__(self) -> None:
        self._netlink: socket.socket | None = None

    def listed(self, port: int) -> list[Listed]:
        if self._netlink is None:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                          _NETLINK_SOCK_DIAG)
        found: list[Listed] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            self._netlink.send(_diag_request(family, port))
            while not self._read(family, found):
                pass
        return found

    def _read(self, family: int, found: list[Listed]) -> bool:
        """One datagram of the answer into ``found``; True at its end."""
        assert self._netlink is not None
        data = self._netlink.recv(1 << 16)
        offset = 0
        while offset < len(data):
            length, kind = struct.unpack_from("IH", data, offset)
            if kind == _NLMSG_DONE:
                return True
            if kind == _NLMSG_ERROR:
                code = -struct.unpack_from("i", data, offset + 16)[0]
                raise OSError(code, f"sock_diag: {os.strerror(code)}")
            at = offset + 16
            raw = data[at + 24:at + 28] if family == socket.AF_INET else data[at + 24:at + 40]
            address: IPAddress = ipaddress.ip_address(bytes(raw))
            found.append(Listed(data[at + 1] == LISTEN, address,
                                struct.unpack_from("I", data, at + 68)[0]))
            offset += (length + 3) & ~3
        return False

    def close(self) -> None:
        if self._netlink is not None:
            self._netlink.close()
            self._netlink = None


def descriptors(inodes: set[int]) -> dict[int, int]:
    """This process's descriptors of the sockets ``inodes`` (by inode)."""
    found: dict[int, int] = {}
    if not inodes:
        return found
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # out of descriptors: the next round
        return found
    for name in names:
        try:
            inode = os.fstat(int(name)).st_ino
        except OSError:
            continue
        if inode in inodes:
            found[inode] = int(name)
    return found


def borrowed(fd: int) -> socket.socket | None:
    """A socket object on descriptor ``fd`` (detach it, never close it), None if ``fd`` is not
    a socket."""
    try:
        return socket.socket(fileno=fd)
    except OSError:
        return None


def address_of(sockname: tuple[object, ...]) -> IPAddress:
    return ipaddress.ip_address(str(sockname[0]).split("%", 1)[0])


def shut_down(fd: int, port: int, address: IPAddress) -> bool:
    """Shut down the connection on descriptor ``fd`` if it still is one of ``address`` on
    ``port`` (its owner, grpc's core, sees it end and closes it); True if it was."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    with sock:  # the duplicate pins the socket: what is checked is what is shut down
        try:
            if sock.getsockname()[1] != port or address_of(sock.getpeername()) != address:
                return False
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
    return True


def listening_sockets(host: str, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host:port`` (every address the name
    resolves to; port 0: a free port, the same for all)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[object, ...]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if address in seen:
                continue
            seen.add(address)
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if sockets[0] is not sock:  # the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
