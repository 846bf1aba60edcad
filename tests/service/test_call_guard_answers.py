"""The call guard answers whatever a unary behavior returns as grpc would: awaited when it is
awaitable (a coroutine, the common case it tests first, or any other awaitable), as it is
otherwise; and every answered call is counted OK once. Its test, ``callguard.awaitable``, is
``inspect.isawaitable`` whatever it has remembered."""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import grpc
import pytest
import structlog.testing

from tapis_service.door.door import Door
from tapis_service.grpc import callguard
from tapis_service.grpc.callguard import CallGuard
from tapis_service.observe import metrics
from tapis_service.observe.errors import FAULT
from tapis_service.tables.host import _always_owner
from tapis_service.ws import frames
from tests.support.calls import reason_of


class _Awaitable:
    """An awaitable that is neither a coroutine nor a future."""

    def __await__(self) -> Generator[Any, None, str]:
        yield from asyncio.sleep(0).__await__()
        return "custom"


async def _coroutine() -> str:
    return "coroutine"


def _future() -> Awaitable[str]:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.set_result("future")
    return future


BEHAVIORS: dict[str, Callable[[], Any]] = {
    "coroutine": _coroutine,
    "future": _future,
    "custom": _Awaitable,
    "plain": lambda: "plain",
}


@pytest.mark.parametrize("kind", sorted(BEHAVIORS))
async def test_a_unary_behavior_s_answer_is_awaited_exactly_when_it_is_awaitable(
        kind: str) -> None:
    method = f"/tapis.test.Guard/{kind}"
    returned: list[Any] = []

    def behavior(request: Any, context: Any) -> Any:
        returned.append(BEHAVIORS[kind]())
        return returned[-1]

    handler = grpc.unary_unary_rpc_method_handler(behavior)
    guarded = CallGuard(Door(max_in_flight=4)).wrap(method, handler).unary_unary
    answered = metrics.RPC_HANDLED.cell("unary", "tapis.test.Guard", kind, "OK", "grpc")
    before = answered[0]
    answer = await guarded(b"", object())
    assert answer == kind
    assert inspect.isawaitable(returned[0]) == (kind != "plain")
    assert answered[0] == before + 1


def _generator() -> Generator[None, None, None]:
    yield


@types.coroutine
def _generator_coroutine() -> Generator[None, None, str]:
    yield
    return "generator-based"


async def test_the_guard_s_awaitable_test_is_inspect_s_before_and_after_it_remembers() -> None:
    """Each value asked twice (the second time its type may be remembered), a generator after
    a generator-based coroutine and the other way round (the one type whose values differ)."""
    values: list[Callable[[], Any]] = [
        _coroutine, lambda: _always_owner("g", 0),  # a compiled coroutine (mypyc)
        _future, _Awaitable, _generator, _generator_coroutine, _generator,
        lambda: "plain", lambda: 7, lambda: None, object]
    for make in values + values[::-1]:
        for _ in range(2):
            value = make()
            assert callguard.awaitable(value) == inspect.isawaitable(value), value
            if inspect.iscoroutine(value):
                value.close()
    assert types.GeneratorType not in callguard.AWAITABLE_TYPES
    compiled = _always_owner("g", 0)
    assert type(compiled) in callguard.AWAITABLE_TYPES  # remembered: the next one is one look-up
    assert inspect.isawaitable(compiled)
    if inspect.iscoroutine(compiled):  # TAPIS_PURE: a plain coroutine
        compiled.close()


SECRET = "seat 1 holds the ace of spades"


async def test_a_fault_is_answered_internal_with_its_reason_and_never_its_text() -> None:
    """A behavior that raises something not a refusal (a bug): the guard logs it and answers
    ``INTERNAL`` / ``INTERNAL`` with a fixed message, a unary call and a stream alike, as the
    WebSocket door does (``frames.internal``); grpc itself answered UNKNOWN with the
    exception's text, which may name anything, cards included."""

    def unary(request: bytes, context: Any) -> Any:
        raise KeyError(SECRET)

    async def stream(request: bytes, context: Any) -> Any:
        yield b"first"
        raise KeyError(SECRET)

    handlers = {"Unary": grpc.unary_unary_rpc_method_handler(unary),
                "Stream": grpc.unary_stream_rpc_method_handler(stream)}
    server = grpc.aio.server()
    guard = CallGuard(Door(max_in_flight=4))
    guard.registering(server).add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("tapis.test.Faulty", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with structlog.testing.capture_logs() as logs:
                with pytest.raises(grpc.aio.AioRpcError) as unary_fault:
                    await channel.unary_unary("/tapis.test.Faulty/Unary")(b"")
                call = channel.unary_stream("/tapis.test.Faulty/Stream")(b"")
                assert await call.read() == b"first"
                with pytest.raises(grpc.aio.AioRpcError) as stream_fault:
                    await call.read()
            for fault in (unary_fault.value, stream_fault.value):
                assert fault.code() == grpc.StatusCode.INTERNAL
                assert reason_of(fault) == "INTERNAL"
                assert fault.details() == FAULT and SECRET not in str(fault.debug_error_string())
            assert [line["method"] for line in logs if line["event"] == "call_failed"] == [
                "/tapis.test.Faulty/Unary", "/tapis.test.Faulty/Stream"]
    finally:
        await server.stop(0)
    frame = frames.internal(7)
    assert (frame.id, frame.refusal.code, frame.refusal.message) == (
        7, grpc.StatusCode.INTERNAL.value[0], FAULT)
