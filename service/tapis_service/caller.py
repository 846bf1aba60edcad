"""Who makes a call, as the game logic needs to know it: a plain value, whatever the transport.

A ``Caller`` is built once per call by the transport that received it — the gRPC adapter
(``servicer.caller_of``) from the call's headers and peer, a cluster node's tunnel from a relayed
frame — and handed with the request message to ``GameApi``. Nothing below the transport
adapters reads headers, peers or deadlines any other way.
"""

from __future__ import annotations

import time
from typing import NamedTuple


class Caller(NamedTuple):
    """The caller of one request: an immutable value (a ``NamedTuple``, which a transport builds
    on every call in a quarter of the time a frozen dataclass takes; change one with
    ``_replace``)."""

    seat_token: str | None = None
    """The seat token it sent (``authorization: Bearer <token>``); None for a spectator."""
    bad_authorization: bool = False
    """It sent an ``authorization`` header that is not ``Bearer <token>`` (refused
    INVALID_TOKEN where a seat is looked up)."""
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


def deadline_in(seconds: float | None) -> float | None:
    """The ``Caller.deadline`` of a call with ``seconds`` left (None: no deadline)."""
    return None if seconds is None else time.monotonic() + seconds
