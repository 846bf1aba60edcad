"""A socket's request stepped without a task (``connection.Connection._serve_now``): its first
step in the callback of the message that carries it (``first_step``), and, when it waits, the
rest resumed by what it waits on (``Resumed``), as a task would step it. Compiled by mypyc
(``tools/compiled.py``) with the connection.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from types import CoroutineType
from typing import Any, Final

ENDED: Final = object()
"""What ``first_step`` gives for a request that ended in its first step."""


def first_step(serving: Coroutine[Any, Any, None]) -> Any:
    """The first step of ``serving``, as ``serving.send(None)``: what it waits on, or ``ENDED``
    once it ended. A compiled coroutine (mypyc's, an iterator too) is stepped by
    ``next(serving, ENDED)``, whose ``StopIteration`` the builtin clears in C: caught in
    compiled code, it would first be given a traceback entry and the exception state saved
    and restored (a few thousand instructions a request); a Python coroutine, which is no
    iterator, by ``send`` (``tests/websocket/test_shortcuts.py`` checks the frames are the
    plain path's either way)."""
    if type(serving) is not CoroutineType:
        return next(serving, ENDED)  # type: ignore[call-overload]
    try:
        return serving.send(None)
    except StopIteration:
        return ENDED


class Resumed:
    """The rest of ``serving``, a coroutine started already and suspended on ``waiting`` (what
    its last step yielded: a future, or None for a bare yield), resumed as a task would resume
    it but without one: by a callback of the future it waits on (at the loop's next step after
    a bare yield), each step in ``context``. ``cancel`` (the socket gone) cancels the future it
    waits on, as a task's cancel does, so the coroutine finds its wait cancelled; after a bare
    yield its next step throws the cancellation in. ``serving`` (``Connection._serve``) catches
    every failure but its cancellation, which ends it here as it ends a task."""

    __slots__ = ("cancelling", "context", "ended", "loop", "serving", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, serving: Coroutine[Any, Any, None],
                 waiting: Any, context: contextvars.Context) -> None:
        self.loop = loop
        self.serving = serving
        self.context = context
        self.cancelling = False
        self.waiting: Any = None
        self.ended: asyncio.Future[None] | None = None
        """Set once ``serving`` ended, when someone waits for that (``finished``)."""
        self._wait(waiting)

    def _wait(self, waiting: Any) -> None:
        if waiting is None:  # a bare yield
            self.loop.call_soon(self._step, context=self.context)
        elif getattr(waiting, "_asyncio_future_blocking", False):
            waiting._asyncio_future_blocking = False
            self.waiting = waiting
            waiting.add_done_callback(self._step, context=self.context)
        else:  # what a task refuses, refused alike
            self.loop.call_soon(self._step, RuntimeError(
                f"a request awaited {waiting!r}, which is not a future"), context=self.context)

    def _step(self, thrown: object = None) -> None:
        """One step of ``serving``, in its context (a callback of the loop's)."""
        self.waiting = None
        try:
            if isinstance(thrown, BaseException):
                waiting = self.serving.throw(thrown)
            elif self.cancelling:
                self.cancelling = False
                waiting = self.serving.throw(asyncio.CancelledError())
            else:
                waiting = self.serving.send(None)
        except (StopIteration, asyncio.CancelledError):
            self.serving = None  # type: ignore[assignment]
            if self.ended is not None and not self.ended.done():
                self.ended.set_result(None)
            return
        self._wait(waiting)

    def finished(self) -> asyncio.Future[None]:
        """A future done once ``serving`` has ended (a stop waits for it)."""
        if self.ended is None:
            self.ended = self.loop.create_future()
            if self.serving is None:
                self.ended.set_result(None)
        return self.ended

    def cancel(self) -> bool:
        """Cancel the wait (the socket is gone), as ``Task.cancel`` does."""
        waiting = self.waiting
        if waiting is None or not waiting.cancel():  # its next step throws it in
            self.cancelling = True
        return True
