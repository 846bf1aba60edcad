"""The unary gRPC calls still in flight when a graceful stop's grace ends: cut here, each
answered with a precise status (``door.stopping.cut``), before grpc cancels them itself (which
answers ``UNAVAILABLE "Cancelling all calls"`` with no reason, or a cut stream ``CANCELLED``);
and a step of a stop bounded in time (``within``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

import structlog

log = structlog.get_logger("tapis.server")
T = TypeVar("T")
_abandoned: set[asyncio.Task[Any]] = set()
"""Steps of a stop left running past their bound (kept from the garbage collector)."""


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


async def within(step: Awaitable[T], seconds: float | None, what: str) -> tuple[bool, T | None]:
    """``(True, its result)`` once ``step`` finished within ``seconds`` (None: for ever), else
    ``(False, None)``: a step of a stop that waits on the database (a paused or unreachable
    PostgreSQL answers nothing, and a connection's statement or reset waits for it) never
    holds the stop past its bound. The step is then cancelled and left to unwind on its own,
    not waited for (a cancelled query's connection may itself wait for the database); closing
    the store's connections (``PostgresStore.terminate``) ends it."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if done:
        return True, task.result()
    log.warning("stop_step_abandoned", step=what, after_s=seconds)
    task.cancel()
    _abandoned.add(task)
    task.add_done_callback(_forget)
    return False, None


def _forget(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: no "never retrieved" noise at exit
