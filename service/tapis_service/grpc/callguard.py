"""The call guard: what every gRPC method passes through, once — safe decoding, the door every
transport shares (``door``: the bound on calls in flight, the call's metrics with ``transport=
"grpc"``), refusals turned into statuses, and the call's log context.

grpc's method handlers decode the request before any servicer code runs, and a decoding error
there comes back as ``UNKNOWN "Unexpected <class ...>"``. ``CallGuard`` gives every method a
decoder that never raises: bytes that do not decode become ``Undecodable``, answered
``INVALID_ARGUMENT`` / ``INVALID_REQUEST``. It bounds the unary calls in flight: beyond the
bound a call is answered at once with ``RESOURCE_EXHAUSTED`` / ``OVERLOADED`` (a client retries
it with backoff) instead of queueing until the client's deadline cancels it. Streams are not
bounded here: they have their own caps (``tapis_service.tables.streams``). A ``ServiceError``
a method raises (its own refusal, or the API's) is told to the door (``Door.refused_call``: the
refusal budget) and ends the call with that refusal's status and ErrorInfo, here and nowhere else.
Every call, unary or server stream, is counted and timed in grpc-prometheus' series
(``metrics.RPC_*``).

A method's behavior returns its answer (or an awaitable of it); a server stream's behavior is a
coroutine function that writes its messages, or anything else that returns them as an async
iterator (an async generator, or a method handing over the API's).

The guard wraps each method handler once, as it is registered (``CallGuard.registering``), not
as a server interceptor, whose coroutine grpc runs on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable, Sequence
from types import CoroutineType, GeneratorType
from typing import Any, NoReturn, cast

import grpc
import structlog

from tapis_service.door import logcontext, stopping
from tapis_service.door.door import (
    SLOW_CALL_S,
    Door,
    Meter,
    Transport,
    call_line,
    looked_up,
    overloaded,
    refused,
)
from tapis_service.door.proxies import TrustedProxies
from tapis_service.observe import metrics
from tapis_service.observe.errors import ServiceError, end_call, fault

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


def invalid_request(method: str) -> ServiceError:
    """The refusal of a request whose bytes are not a valid message of ``method``."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST",
                        f"the request is not a valid {method.rsplit('/', 1)[-1]} message")


_refused = refused

AWAITABLE_TYPES: set[type] = {CoroutineType}
"""The types whose values ``awaitable`` found awaitable: a method's answer is looked up here
first (a compiled coroutine is not a ``CoroutineType``, and ``inspect.isawaitable`` asks
``collections.abc.Awaitable`` through Python frames on every call)."""


def awaitable(value: Any) -> bool:
    """``inspect.isawaitable(value)``, its type remembered when it is awaitable: every value of
    that type is (the answer depends on the type alone, but for a generator, which is one only
    when its code is a generator-based coroutine, and is never remembered)."""
    if type(value) in AWAITABLE_TYPES:
        return True
    if not inspect.isawaitable(value):
        return False
    if type(value) is not GeneratorType:
        AWAITABLE_TYPES.add(type(value))
    return True


class CallGuard:
    """Safe request decoding for every method, the door's bound on unary calls in flight,
    refusals as statuses, every call counted and timed."""

    def __init__(self, door: Door) -> None:
        self.door = door
        """Every call passes it; every refusal is told to it (``Door.refused_call``: the
        refusal budget of strangers' addresses)."""
        self.proxies: TrustedProxies | None = door.proxies
        """The call's log lines name the client behind these (``logcontext.CallInfo``)."""
        self.calls: set[asyncio.Task[Any]] = set()
        """The unary calls in flight (their tasks): a graceful stop cuts those its grace
        leaves (``cutting``, ``stopcalls.drain``)."""
        self.cutting = False
        """The server is stopping: a call cancelled now was cut by it (``stopping.cut``)."""
        self.streaming = 0
        """The calls other than unary in flight: streams either way, the cluster's tunnels."""

    def serving(self) -> int:
        """Every call this server's Python serves now (``corecalls.caught_up``)."""
        return len(self.calls) + self.streaming

    @property
    def in_flight(self) -> int:
        """Unary calls in flight, over every transport."""
        return self.door.in_flight

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
        if handler.unary_stream is not None:
            return handler._replace(request_deserializer=decode,
                                    unary_stream=self._stream(method, handler.unary_stream))
        if handler.request_deserializer is None:
            # a raw-bytes request stream (a cluster node's tunnel): nothing can fail to decode,
            # and the tunnel answers its own refusals
            if handler.stream_unary is not None:
                return handler._replace(stream_unary=self._counted(handler.stream_unary))
            return handler._replace(stream_stream=self._counted(handler.stream_stream))
        if handler.stream_unary is not None:
            return handler._replace(request_deserializer=decode, stream_unary=self._counted(
                _checked_requests(method, handler.stream_unary)))
        return handler._replace(request_deserializer=decode, stream_stream=self._counted(
            _checked_requests(method, handler.stream_stream)))

    def _counted(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        """A client-streaming behavior counted in ``streaming`` while it runs."""
        if inspect.isasyncgenfunction(behavior):
            async def generate(requests: Any, context: grpc.aio.ServicerContext
                               ) -> AsyncIterator[Any]:
                self.streaming += 1
                try:
                    async with contextlib.aclosing(behavior(requests, context)) as responses:
                        async for response in responses:
                            yield response
                finally:
                    self.streaming -= 1

            return generate

        async def call(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            self.streaming += 1
            try:
                result = behavior(requests, context)
                return await result if inspect.isawaitable(result) else result
            finally:
                self.streaming -= 1

        return call

    def _unary(self, method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        door = self.door
        meter = door.meter(method, Transport.GRPC)
        started = meter.started
        answered = meter.answered
        timing, observe = meter.timing, metrics.RPC_SECONDS.observe_child
        proxies = self.proxies
        calls = self.calls
        call_info, bind, reset = logcontext.CallInfo, logcontext.bind, logcontext.reset
        awaitable_types = AWAITABLE_TYPES

        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            began = time.perf_counter()
            started[0] += 1
            call = call_info(context, request, began, proxies)
            bound = bind(call=call)
            task = asyncio.current_task()
            calls.add(task)  # type: ignore[arg-type]
            try:
                if request is UNDECODABLE:
                    raise _refused(invalid_request(method))
                if door.closing:  # the server is stopping: nothing is applied
                    raise _refused(stopping.stopping())
                if door.in_flight >= door.max_in_flight:  # door.enter, inlined: every call
                    raise _refused(overloaded())
                door.in_flight += 1
                try:
                    answer = behavior(request, context)
                    # ``awaitable``, its first test inlined (a coroutine, compiled or not:
                    # every call of ours)
                    if type(answer) in awaitable_types or awaitable(answer):
                        answer = await answer
                finally:
                    door.in_flight -= 1
                answered[0] += 1
                seconds = time.perf_counter() - began
                observe(timing, seconds)
                if seconds >= SLOW_CALL_S or logcontext.debug_lines:  # else no line at all
                    call_line(seconds)
                return answer
            except ServiceError as error:
                _ended(meter, error.code.name, began)
                door.refused_call(context, error)
                calls.discard(task)  # before its status: never counted once grpc's core ended it
                await end_call(context, error)
            except asyncio.CancelledError:
                own = task.cancelling() if task is not None else 1
                if not self.cutting and own:  # the client's cancellation
                    _ended(meter, "CANCELLED", began)
                    raise
                if not own:  # something it awaited was cancelled, not the call: a bug, logged
                    log.warning("call_interrupted", method=method)
                cut = stopping.cut(method)  # the server's stop: a precise status
                _ended(meter, cut.code.name, began)
                calls.discard(task)
                await end_call(context, cut)
            except grpc.aio.AbortError:  # its status is set: grpc sends it
                _ended(meter, _code_of(context), began)
                raise
            except Exception:
                _ended(meter, "INTERNAL", began)
                calls.discard(task)
                await _fault(context, method)
            except BaseException:
                _ended(meter, _code_of(context), began)
                raise
            finally:
                calls.discard(task)
                call.end()
                reset(bound)

        return guarded

    def _stream(self, method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
        """A server stream, counted and timed as grpc-prometheus does (``grpc_type=
        "server_stream"``: started, each message sent, handled with its code — ``CANCELLED``
        when its reader left — and the whole stream's duration; no log line: a stream lasts as
        long as its reader wants). The guard writes the messages of a behavior that returns
        them (``context.write``, as grpc would): one async generator fewer for each message to
        pass.

        Its headers go out first, before any message: grpc sends them with the first message
        otherwise, and an abort from another task while that first write is pending (the
        slow-stream watchdog: ``servicer.stream_ender``) would queue the headers a second
        time, which grpc refuses (``TOO_MANY_OPERATIONS``): the status would never be sent,
        and a client reading the cut stream would wait for its end forever."""
        meter = self.door.meter(method, Transport.GRPC, streams=True)
        started = meter.started
        sent = meter.sent

        def ended(code: str, began: float) -> None:
            meter.ended(code, time.perf_counter() - began)

        writes_itself = inspect.iscoroutinefunction(behavior)

        async def write(request: Any, context: grpc.aio.ServicerContext) -> None:
            began = time.perf_counter()
            started[0] += 1
            self.streaming += 1
            counted = True
            try:
                if request is UNDECODABLE:
                    raise _refused(invalid_request(method))
                await context.send_initial_metadata(())
                if writes_itself:
                    await behavior(request, context)
                else:
                    async with contextlib.aclosing(behavior(request, context)) as responses:
                        async for response in responses:
                            await context.write(response)
                            sent[0] += 1
            except ServiceError as error:
                ended(error.code.name, began)
                self.door.refused_call(context, error)
                self.streaming -= 1  # before its status (as a unary call's)
                counted = False
                await end_call(context, error)
            except asyncio.CancelledError:
                ended("CANCELLED", began)
                raise
            except grpc.aio.AbortError:  # its status is set: grpc sends it
                ended(_code_of(context), began)
                raise
            except Exception:
                ended("INTERNAL", began)
                self.streaming -= 1
                counted = False
                await _fault(context, method)
            except BaseException:
                ended(_code_of(context), began)
                raise
            finally:
                if counted:
                    self.streaming -= 1
            ended("OK", began)

        return write


async def _fault(context: grpc.aio.ServicerContext, method: str) -> NoReturn:
    """End a call whose behavior raised something not a refusal (a bug): logged whole, the
    caller answered ``INTERNAL`` / ``INTERNAL`` (``errors.fault``), as the WebSocket door
    answers (grpc answered UNKNOWN with the exception's text)."""
    log.exception("call_failed", method=method)
    await end_call(context, fault())


def _code_of(context: grpc.aio.ServicerContext) -> str:
    """The status a call that raised ends with (its abort's, else UNKNOWN as grpc answers)."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if code is None else str(code)


def _ended(meter: Meter, code: str, began: float) -> None:
    """A unary call that did not answer: counted with its code, timed and logged."""
    seconds = time.perf_counter() - began
    meter.ended(code, seconds)
    call_line(seconds, code)


def _checked_requests(method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    """A client-streaming behavior: every request of the stream is checked as it is read."""

    def checked(requests: AsyncIterator[Any],
                context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def read() -> AsyncIterator[Any]:
            async for request in requests:
                if request is UNDECODABLE:
                    await end_call(context, _refused(invalid_request(method)))
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
        looked_up(handler_call_details.invocation_metadata)  # the call's headers, decoded once
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
