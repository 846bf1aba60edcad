"""A shielded input's wait (``shielding.Shield``) ends as ``asyncio.shield`` over a task with
``retrieve`` ends it, in one callback instead of three: the caller's cancellation ends the wait,
never the input; the outcome reaches a caller still waiting; an unexpected failure is logged
whether anyone waits or not."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import structlog

from tapis_service.observe.errors import ServiceError
from tapis_service.tables import shielding
from tapis_service.tables.shielding import Input, Shield, current_input, retrieve

OUTCOMES = ("value", "refusal", "bug", "cancelled")


@dataclass
class _Host:
    keeps_journal: bool = True


@dataclass
class _Actor:
    host: _Host = field(default_factory=_Host)
    done: list[str] = field(default_factory=list)

    async def input(self, gate: asyncio.Event, outcome: str) -> str:
        await gate.wait()  # the journal write
        self.done.append(outcome)  # what follows the commit: it must run in any case
        if outcome == "refusal":
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE", "refused")
        if outcome == "bug":
            raise KeyError("bug")
        if outcome == "cancelled":
            raise asyncio.CancelledError
        return "applied"


def shielded(method: Callable[..., Coroutine[Any, Any, str]]) -> Callable[..., Awaitable[str]]:
    """The table actor's way: each call's coroutine run by the actor's ``Shield``."""
    def run(actor: Any, *args: Any) -> Awaitable[str]:
        return Shield(actor.host.keeps_journal).run(method(actor, *args))
    return run


def plain(method: Callable[..., Coroutine[Any, Any, str]]) -> Callable[..., Awaitable[str]]:
    """The plain way: ``asyncio.shield`` over a task, ``retrieve`` on it."""
    def run(actor: _Actor, *args: Any) -> Awaitable[str]:
        task = asyncio.ensure_future(method(actor, *args))
        task.add_done_callback(retrieve)
        return asyncio.shield(task)
    return run


async def _one(wrap: Callable[..., Callable[..., Awaitable[str]]], outcome: str,
               caller_leaves: bool) -> tuple[str, list[str], list[str]]:
    """What the caller gets, what the input did, and the error lines logged."""
    actor, gate = _Actor(), asyncio.Event()
    call = wrap(_Actor.input)
    loop = asyncio.get_running_loop()
    crashed: list[str] = []  # a callback that raised (the loop's exception handler)
    loop.set_exception_handler(lambda _, context: crashed.append(context["message"]))
    with structlog.testing.capture_logs() as logs:
        caller = asyncio.ensure_future(_await(call(actor, gate, outcome)))
        await asyncio.sleep(0)
        if caller_leaves:
            caller.cancel()
            await asyncio.sleep(0)
        gate.set()
        for _ in range(5):  # the input's task, its callbacks, the caller's wake-up
            await asyncio.sleep(0)
        got = "cancelled" if caller.cancelled() else caller.result()
    loop.set_exception_handler(None)
    return got, actor.done, [line["event"] for line in logs if line["log_level"] == "error"] \
        + crashed


async def _await(waiting: Awaitable[str]) -> str:
    try:
        return await waiting
    except ServiceError as refusal:
        return f"refused {refusal.reason}"
    except KeyError:
        return "failed"


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("caller_leaves", [False, True])
async def test_a_shielded_input_ends_as_the_plain_shield_ends_it(outcome: str,
                                                                 caller_leaves: bool) -> None:
    ours = await _one(shielded, outcome, caller_leaves)
    assert ours == await _one(plain, outcome, caller_leaves)
    got, done, errors = ours
    assert done == [outcome]  # the input ran to its end, whoever waited
    assert errors == (["table_task_failed"] if outcome == "bug" else [])
    if caller_leaves:
        assert got == "cancelled"


class _Stepped:
    """An input that waits in each way a coroutine can: a future, a bare yield, a future
    awaited once done; what it saw of its context and of the running input, step by step."""

    def __init__(self) -> None:
        self.host = _Host()
        self.seen: list[Any] = []

    async def input(self, gate: asyncio.Future[str], mark: contextvars.ContextVar[str]) -> str:
        self.seen.append(("first", mark.get()))
        mark.set("inside")
        answer = await gate
        self.seen.append(("resumed", mark.get(), shielding._running is not None))
        await asyncio.sleep(0)  # a bare yield
        self.seen.append(("after a bare yield", mark.get()))
        return answer


async def _stepped(wrap: Callable[..., Callable[..., Awaitable[str]]]) -> list[Any]:
    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="caller")
    actor = _Stepped()
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(_await(wrap(_Stepped.input)(actor, gate, mark)))
    for _ in range(3):
        await asyncio.sleep(0)
    gate.set_result("applied")
    got = await waiting
    return [*actor.seen, ("answer", got), ("caller's context", mark.get())]


async def test_an_input_steps_as_a_task_steps_it() -> None:
    """Each wait resumes it, in a context of its own copied from the caller's, as a task of
    its own would run it."""
    ours = await _stepped(shielded)
    seen = [line[:2] if line[0] == "resumed" else line for line in ours]
    assert seen == [line[:2] if line[0] == "resumed" else line
                    for line in await _stepped(plain)]
    assert ("resumed", "inside", True) in ours  # a retry could find it


async def test_an_input_runs_at_once_up_to_its_first_wait() -> None:
    """No step of the loop before it applies: the call has run it up to its journal write."""
    actor, gate = _Actor(), asyncio.Event()
    started: list[str] = []

    async def input(_: _Actor) -> str:
        started.append("applied")
        await gate.wait()
        return "answered"

    waiting = shielded(input)(actor)
    assert started == ["applied"]
    gate.set()
    assert await waiting == "answered"


@pytest.mark.parametrize("outcome", OUTCOMES)
async def test_a_retry_awaiting_the_input_gets_its_outcome(outcome: str) -> None:
    """A retry of the same request awaits the input itself (``session.pending``): the same
    outcome as its first caller, while it runs or after it ended, whatever the first caller
    did."""
    actor, gate = _Actor(), asyncio.Event()
    found: list[Input[str]] = []

    async def input(actor: _Actor) -> str:
        found.append(current_input())
        return await _Actor.input(actor, gate, outcome)

    first = asyncio.ensure_future(_await(shielded(input)(actor)))
    await asyncio.sleep(0)
    first.cancel()  # the first caller goes away: nothing of the input's fate changes
    during = asyncio.ensure_future(_await(found[0]))
    await asyncio.sleep(0)
    gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    after = asyncio.ensure_future(_await(found[0]))
    await asyncio.gather(during, after, return_exceptions=True)
    outcomes = ["cancelled" if task.cancelled() else task.result() for task in (during, after)]
    expected = {"value": "applied", "refusal": "refused STORE_UNAVAILABLE", "bug": "failed",
                "cancelled": "cancelled"}[outcome]
    assert outcomes == [expected, expected]
    assert actor.done == [outcome]


async def test_an_input_that_awaits_what_is_not_a_future_is_refused_as_a_task_refuses_it(
        ) -> None:
    class _Odd:
        def __await__(self) -> Any:
            yield "not a future"

    async def input(_: _Actor) -> str:
        try:
            await _Odd()
        except RuntimeError:
            return "refused"
        return "went on"

    assert await shielded(input)(_Actor()) == await plain(input)(_Actor()) == "refused"


def test_a_shield_runs_its_inputs_on_each_loop_in_turn() -> None:
    """The loop a shield looked up is looked up again once it no longer runs (a server
    started again in the same process, a test's loop after another's)."""
    shield = Shield(keeps_journal=True)

    async def input() -> str:
        await asyncio.sleep(0)
        return "answered"

    async def call() -> str:
        return await shield.run(input())

    assert [asyncio.run(call()) for _ in range(2)] == ["answered", "answered"]
