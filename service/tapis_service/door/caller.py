"""Who makes a call, as the game logic needs to know it: a plain value, whatever the transport.

A ``Caller`` is built by the transport that received a call — the gRPC adapter
(``door.caller_of``) from the call's headers and peer, a WebSocket once per socket and
credentials (``ws.connection``), a cluster node's tunnel from a relayed frame — and handed with
the request message to ``GameApi``. Nothing below the transport adapters reads headers, peers
or deadlines any other way.
"""

from __future__ import annotations

import time
from typing import NamedTuple


class Remembered:
    """What one connection has verified of the seat token it sends again and again: the seat
    it holds at ``game_id``, as of the token registry's ``generation``
    (``tokens.SeatTokens.seat_of`` reads and writes it; every revocation there moves the
    generation on, so a remembered verification is one comparison and never outlives a
    revocation). Not part of who calls: it compares equal to any other and to none, so a
    ``Caller`` carrying one equals the same caller without."""

    __slots__ = ("game_id", "generation", "seat", "token")

    def __init__(self, token: str) -> None:
        self.token = token
        self.game_id = ""
        self.seat = 0
        self.generation = -1
        """-1: nothing verified yet."""

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, Remembered)

    def __hash__(self) -> int:
        return hash(None)

    def __repr__(self) -> str:
        return "Remembered()"


class Caller(NamedTuple):
    """The caller of one request: an immutable value (a ``NamedTuple``, which a transport builds
    on every call in a quarter of the time a frozen dataclass takes; change one with
    ``_replace``)."""

    seat_token: str | None = None
    """The seat token it sent (``authorization: Bearer <token>``); None for a spectator."""
    bad_authorization: bool = False
    """It sent an ``authorization`` header, not empty, that is not ``Bearer <token>`` (refused
    INVALID_TOKEN where a seat is looked up; an empty one is none: ``credential``)."""
    api_key: str | None = None
    """A backend's key (``x-api-key``), if it sent one."""
    peer: str = ""
    """The client's own address (``ipv4:1.2.3.4:5678``): its connection, for per-connection
    caps, and without the port its host, for per-address limits. A relayed call carries the
    client's, not the relaying node's."""
    deadline: float | None = None
    """When the client stops waiting, in ``time.monotonic()`` seconds (None: no deadline)."""
    forwarded: bool = False
    """The call was relayed by another node of the cluster (it is never relayed again)."""
    traceparent: str | None = None
    """The W3C trace context of the call's span (``--otel`` only): a relayed call carries it
    to the owner, whose span continues the trace (``tracing``)."""
    remembered: Remembered | None = None
    """The seat token's verification as the connection that carried the call remembers it
    (None: verified from scratch, as a relayed call's is)."""

    def time_remaining(self) -> float | None:
        """Seconds until the deadline (None: no deadline; at least 0)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def anonymous(self) -> Caller:
        """The same client without its credentials: what anyone at its address may see."""
        return Caller(peer=self.peer, deadline=self.deadline, forwarded=self.forwarded,
                      traceparent=self.traceparent)

    def relayed(self) -> Caller:
        """This caller as the node a call is relayed to sees it."""
        return self._replace(forwarded=True)


def credential(value: str) -> str | None:
    """A credential as a transport received it — a seat token (gRPC's ``authorization``
    header, a WebSocket frame's ``seat_token``), a backend's key (``x-api-key``, ``api_key``)
    — or None, none sent, when it is empty: the one rule of every door. A WebSocket frame
    cannot tell an empty field from an absent one (proto3, and its JSON form), so an empty
    gRPC header is not either: the call is answered as the same call without it (a call that
    needs a key is refused ``API_KEY_REQUIRED``; a keyless one reads what anyone may), never
    refused ``INVALID_API_KEY`` / ``INVALID_TOKEN`` on one door and let through on the other
    (``tests/trust/test_empty_credentials.py``). A value that is not empty is a credential
    sent, checked and refused if it is not one: white space alone is not empty
    (``INVALID_API_KEY``, ``INVALID_TOKEN``)."""
    return value or None


def deadline_in(seconds: float | None) -> float | None:
    """The ``Caller.deadline`` of a call with ``seconds`` left (None: no deadline)."""
    return None if seconds is None else time.monotonic() + seconds
