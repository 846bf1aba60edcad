"""A socket's request stepped without a task (``connection.Connection._serve_now``): its first
step in the callback of the message that carries it (``first_step``); when it waits, the rest
is resumed by what it waits on (``resuming.Resumed``), as a task would step it. Compiled by
mypyc (``tools/compiled.py``) with the connection.
"""

from __future__ import annotations

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

