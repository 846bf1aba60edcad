"""A socket's request stepped without a task (``connection.Connection._serve_now``): its first
step in the callback of the message that carries it; when it waits, the rest is resumed by what
it waits on (``resuming.Resumed``), as a task would step it. Each step that throws nothing in
is ``step``. Compiled by mypyc (``tools/compiled.py``) with the connection.
"""

from __future__ import annotations

from collections.abc import Coroutine
from types import CoroutineType
from typing import Any, Final

ENDED: Final = object()
"""What ``step`` gives for a request that ended in that step."""
_PYTHON_COROUTINE: Final = CoroutineType
"""Read as a C static, where the imported name is a lookup in the module's dictionary."""


def step(serving: Coroutine[Any, Any, None]) -> Any:
    """One step of ``serving``, as ``serving.send(None)``: what it waits on next, or ``ENDED``
    once it ended (its value, None, dropped). A compiled coroutine (mypyc's, an iterator
    too) is stepped by ``next(serving, ENDED)``, whose ``StopIteration`` the builtin clears
    in C: caught in compiled code, it would first be given a traceback entry and the
    exception state saved and restored (a few thousand instructions a step); a Python
    coroutine, which is no iterator, by ``send`` (``tests/websocket/test_shortcuts.py``
    checks both against ``send``, and the frames against the plain path's)."""
    if type(serving) is not _PYTHON_COROUTINE:
        return next(serving, ENDED)  # type: ignore[call-overload]
    try:
        return serving.send(None)
    except StopIteration:
        return ENDED

