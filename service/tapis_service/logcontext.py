"""The log context of the RPC being served (rpc, game, seat): bound in one step per call,
merged into a log line only when one is written."""

from __future__ import annotations

from collections.abc import MutableMapping
from contextvars import ContextVar, Token
from typing import Any

_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("tapis_log_context", default=None)
_PROCESS: dict[str, Any] = {}
"""Bound for the whole process (a cluster node's id): on every line."""
per_action_lines = True
"""Whether the info lines written for every action (``action_applied``, ``server_move``) can
be written at all: ``configure_logging`` turns it off for a level above info, where structlog
would drop them anyway, so the hot path does not even build them."""


def bind_process(**values: Any) -> None:
    """Add ``values`` to every log line of this process from now on."""
    _PROCESS.update(values)


def bind(**values: Any) -> Token[dict[str, Any] | None]:
    """Add ``values`` to the current context (the call's task); ``reset`` undoes it."""
    current = _CONTEXT.get()
    return _CONTEXT.set({**current, **values} if current else values)


def add(**values: Any) -> None:
    """Add ``values`` to the context the current call bound (``bind`` made it for this call
    alone), until that call's ``reset``: no second token to keep."""
    current = _CONTEXT.get()
    if current is None:
        _CONTEXT.set(values)
    else:
        current.update(values)


def reset(token: Token[dict[str, Any] | None]) -> None:
    _CONTEXT.reset(token)


def merge(logger: Any, method_name: str,
          event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: the bound context under the line's own keys."""
    context = _CONTEXT.get()
    if context:
        event_dict = {**context, **event_dict}
    if _PROCESS:
        return {**_PROCESS, **event_dict}
    return event_dict
