"""The table screen (TableApp) under Textual's pilot, against a scripted server: a connection
whose stub answers GetGame with a view the test sets and SubmitAction from a script, and whose
event stream says nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from textual.app import App
from textual.pilot import Pilot

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.connection import Connection

Answer = pb.SubmitActionResponse | grpc.aio.AioRpcError


class Silence:
    """An event stream that never says anything."""

    def __aiter__(self) -> Silence:
        return self

    async def __anext__(self) -> pb.StreamEventsResponse:
        await asyncio.get_running_loop().create_future()
        raise StopAsyncIteration


class ScriptedServer:
    """The stub a screen's connection calls: GetGame answers ``view``; SubmitAction answers
    each request with the next of ``answers`` (an error is raised) and keeps the requests."""

    def __init__(self, view: pb.GameView, answers: list[Answer] | None = None) -> None:
        self.view = view
        self.answers = answers or []
        self.sent: list[pb.SubmitActionRequest] = []

    async def GetGame(self, request: pb.GetGameRequest, **_: Any) -> pb.GetGameResponse:
        return pb.GetGameResponse(game=self.view)

    async def SubmitAction(self, request: pb.SubmitActionRequest,
                           **_: Any) -> pb.SubmitActionResponse:
        self.sent.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, grpc.aio.AioRpcError):
            raise answer
        return answer

    def StreamEvents(self, request: pb.StreamEventsRequest, **_: Any) -> Silence:
        return Silence()


@contextlib.asynccontextmanager
async def scripted(server: ScriptedServer) -> AsyncIterator[Connection]:
    """A real Connection (its retries) whose calls reach ``server``."""
    conn = Connection("127.0.0.1:1")
    conn.stub = server  # type: ignore[assignment]
    try:
        yield conn
    finally:
        await conn.close()


async def until(pilot: Pilot[Any], done: Callable[[], bool]) -> None:
    """Let the app run until ``done()`` (a bounded number of idle turns, no clock)."""
    for _turn in range(200):
        if done():
            return
        await pilot.pause()
    raise AssertionError("the screen never got there")


def screen_rows(app: App[Any]) -> list[str]:
    """The rows of the screen as the terminal would show them (Textual's compositor)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]
