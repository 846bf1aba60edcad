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

from tapis_service.door.door import Door
from tapis_service.grpc import callguard
from tapis_service.grpc.callguard import CallGuard
from tapis_service.observe import metrics
from tapis_service.tables.host import _always_owner


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
