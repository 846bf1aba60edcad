"""The call guard: undecodable requests and the bound on calls in flight.

grpc's method handlers decode the request before any servicer code runs, and a decoding error
there comes back as ``UNKNOWN "Unexpected <class ...>"``. ``CallGuard`` gives every method a
decoder that never raises: bytes that do not decode become ``Undecodable``, answered
``INVALID_ARGUMENT`` / ``INVALID_REQUEST``. It also bounds the unary calls in flight: beyond
the bound a call is answered at once with ``RESOURCE_EXHAUSTED`` / ``OVERLOADED`` (a client
retries it with backoff) instead of queueing until the client's deadline cancels it. Streams
are not bounded here: they have their own caps (``tapis_service.streams``). Every call, unary
or server stream, is counted and timed in grpc-prometheus' series (``metrics.RPC_*``).

The guard wraps each method handler once, as it is registered (``CallGuard.registering``), not
as a server interceptor, whose coroutine grpc runs on every call (a cost too small to measure
against the machine's noise: docs/performance.md; it is simply less work).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar, cast

import grpc
import structlog

from tapis_service import logcontext, metrics
from tapis_service.errors import ServiceError, to_status
from tapis_service.proxies import TrustedProxies

log = structlog.get_logger("tapis.rpc")

Deserializer = Callable[[bytes], Any]


class Undecodable:
    """What a request decodes to when its bytes are not a valid message."""

    __slots__ = ()


UNDECODABLE = Undecodable()


def safe_deserializer(parse: Deserializer | None) -> Deserializer | None:
    """``parse``, returning ``UNDECODABLE`` instead of raising."""
    if parse is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception:  # any decoding failure: never let grpc answer UNKNOWN
            return UNDECODABLE

    return decode


CHECKS_DECODING = "_tapis_checks_decoding"
"""Set on a server-streaming behavior that refuses ``UNDECODABLE`` itself (``checks_decoding``):
the guard then only counts and times it."""

F = TypeVar("F", bound=Callable[..., Any])


def checks_decoding(behavior: F) -> F:
    """Mark a server-streaming behavior (an async generator) that refuses an ``UNDECODABLE``
    request itself, with ``invalid_request``."""
    setattr(behavior, CHECKS_DECODING, True)
    return behavior


def invalid_request(method: str) -> ServiceError:
    """The refusal of a request whose bytes are not a valid message of ``method``."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST",
                        f"the request is not a valid {method.rsplit('/', 1)[-1]} message")


def _overloaded() -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
                        "the server has too many calls in flight; retry with backoff")


async def _refuse(context: grpc.aio.ServicerContext, error: ServiceError) -> None:
    metrics.REFUSALS.labels(error.code.name, error.reason).inc()
    log.info("refused", code=error.code.name, reason=error.reason)
    await context.abort_with_status(to_status(error))


class CallGuard:
    """Safe request decoding for every method, and at most ``max_in_flight`` unary calls."""

    def __init__(self, max_in_flight: int, proxies: TrustedProxies | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.proxies = proxies
        """The call's log lines name the client behind these (``logcontext.CallInfo``)."""
        self.in_flight = 0

    def registering(self, server: grpc.aio.Server) -> grpc.aio.Server:
        """``server`` as registration code sees it: every handler added through it is
        guarded (the generated ``add_*_to_server`` functions, health, reflection)."""
        return cast(grpc.aio.Server, _GuardedRegistration(self, server))

    def wrap(self, method: str, handler: Any) -> Any:
        """``handler`` (of ``method``, a full method name) guarded."""
        decode = safe_deserializer(handler.request_deserializer)
        if handler.unary_unary is not None:
            return handler._replace(request_deserializer=decode,
                                    unary_unary=self._unary(method, handler.unary_unary))
        if handler.request_deserializer is None:
            # raw-bytes streams (a cluster node's relay, its tunnel): nothing can fail to decode
            return handler
        if handler.unary_stream is not None:
            return handler._replace(request_deserializer=decode,
                                    unary_stream=_checked_stream(method, handler.unary_stream))
        if handler.stream_unary is not None:
            return handler._replace(request_deserializer=decode,
                                    stream_unary=_checked_requests(method, handler.stream_unary))
        return handler._replace(request_deserializer=decode,
                                stream_stream=_checked_requests(method, handler.stream_stream))

    def _unary(self, method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        labels = ("unary", *method.lstrip("/").split("/", 1))
        timing = metrics.RPC_SECONDS.child(*labels)

        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            metrics.RPC_STARTED.inc(*labels)
            call = logcontext.CallInfo(context, request, started, self.proxies)
            bound = logcontext.bind(call=call)
            code = "OK"
            try:
                if request is UNDECODABLE:
                    await _refuse(context, invalid_request(method))
                if self.in_flight >= self.max_in_flight:
                    await _refuse(context, _overloaded())
                self.in_flight += 1
                try:
                    result = behavior(request, context)
                    return await result if inspect.isawaitable(result) else result
                finally:
                    self.in_flight -= 1
            except asyncio.CancelledError:
                code = "CANCELLED"
                raise
            except BaseException:
                code = _code_of(context)
                raise
            finally:
                _handled(labels, timing, code, time.perf_counter() - started)
                call.end()
                logcontext.reset(bound)

        return guarded


SLOW_CALL_S = 1.0
"""A unary call that takes longer is logged at info (every call at debug)."""


def _code_of(context: grpc.aio.ServicerContext) -> str:
    """The status a call that raised ends with (its abort's, else UNKNOWN as grpc answers)."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if code is None else str(code)


def _handled(labels: tuple[str, ...], timing: list[float], code: str, seconds: float) -> None:
    """grpc-prometheus' two metrics, and the call's own log line (debug, or info when slow)."""
    metrics.RPC_HANDLED.inc(*labels, code)
    metrics.RPC_SECONDS.observe_child(timing, seconds)
    if seconds >= SLOW_CALL_S:
        log.info("slow_call", code=code)
    elif logcontext.debug_lines:
        log.debug("call", code=code)


def _checked_stream(method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    """A server-streaming behavior (an async generator, or a coroutine that writes), counted
    and timed as grpc-prometheus does (``grpc_type="server_stream"``: started, each message
    sent, handled with its code, the whole stream's duration)."""
    labels = ("server_stream", *method.lstrip("/").split("/", 1))
    timing = metrics.RPC_SECONDS.child(*labels)
    checks_itself = getattr(behavior, CHECKS_DECODING, False)

    if inspect.isasyncgenfunction(behavior):
        async def generate(request: Any, context: grpc.aio.ServicerContext
                           ) -> AsyncIterator[Any]:
            with _StreamCounted(labels, timing, context):
                if request is UNDECODABLE and not checks_itself:
                    await _refuse(context, invalid_request(method))
                async with contextlib.aclosing(behavior(request, context)) as responses:
                    async for response in responses:
                        metrics.RPC_SENT.inc(*labels)
                        yield response

        return generate

    async def write(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with _StreamCounted(labels, timing, context):
            if request is UNDECODABLE and not checks_itself:
                await _refuse(context, invalid_request(method))
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result

    return write


class _StreamCounted:
    """A server stream, from its start to its end: started, then handled with the code it ended
    with (``CANCELLED`` when its reader left) and its duration."""

    def __init__(self, labels: tuple[str, ...], timing: list[float],
                 context: grpc.aio.ServicerContext) -> None:
        self.labels = labels
        self.timing = timing
        self.context = context
        self.started = 0.0

    def __enter__(self) -> None:
        self.started = time.perf_counter()
        metrics.RPC_STARTED.inc(*self.labels)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: Any) -> None:
        if kind is None:
            code = "OK"
        elif issubclass(kind, (asyncio.CancelledError, GeneratorExit)):
            code = "CANCELLED"
        else:
            code = _code_of(self.context)
        _stream_ended(self.labels, self.timing, code, time.perf_counter() - self.started)


def _stream_ended(labels: tuple[str, ...], timing: list[float], code: str,
                  seconds: float) -> None:
    """A server stream's ``grpc_server_handled_total`` and duration (no log line: a stream
    lasts as long as its reader wants)."""
    metrics.RPC_HANDLED.inc(*labels, code)
    metrics.RPC_SECONDS.observe_child(timing, seconds)


def _checked_requests(method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    """A client-streaming behavior: every request of the stream is checked as it is read."""

    def checked(requests: AsyncIterator[Any],
                context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def read() -> AsyncIterator[Any]:
            async for request in requests:
                if request is UNDECODABLE:
                    await _refuse(context, invalid_request(method))
                yield request

        return read()

    if inspect.isasyncgenfunction(behavior):
        async def generate(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
                           ) -> AsyncIterator[Any]:
            async with contextlib.aclosing(behavior(checked(requests, context),
                                                    context)) as responses:
                async for response in responses:
                    yield response

        return generate

    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        result = behavior(checked(requests, context), context)
        return await result if inspect.isawaitable(result) else result

    return call


class _GuardedGeneric(grpc.GenericRpcHandler):
    """A generic handler whose method handlers are guarded (each wrapped once, by method)."""

    def __init__(self, guard: CallGuard, inner: grpc.GenericRpcHandler) -> None:
        self._guard = guard
        self._inner = inner
        self._handlers: dict[str, Any] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        wrapped = self._handlers.get(method)
        if wrapped is None:
            handler = self._inner.service(handler_call_details)
            if handler is None:
                return None
            wrapped = self._handlers[method] = self._guard.wrap(method, handler)
        return wrapped


class _GuardedRegistration:
    """Stands in for the server while handlers are registered; adds them guarded."""

    def __init__(self, guard: CallGuard, server: grpc.aio.Server) -> None:
        self._guard = guard
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(
            tuple(_GuardedGeneric(self._guard, handler) for handler in handlers))

    def add_registered_method_handlers(self, service: str,
                                       handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        """Registers nothing: the same handlers reach the server through the generic handlers
        the generated ``add_*_to_server`` functions add beside them. grpc.aio keeps a request
        pending for each registered method and waits on all of them (``asyncio.wait``) for
        every call it takes: with the 15 methods served here, that cost more per call than
        finding the handler among the generic ones (``tapis_bench.served_instructions``: 8%
        fewer instructions per War action on the server's main thread without them)."""
