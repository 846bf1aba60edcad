"""A shielded input's wait (``shielding.shielded``) ends as ``asyncio.shield`` over a task with
``retrieve`` ends it, in one callback instead of three: the caller's cancellation ends the wait,
never the input; the outcome reaches a caller still waiting; an unexpected failure is logged
whether anyone waits or not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import structlog

from tapis_service.observe.errors import ServiceError
from tapis_service.tables.shielding import retrieve, shielded

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
