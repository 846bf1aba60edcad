"""Ending a stream from outside (the slow-stream watchdog): a status that cannot be sent is one
short log line, and none when the call had ended already (its client went away)."""

from __future__ import annotations

import asyncio

import grpc
from structlog.testing import capture_logs

from tapis_service.grpc.servicer import stream_ender
from tapis_service.observe.errors import ServiceError

TOO_SLOW = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW", "too slow")


class Bulky:
    def __repr__(self) -> str:
        return "<object " + "x" * 5000 + ">"


class Context:
    """A servicer context whose abort fails (as grpc's does on a call it cannot end)."""

    def __init__(self, done: bool) -> None:
        self._done = done

    async def abort_with_status(self, status: object) -> None:
        raise RuntimeError("cannot end", Bulky())

    def done(self) -> bool:
        return self._done


async def ended(done: bool) -> list[dict[str, object]]:
    with capture_logs() as logs:
        stream_ender(Context(done))(TOO_SLOW)  # type: ignore[arg-type]
        for _ in range(3):
            await asyncio.sleep(0)
    return [entry for entry in logs if entry["event"] == "stream_end_failed"]


async def test_a_status_that_cannot_be_sent_is_one_short_line() -> None:
    (line,) = await ended(done=False)
    assert line["reason"] == "STREAM_TOO_SLOW" and line["error"] == "RuntimeError"
    assert len(repr(line)) < 400


async def test_a_call_that_ended_already_logs_nothing() -> None:
    assert await ended(done=True) == []
