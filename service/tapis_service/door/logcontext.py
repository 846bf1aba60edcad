"""The log context of the RPC being served (rpc, game, seat): bound in one step per call,
merged into a log line only when one is written."""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from contextvars import ContextVar, Token
from typing import Any, Final

from tapis_service.door.proxies import FORWARDED_FOR, TrustedProxies

_CONTEXT: Final[ContextVar[dict[str, Any] | None]] = ContextVar("tapis_log_context", default=None)
_GET: Final = _CONTEXT.get
_SET: Final = _CONTEXT.set
_RESET: Final = _CONTEXT.reset
"""``_CONTEXT``'s methods, bound once: a call on the hot path without a lookup by name."""
_PROCESS: dict[str, Any] = {}
"""Bound for the whole process (a cluster node's id): on every line."""
per_action_lines = True
"""Whether the info lines written for every action (``action_applied``, ``server_move``) can
be written at all: ``configure_logging`` turns it off for a level above info, where structlog
would drop them anyway, so the hot path does not even build them."""


debug_lines = False
"""Whether debug lines are written at all (``configure_logging``): the per-call line is not
even built otherwise."""


def bind_process(**values: Any) -> None:
    """Add ``values`` to every log line of this process from now on."""
    _PROCESS.update(values)


def bind(**values: Any) -> Token[dict[str, Any] | None]:
    """Add ``values`` to the current context (the call's task); ``reset`` undoes it."""
    current = _GET()
    return _SET({**current, **values} if current else values)


def enter(**values: Any) -> Token[dict[str, Any] | None] | None:
    """Add ``values`` (a method's own: the RPC, the table) to the log context of the call being
    served, until ``leave``. A call its transport bound (``bind(call=...)``: the gRPC call
    guard's ``CallInfo``, a WebSocket frame's or a relayed call's None: ``door.Door.bind``)
    has a context made for it alone, so they go into it, without a second context and token
    (a slow call's line then names them too); otherwise (a method called directly) they are
    bound as ``bind`` does, and ``leave`` undoes that."""
    current = _GET()
    if current is not None and "call" in current:
        current.update(values)
        return None
    return _SET({**current, **values} if current else values)


def leave(token: Token[dict[str, Any] | None] | None) -> None:
    """Undo an ``enter`` (nothing when it added to the call's own context)."""
    if token is not None:
        _RESET(token)


def add(**values: Any) -> None:
    """Add ``values`` to the context the current call bound (``bind`` made it for this call
    alone), until that call's ``reset``: no second token to keep."""
    current = _GET()
    if current is None:
        _SET(values)
    else:
        current.update(values)


def reset(token: Token[dict[str, Any] | None]) -> None:
    _RESET(token)


class CallInfo:
    """The call a line is written during, bound once per call (by the call guard): the peer,
    the request id, the trace id (W3C ``traceparent``) and the milliseconds since the call
    started, worked out only when a line is written (reading a call's headers builds them
    anew: about a microsecond, on every call otherwise). It reads them from the call's grpc
    context while the call runs, and holds nothing of it once the call has ended (``end``): a
    task the call started may log after the call is gone, and its lines are then not taken
    for the call's."""

    __slots__ = ("context", "proxies", "request", "started")

    def __init__(self, context: Any, request: Any, started: float,
                 proxies: TrustedProxies | None = None) -> None:
        self.context: Any = context
        self.request = request
        self.started = started
        self.proxies = proxies
        """Behind one of these, the peer written is the client's (``x-forwarded-for``)."""

    def end(self) -> None:
        """The call has ended: its lines are over."""
        self.context = None

    def client(self, context: Any) -> str:
        """The client's address (the peer's, unless it is a trusted proxy)."""
        peer = str(context.peer())
        if self.proxies is None or not self.proxies.networks:
            return peer
        return self.proxies.client_peer(peer, [str(v) for k, v in
                                               context.invocation_metadata() or ()
                                               if k == FORWARDED_FOR])

    def fields(self) -> dict[str, Any]:
        context = self.context
        if context is None:
            return {}
        found: dict[str, Any] = {"peer": self.client(context),
                                 "ms": round((time.perf_counter() - self.started) * 1000, 3)}
        request_id = getattr(self.request, "request_id", "")
        if request_id:
            found["request_id"] = request_id[:40]
        for key, value in context.invocation_metadata() or ():
            if key == "traceparent":
                parts = str(value).split("-")
                if len(parts) >= 2 and len(parts[1]) == 32 and all(
                        c in "0123456789abcdef" for c in parts[1]):
                    found["trace_id"] = parts[1]
        return found


def merge(logger: Any, method_name: str,
          event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: the bound context under the line's own keys (a call's
    ``CallInfo`` becomes its fields)."""
    context = _GET()
    if context:
        event_dict = {**context, **event_dict}
        call = event_dict.pop("call", None)
        if isinstance(call, CallInfo):
            event_dict = {**call.fields(), **event_dict}
    if _PROCESS:
        return {**_PROCESS, **event_dict}
    return event_dict
