"""What a call meets when the server stops, whatever carried it (a gRPC call, a WebSocket
frame): one taken once the stop has closed the door is refused before any of it runs
(``stopping``); one still in flight when the stop's grace ends is cut with a precise status
(``cut``). The transports answer these in their own form (``grpc.callguard``,
``ws.connection``); ``grpc.stopcalls`` and ``ws.endpoint`` run the stop's steps.

A read is ``UNAVAILABLE`` / ``SERVER_STOPPING`` (nothing changed: retry on another node); a cut
write is ``UNAVAILABLE`` / ``COMMIT_UNKNOWN``: it may have committed before the cut, and a retry
with the same ``request_id`` gets the committed answer (or applies it once).
"""

from __future__ import annotations

import grpc

from tapis_service.door.rpcs import RPCS
from tapis_service.observe.errors import ServiceError

WRITES = frozenset(rpc.path for rpc in RPCS if rpc.writes)
"""The full method names of the calls that may change a table."""


def cut(method: str) -> ServiceError:
    """What a call of ``method`` (a full method name) cut by the server's stop is answered."""
    if method in WRITES:
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                            "the server stopped while it served this request: it may have been "
                            "applied; retry on another node with the same request_id")
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "SERVER_STOPPING",
                        "the server stopped while it served this request; retry on another "
                        "node")


def stopping() -> ServiceError:
    """What a unary call taken once the stop closed the door (``Door.closing``) is answered:
    refused before any of it ran."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "SERVER_STOPPING",
                        "the server is stopping: this request was not applied; retry on "
                        "another node")
