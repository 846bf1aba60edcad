"""A table's inputs run shielded: each as an input of its own (``Input``, stepped like a task
without being one), so that a caller's cancellation (a stream closed, a deadline) ends its
wait, never the input's fate (the table actor's ``SHIELDED`` methods, through ``Shield``)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Coroutine, Generator
from types import CoroutineType
from typing import Any, Final, Generic, Protocol, TypeVar

import structlog

from tapis_engine.errors import RuleError
from tapis_service.observe.errors import ServiceError

log = structlog.get_logger("tapis.host")

R = TypeVar("R")


def retrieve(task: asyncio.Future[Any]) -> None:
    """A finished task nobody may be waiting for: its refusal is the caller's business, any
    other failure is a bug worth a log line."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not isinstance(error, ServiceError | RuleError):
        log.error("table_task_failed", error=repr(error)[:300])


class Shield:
    """Runs a table's inputs shielded (the table actor's ``SHIELDED`` methods, one ``Shield``
    per actor): each call's coroutine as an input of its own (``Input``), the caller handed a
    waiter, so that the caller's cancellation ends the wait, not the work. With a store that
    keeps nothing (``keeps_journal`` False), an input never suspends (its journal write is
    committed at once): nothing could interrupt it, and the caller awaits the coroutine itself,
    in its own task.

    What ``asyncio.shield`` over a task of its own with ``retrieve`` did, without the task
    (``tests/durability/test_shielding.py`` checks every outcome ends the same): the input runs
    at once up to its first wait (no step of the loop before it applies), is resumed by the
    future it waits on, and hands its outcome to each waiter itself (no callback between).
    The loop is looked up once per loop (on Python 3.11 each lookup is a ``getpid`` call)."""

    __slots__ = ("keeps_journal", "loop")

    def __init__(self, keeps_journal: bool) -> None:
        self.keeps_journal = keeps_journal
        self.loop: asyncio.AbstractEventLoop | None = None
        """The running loop, once an input ran."""

    def run(self, coroutine: Coroutine[Any, Any, R]) -> Awaitable[R]:
        """``coroutine`` run shielded: a waiter of its outcome (the coroutine itself for a
        store that keeps nothing)."""
        if not self.keeps_journal:
            return coroutine
        loop = self.loop
        if loop is None or not loop.is_running():
            loop = self.loop = asyncio.get_running_loop()
        waiter: asyncio.Future[R] = loop.create_future()
        started = Input(loop, coroutine, waiter)
        started.context.run(started.step)
        global _started
        _started = started if started.outcome is None else None
        return waiter


_running: Input[Any] | None = None
"""The input whose step is running (``current_input``)."""
_started: Input[Any] | None = None
"""The input a shielded call started last, while it runs (``follow``)."""


class Follower(Protocol):
    """What waits on an input's first waiter without a task (a WebSocket request,
    ``ws.connection._Resumed``): told when each of the input's later steps begins and ends,
    and resumed by the input's last step itself (``resume``, between the two)."""

    def begin(self) -> None: ...

    def resume(self) -> None: ...

    def end(self) -> None: ...


def follow(waiting: object, follower: Follower) -> bool:
    """Have the input whose caller's waiter ``waiting`` is (the input a shielded call started
    last, still running, its waiter pending) resume ``follower`` at its end directly, in its
    own last step, instead of the waiter's callback a step of the loop later: whether it
    will (if not, the follower waits on ``waiting`` as a task would)."""
    started = _started
    if (started is None or started.outcome is not None or started.follower is not None
            or not started.waiters or started.waiters[0] is not waiting
            or started.waiters[0].done()):
        return False
    started.follower = follower
    return True


def current_input() -> Input[Any]:
    """The input running this code (a table actor's ``SHIELDED`` method's): a retry of its
    request awaits it (``session.pending``)."""
    assert _running is not None, "not in a shielded input"
    return _running


_ENDED: Final = object()


class Input(Generic[R]):
    """One shielded input's coroutine, run as a task runs it but without one: stepped at once
    (in a copy of the caller's context), then each time the future it waits on is done (a bare
    yield: at the loop's next step); its outcome (a value, a refusal, a failure, its own
    cancellation) goes to every waiter not cancelled meanwhile, and a failure nobody may be
    waiting for is logged (``retrieve``'s). Nothing outside cancels it: a waiter's
    cancellation ends that wait only. Awaiting it (a retry of the same request) waits for its
    outcome through a waiter of its own."""

    __slots__ = ("by_next", "context", "coroutine", "follower", "loop", "outcome", "thrown",
                 "value", "waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, R],
                 waiter: asyncio.Future[R]) -> None:
        self.loop = loop
        self.coroutine: Coroutine[Any, Any, None] = self._kept(coroutine)
        self.by_next = type(self.coroutine) is not CoroutineType
        """``_kept`` compiled (mypyc's coroutines are iterators too): stepped by ``next``, its
        end no exception raised into compiled code (a traceback entry, the exception state
        saved and restored: a few thousand instructions an input)."""
        self.value: Any = None
        """The coroutine's value, once it returned (kept by ``_kept``)."""
        self.context = contextvars.copy_context()
        self.waiters = [waiter]
        self.thrown: BaseException | None = None
        """What the next step throws into the coroutine instead of resuming it."""
        self.outcome: tuple[R, BaseException | None] | None = None
        """Once done: its value, or what it raised (for later waiters)."""
        self.follower: Follower | None = None
        """What awaits the first waiter without a task, resumed by the last step (``follow``)."""

    def __await__(self) -> Generator[Any, None, R]:
        return self.joined().__await__()

    async def _kept(self, coroutine: Coroutine[Any, Any, R]) -> None:
        """``coroutine``, its value kept in ``value``."""
        self.value = await coroutine

    def joined(self) -> asyncio.Future[R]:
        """A waiter of the outcome (cancelling it cancels nothing else)."""
        waiter: asyncio.Future[R] = self.loop.create_future()
        if self.outcome is None:
            self.waiters.append(waiter)
        else:
            _hand(waiter, *self.outcome)
        return waiter

    def step(self, _done: object = None) -> None:
        """Run the coroutine up to its next wait, or its end (in its context: every step but
        the first is a callback of the loop's, run there)."""
        global _running
        outer, _running = _running, self
        follower = self.follower
        if follower is not None:
            follower.begin()
        try:
            thrown = self.thrown
            if thrown is not None:
                self.thrown = None
                waiting = self.coroutine.throw(thrown)
            elif self.by_next:
                waiting = next(self.coroutine, _ENDED)  # type: ignore[call-overload]
                if waiting is _ENDED:
                    self._end(self.value, None)
                    return
            else:
                waiting = self.coroutine.send(None)
        except StopIteration:
            self._end(self.value, None)
            return
        except asyncio.CancelledError as cancelled:
            self._end(None, cancelled)
            return
        except BaseException as error:
            self._end(None, error)
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            return
        finally:
            _running = outer
            if follower is not None:
                follower.end()
        if waiting is None:  # a bare yield
            self.loop.call_soon(self.step, context=self.context)
        elif getattr(waiting, "_asyncio_future_blocking", False):
            waiting._asyncio_future_blocking = False
            waiting.add_done_callback(self.step, context=self.context)
        else:  # what a task refuses, refused alike
            self.thrown = RuntimeError(f"an input awaited {waiting!r}, which is not a future")
            self.loop.call_soon(self.step, context=self.context)

    def _end(self, value: Any, error: BaseException | None) -> None:
        """The outcome: kept, checked (``retrieve``'s), and handed to each waiter still
        waiting; then resumes its follower, if its wait was not cancelled meanwhile (what the
        first waiter's callback would do a step of the loop later, now)."""
        global _started
        self.outcome = (value, error)
        if _started is self:
            _started = None
        if error is not None and not isinstance(error, ServiceError | RuleError
                                                | asyncio.CancelledError):
            log.error("table_task_failed", error=repr(error)[:300])
        follower, self.follower = self.follower, None
        if follower is not None and self.waiters[0].done():  # its wait was cancelled
            follower = None
        for waiter in self.waiters:
            if not waiter.done():
                _hand(waiter, value, error)
        self.waiters = []
        if follower is not None:
            follower.resume()


def _hand(waiter: asyncio.Future[R], value: R, error: BaseException | None) -> None:
    """An outcome into ``waiter``."""
    if error is None:
        waiter.set_result(value)
    elif isinstance(error, asyncio.CancelledError):
        waiter.cancel()
    else:
        waiter.set_exception(error)
