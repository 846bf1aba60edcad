"""A WebSocket request that waits, resumed as a task would resume it, without a task
(``Resumed``): by the future it waits on, or, when that is a shielded input's caller's waiter,
by the input itself in its last step (``shielding.follow``), its socket corked meanwhile so
that the events frame the input writes to it at commit and the answer go out in one write.
Apart from ``connection.py`` (the socket's frames and calls) to keep each module to one job;
compiled by mypyc (``tools/compiled.py``)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

from tapis_service.tables import shielding
from tapis_service.ws import stepping


class Resumed:
    """The rest of ``serving``, a coroutine started already and suspended on ``waiting`` (what
    its last step yielded: a future, or None for a bare yield), resumed as a task would resume
    it but without one: by a callback of the future it waits on (at the loop's next step after
    a bare yield), each step in ``context``. ``cancel`` (the socket gone) cancels the future it
    waits on, as a task's cancel does, so the coroutine finds its wait cancelled; after a bare
    yield its next step throws the cancellation in. ``serving`` (``Connection._serve``)
    catches every failure but its cancellation, which ends it here as it ends a task.

    Waiting on a shielded input's caller's waiter (a table's call on a store that keeps a
    journal), it is resumed by the input itself, in the input's last step
    (``shielding.follow``), not by the waiter's callback a step of the loop later; and its
    socket is corked during each later step of that input: the events frame the input writes
    to this socket at commit and the answer go out in one write, in the order written."""

    __slots__ = ("cancelling", "connection", "context", "corked", "ended", "following",
                 "loop", "serving", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, serving: Coroutine[Any, Any, None],
                 waiting: Any, context: contextvars.Context,
                 connection: Any = None) -> None:
        self.loop = loop
        self.connection = connection
        """The ``connection.Connection`` it answers on (corked while its input steps; none:
        never corked)."""
        self.serving = serving
        self.context = context
        self.cancelling = False
        self.following = False
        """Resumed by the shielded input it waits on (``shielding.follow``)."""
        self.corked: list[bytes | str] | None = None
        """The socket's writes during a step of the input, when this corked it (``begin``)."""
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
            if shielding.follow(waiting, self):
                self.following = True
            else:
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
            else:  # the usual step: its end is no exception (``stepping.step``)
                waiting = stepping.step(self.serving)
        except (StopIteration, asyncio.CancelledError):
            waiting = stepping.ENDED
        if waiting is stepping.ENDED:
            self.serving = None  # type: ignore[assignment]
            if self.ended is not None and not self.ended.done():
                self.ended.set_result(None)
            return
        self._wait(waiting)

    # --- the input it follows (``shielding.Follower``) ---------------------------------------

    def begin(self) -> None:
        """A step of the input begins: the socket is corked (unless it is already)."""
        connection = self.connection
        if connection is not None and connection._corked is None:
            self.corked = connection._corked = []

    def resume(self) -> None:
        """The input ended, its outcome in the waiter: the next step, at once."""
        self.following = False
        self.context.run(self._step)

    def end(self) -> None:
        """The input's step ended: what it wrote to the socket meanwhile, in one write."""
        corked = self.corked
        if corked is not None and self.connection is not None:
            self.corked = None
            self.connection._uncork(corked)

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
        elif self.following:  # the input will not resume it: as the waiter's callback would
            self.following = False
            self.loop.call_soon(self._step, waiting, context=self.context)
        return True
