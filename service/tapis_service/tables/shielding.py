"""A table's inputs run shielded: each in a task of its own, so that a caller's cancellation
(a stream closed, a deadline) ends its wait, never the input's fate (the table actor's
``SHIELDED`` methods)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import structlog

from tapis_engine.errors import RuleError
from tapis_service.observe.errors import ServiceError

log = structlog.get_logger("tapis.host")

P = ParamSpec("P")
R = TypeVar("R")


class _Host(Protocol):
    keeps_journal: bool


class _Actor(Protocol):
    @property
    def host(self) -> _Host: ...


A = TypeVar("A", bound=_Actor)


def retrieve(task: asyncio.Future[Any]) -> None:
    """A finished task nobody may be waiting for: its refusal is the caller's business, any
    other failure is a bug worth a log line."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not isinstance(error, ServiceError | RuleError):
        log.error("table_task_failed", error=repr(error)[:300])


def shielded(method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]]
             ) -> Callable[Concatenate[A, P], Awaitable[R]]:
    """Run each call in a task of its own and wait for it shielded: the caller's cancellation
    ends the wait, not the work. With a store that keeps nothing, a call never suspends (its
    journal write is committed at once): nothing could interrupt it, and the caller awaits the
    method's own coroutine, in its own task — the actor binds the method itself then, without
    this wrapper's call (``SHIELDED``: about 1% of an action's instructions).

    The shield is ``asyncio.shield`` and ``retrieve`` in one callback: the task hands its
    outcome to the caller's waiter (a future the caller may cancel without touching the task),
    and a failure nobody may be waiting for is logged. The loop is looked up once per actor and
    loop (on Python 3.11 each lookup is a ``getpid`` call)."""

    @functools.wraps(method)
    def run(actor: A, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        if not actor.host.keeps_journal:
            return method(actor, *args, **kwargs)
        state = vars(actor)
        loop: asyncio.AbstractEventLoop | None = state.get("_shielding_loop")
        if loop is None or not loop.is_running():
            loop = state["_shielding_loop"] = asyncio.get_running_loop()
        task = loop.create_task(method(actor, *args, **kwargs))
        waiter: asyncio.Future[R] = loop.create_future()
        task.add_done_callback(functools.partial(_hand_over, waiter))
        return waiter

    return run


def _hand_over(waiter: asyncio.Future[R], task: asyncio.Future[R]) -> None:
    """A shielded call's task is done: its outcome to the caller's waiter, unless the caller
    went away (its waiter cancelled); an unexpected failure logged either way."""
    retrieve(task)
    if waiter.done():
        return
    if task.cancelled():  # the loop is closing
        waiter.cancel()
        return
    error = task.exception()
    if error is None:
        waiter.set_result(task.result())
    else:
        waiter.set_exception(error)
