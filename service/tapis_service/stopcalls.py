"""The unary calls still in flight when a graceful stop's grace ends: cut here, each answered
with a precise status, before grpc cancels them itself (which answers ``UNAVAILABLE "Cancelling
all calls"`` with no reason, or a cut stream ``CANCELLED``).

A read is ``UNAVAILABLE`` / ``SERVER_STOPPING`` (nothing changed: retry on another node); a write
is ``UNAVAILABLE`` / ``COMMIT_UNKNOWN``: it may have committed before the cut, and a retry with
the same ``request_id`` gets the committed answer (or applies it once).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import grpc

from tapis_service.errors import ServiceError
from tapis_service.rpcs import RPCS

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


class Guarded(Protocol):
    """The call guard as the stop sees it (``callguard.CallGuard``)."""

    calls: set[asyncio.Task[Any]]
    cutting: bool


async def drain(guard: Guarded, within_s: float | None) -> int:
    """Wait up to ``within_s`` (None: for ever) for the guard's calls to finish, then cancel
    those left (the guard answers each ``cut``) and wait for their answers. The number cut."""
    if guard.calls:
        await asyncio.wait(list(guard.calls), timeout=within_s)
    guard.cutting = True
    left = list(guard.calls)
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left)
    return len(left)
