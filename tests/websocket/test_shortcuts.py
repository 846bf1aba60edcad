"""The WebSocket's shortcuts give what its plain path gives (docs/websocket.md, "The request
path"): a table's request served in its frame's callback (no task when it never waits), a
stream's change written at commit while the stream is idle (no queue, no step of its task),
what a request writes to its own socket sent in one write, that write framed as picows frames
each message, and a request cut before its task's first step ending as a task's would."""

from __future__ import annotations

import asyncio
import contextvars
import random
import types
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from picows import WSListener, WSMsgType, WSTransport, ws_create_server

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.door.caller import Caller
from tapis_service.door.door import Door
from tapis_service.door.rpcs import Route
from tapis_service.observe import metrics
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables import shielding
from tapis_service.ws import frames, stepping
from tapis_service.ws.connection import Connection, _Resumed, socket_calls
from tapis_service.ws.frames import Format
from tapis_service.ws.sink import TransportSink, ws_frame
from tests.support.calls import person_seats
from tests.support.games import proto_kind, short_options
from tests.support.server import Harness, ServerFactory

ACTIONS = 40
PAUSED = range(10, 14)
"""The actions during which the second seat's socket takes no more (its streams queue)."""


@dataclass
class Sink:
    """A socket's writes, each with the messages it carried."""

    writes: list[list[bytes | str]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    broken_stream: int = 0
    """The id of a stream whose events frames fail to be written (0: none)."""

    def send(self, message: bytes | str) -> None:
        if self.broken_stream and isinstance(message, bytes):
            frame = ws_pb.ServerFrame.FromString(message)
            if frame.id == self.broken_stream and frame.HasField("events"):
                raise OSError("the socket failed")
        self.writes.append([message])
        self.arrived.set()

    def send_all(self, messages: list[bytes | str]) -> None:
        self.writes.append(list(messages))
        self.arrived.set()

    def close(self, code: int, reason: str) -> None:
        raise AssertionError(f"closed: {code} {reason}")

    def messages(self) -> list[tuple[ws_pb.ServerFrame, bytes]]:
        return [(ws_pb.ServerFrame.FromString(m), m) for write in self.writes for m in write
                if isinstance(m, bytes)]


class Player:
    """One socket to the GameApi, through a ``Connection`` (plain or with its shortcuts)."""

    def __init__(self, api: Any, door: Door, peer: str, plain: bool) -> None:
        self.sink = Sink()
        self.connection = Connection(api, peer, self.sink, door=door, plain=plain)
        self.next_id = 0

    def send(self, token: str = "", **request: Any) -> int:
        self.next_id += 1
        self.connection.received(ws_pb.ClientFrame(id=self.next_id, seat_token=token,
                                                   **request).SerializeToString(),
                                 Format.BINARY)
        return self.next_id

    async def until(self, found: Any) -> Any:
        while (result := found()) is None:
            self.sink.arrived.clear()
            await asyncio.wait_for(self.sink.arrived.wait(), 10)
        return result

    async def call(self, token: str = "", **request: Any) -> ws_pb.ServerFrame:
        frame_id = self.send(token, **request)
        return await self.until(lambda: next(
            (f for f, _ in self.sink.messages() if f.id == frame_id), None))

    def stream(self, stream_id: int) -> list[bytes]:
        """The events frames of one stream, as sent."""
        return [raw for f, raw in self.sink.messages() if f.id == stream_id]

    def seen(self, stream_id: int) -> int:
        frames_seen = [f for f, _ in self.sink.messages() if f.id == stream_id]
        return frames_seen[-1].events.events[-1].version if frames_seen else 0


async def play(api: Any, door: Door, kind: str) -> dict[str, dict[str, Player]]:
    """A seeded game of ``kind`` for two seats, each seat and a spectator followed by two
    sockets, one with the shortcuts and one without (each socket's stream is its frame 1, so
    the frames of the two are the same bytes); the actions are sent by either socket of the
    seat in turn, and each answer is checked equal to the other socket's retry of it."""
    lobby = Player(api, door, "ipv4:10.0.0.9:4000", plain=True)
    created = await lobby.call(create_game=pb.CreateGameRequest(
        kind=proto_kind(kind), seats=2, seat_configs=person_seats(2), seed=11,
        **short_options(kind)))
    game_id = created.create_game.game.game_id
    tokens = [(await lobby.call(join_game=pb.JoinGameRequest(
        game_id=game_id, seat=seat, display_name=f"p{seat}"))).join_game.seat_token
        for seat in (0, 1)]
    views = {"seat 0": tokens[0], "seat 1": tokens[1], "spectator": ""}
    sockets = {way: {view: Player(api, door, f"ipv4:10.0.{n}.{m}:4000", plain=way == "plain")
                     for m, view in enumerate(views)}
               for n, way in enumerate(("plain", "fast"))}
    for way in sockets.values():
        for view, player in way.items():
            assert player.send(views[view], stream_events=pb.StreamEventsRequest(
                game_id=game_id)) == 1
    followers = [player for way in sockets.values() for player in way.values()]
    rng = random.Random(5)
    answered = held = 0
    for number in range(ACTIONS):
        for way in sockets.values():
            if number == PAUSED.start:
                way["seat 1"].connection.pause_writing()
                held = way["seat 1"].seen(1)
            if number in PAUSED:  # nothing written to a socket that takes no more
                assert way["seat 1"].seen(1) == held
            if number == PAUSED.stop:
                way["seat 1"].connection.resume_writing()
        view = (await lobby.call(get_game=pb.GetGameRequest(game_id=game_id))).get_game.game
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            break
        seat = view.awaiting_seats[0]
        name = f"seat {seat}"
        ways = ("fast", "plain") if number % 2 == 0 else ("plain", "fast")
        acting, retrying = (sockets[way][name] for way in ways)
        mine = (await acting.call(tokens[seat], get_game=pb.GetGameRequest(
            game_id=game_id))).get_game.game
        request = pb.SubmitActionRequest(game_id=game_id, request_id=f"a{number}",
                                         action=rng.choice(list(mine.legal_actions)),
                                         expected_version=mine.version)
        answer = await acting.call(tokens[seat], submit_action=request)
        assert answer.HasField("submit_action"), answer
        retried = await retrying.call(tokens[seat], submit_action=request)
        assert retried.submit_action == answer.submit_action
        answered += 1
        for player in followers:
            if not (number in PAUSED and player in (sockets["fast"]["seat 1"],
                                                    sockets["plain"]["seat 1"])):
                await player.until(lambda p=player, v=mine.version + 1:
                                   True if p.seen(1) >= v else None)
    assert answered > PAUSED.stop
    return sockets


@pytest.fixture(params=["memory", "sqlite"])
async def served(request: pytest.FixtureRequest, make_server: ServerFactory,
                 tmp_path: Path) -> Harness:
    store = SqliteStore(tmp_path, synchronous="OFF") if request.param == "sqlite" else None
    return await make_server(clock=ManualClock(), store=store)


def api_and_door(served: Harness) -> tuple[Any, Door]:
    assert served.running.api is not None and served.running.guard is not None
    return served.running.api, served.running.guard.door


async def test_the_shortcuts_send_the_frames_of_the_plain_path(served: Harness) -> None:
    """Basra hides each seat's hand from the other and from spectators: each stream's frames,
    byte for byte, are the plain path's, through a while when a socket takes no more (its
    changes wait in the queue, then go out in order), on the memory store (nothing waits)
    and on SQLite (each action waits for its journal write, in a task)."""
    api, door = api_and_door(served)
    sockets = await play(api, door, "basra")
    seen = {view: sockets["plain"][view].stream(1) for view in sockets["plain"]}
    for view, player in sockets["fast"].items():
        assert player.stream(1) == seen[view], view
    assert seen["seat 0"] != seen["seat 1"] != seen["spectator"]  # each seat its own view
    assert all(len(write) == 1 for player in sockets["plain"].values()
               for write in player.sink.writes)  # the plain path: a write per frame


async def _war_joined(players: list[Player]) -> tuple[str, list[str]]:
    """A seeded two-seat war the first player creates, each player joined at its own seat:
    the game's id and the seats' tokens."""
    created = await players[0].call(create_game=pb.CreateGameRequest(
        kind=proto_kind("war"), seats=2, seat_configs=person_seats(2), seed=3,
        **short_options("war")))
    game_id = created.create_game.game.game_id
    tokens = [(await p.call(join_game=pb.JoinGameRequest(
        game_id=game_id, seat=i, display_name="x"))).join_game.seat_token
        for i, p in enumerate(players)]
    return game_id, tokens


async def test_an_action_is_one_write_to_each_socket(make_server: ServerFactory) -> None:
    """On the memory store a SubmitAction never waits: its answer and its own socket's events
    frame go out in one write, after the other seat's frame (written at commit)."""
    served = await make_server(clock=ManualClock())
    api, door = api_and_door(served)
    seat = Player(api, door, "ipv4:10.0.0.9:4000", plain=False)
    other = Player(api, door, "ipv4:10.0.0.8:4000", plain=False)
    game_id, tokens = await _war_joined([seat, other])
    for player, token in ((seat, tokens[0]), (other, tokens[1])):
        player.send(token, stream_events=pb.StreamEventsRequest(game_id=game_id))
    await asyncio.sleep(0.01)  # both streams idle, caught up
    view = (await seat.call(tokens[0], get_game=pb.GetGameRequest(
        game_id=game_id))).get_game.game
    actor = (seat, other)[view.awaiting_seats[0]]
    before = (len(actor.sink.writes), len((other if actor is seat else seat).sink.writes))
    actor.send(tokens[view.awaiting_seats[0]], submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(war={"reveal": {}})))
    after = (len(actor.sink.writes), len((other if actor is seat else seat).sink.writes))
    assert after == (before[0] + 1, before[1] + 1)  # answered at once: no task, no loop step
    events, answer = (ws_pb.ServerFrame.FromString(m) for m in actor.sink.writes[-1])
    assert events.HasField("events") and answer.HasField("submit_action")
    assert events.events.events == answer.submit_action.events


async def _acted_on(api: Any, door: Door, plain: bool) -> tuple[list[Any], list[int]]:
    """A seeded war for two seats, each seat's socket (of the way given) following the game
    and acting in turn: what the sockets got once play began (each frame's field and events,
    in order, socket after socket), and how many frames each of their writes carried."""
    players = [Player(api, door, f"ipv4:10.0.0.{9 - i}:4000", plain=plain) for i in (0, 1)]
    game_id, tokens = await _war_joined(players)
    streams = [player.send(token, stream_events=pb.StreamEventsRequest(game_id=game_id))
               for player, token in zip(players, tokens, strict=True)]
    for player, stream in zip(players, streams, strict=True):
        await player.until(lambda p=player, s=stream: True if any(
            f.id == s for f, _ in p.sink.messages()) else None)
    starts = [len(player.sink.writes) for player in players]
    for _ in range(8):
        view = (await players[0].call(tokens[0], get_game=pb.GetGameRequest(
            game_id=game_id))).get_game.game
        seat = view.awaiting_seats[0]
        acting, stream = players[seat], streams[seat]
        starts[seat] = min(starts[seat], len(acting.sink.writes))
        answer = await acting.call(tokens[seat], submit_action=pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(war={"reveal": {}})))
        assert answer.HasField("submit_action"), answer
        await acting.until(lambda p=acting, s=stream, mine=answer.submit_action.events:
                           True if any(f.events.events == mine for f, _ in p.sink.messages()
                                       if f.id == s) else None)
    got = [(frame.WhichOneof("response"), list(frame.events.events if frame.HasField("events")
                                               else frame.submit_action.events))
           for player, start in zip(players, starts, strict=True)
           for write in player.sink.writes[start:]
           for frame in (ws_pb.ServerFrame.FromString(m) for m in write)
           if frame.WhichOneof("response") != "get_game"]
    return got, [len(write) for player, start in zip(players, starts, strict=True)
                 for write in player.sink.writes[start:]]


async def test_a_durable_action_is_one_write_to_its_socket(served: Harness) -> None:
    """On SQLite an action waits for its journal write; its request is resumed by its input,
    in the input's last step, with its socket corked meanwhile: its answer and its socket's
    events frame (written at commit) go out in one write, in the plain path's order (the
    events, then the answer). On the memory store nothing waits (one write as before; there
    the shortcut writes the events first, the plain path's request task answers first)."""
    api, door = api_and_door(served)
    plain, plain_writes = await _acted_on(api, door, plain=True)
    fast, fast_writes = await _acted_on(api, door, plain=False)
    if served.running.host.keeps_journal:
        assert fast == plain
    else:
        assert sorted(map(repr, fast)) == sorted(map(repr, plain))
    answers = [name for name, _ in fast].count("submit_action")
    assert answers == 8
    assert set(plain_writes) == {1}  # a write per frame
    assert fast_writes.count(2) == answers  # each answer with its events frame


@pytest.mark.parametrize("message", [b"", b"x" * 125, b"x" * 126, b"y" * 65535, b"z" * 65536,
                                     "text \u00e9", "t" * 300])
async def test_one_write_of_several_frames_is_what_picows_sends(message: bytes | str) -> None:
    """``ws_frame`` frames a message as picows's own ``send`` does: the bytes a client reads
    are the same, at every length boundary of the header."""

    class Server(WSListener):  # type: ignore[misc]
        def on_ws_connected(self, transport: WSTransport) -> None:
            kind = WSMsgType.TEXT if isinstance(message, str) else WSMsgType.BINARY
            transport.send(kind, message.encode() if isinstance(message, str) else message)
            TransportSink(transport).send_all([message, message])

    server = await ws_create_server(lambda _: Server(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    await reader.readuntil(b"\r\n\r\n")
    one = len(ws_frame(message))
    received = await asyncio.wait_for(reader.readexactly(3 * one), 10)
    assert received[:one] == ws_frame(message)  # picows's send: the first frame
    assert received == ws_frame(message) * 3
    writer.close()
    server.close()


@dataclass
class Held:
    """A GameApi whose GetGame waits on a future: a request that does not finish at once."""

    waiting: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    ended: list[str] = field(default_factory=list)

    async def get_game(self, request: pb.GetGameRequest, caller: Caller) -> pb.GetGameResponse:
        try:
            await self.waiting
            return pb.GetGameResponse()
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            raise


@pytest.mark.parametrize("plain", [True, False])
async def test_a_request_cut_before_its_task_runs_ends_as_a_tasks(plain: bool) -> None:
    """The socket goes away in the same loop step as the request that is waiting: the
    request's wait is cancelled and its coroutine ends (the server's count of calls in flight
    given back, the call counted CANCELLED), the plain path's way."""
    api, door = Held(), Door(max_in_flight=10)
    routes = {rpc.name: Route(rpc, api.get_game) for rpc in frames.CARRIED}
    connection = Connection(api, "ipv4:10.0.0.1:1", Sink(), door=door,  # type: ignore[arg-type]
                            calls=socket_calls(routes, door), plain=plain)
    labels = ("unary", "tapis.v1.GameService", "GetGame", "CANCELLED", "websocket")
    before = metrics.RPC_HANDLED.value(*labels)
    connection.received(ws_pb.ClientFrame(id=1, get_game=pb.GetGameRequest(
        game_id="t")).SerializeToString(), Format.BINARY)
    assert door.in_flight == (0 if plain else 1)  # served at once up to its wait
    connection.disconnected()
    for _ in range(5):
        await asyncio.sleep(0)
    assert door.in_flight == 0  # given back (the plain path never took it)
    assert api.ended == ([] if plain else ["cancelled"])  # plain: cancelled before it began
    assert api.waiting.cancelled() or plain
    assert metrics.RPC_HANDLED.value(*labels) == before + (0 if plain else 1)


async def test_a_failed_write_at_commit_ends_that_stream_only(
        make_server: ServerFactory) -> None:
    """A stream whose write fails at commit ends with the refusal its task would send; the
    action is answered and the other seat's stream gets the change."""
    served = await make_server(clock=ManualClock())
    api, door = api_and_door(served)
    players = [Player(api, door, f"ipv4:10.0.1.{i}:4000", plain=False) for i in (1, 2)]
    game_id, tokens = await _war_joined(players)
    streams = [p.send(tokens[i], stream_events=pb.StreamEventsRequest(game_id=game_id))
               for i, p in enumerate(players)]
    await asyncio.sleep(0.01)
    players[1].sink.broken_stream = streams[1]
    view = (await players[0].call(tokens[0], get_game=pb.GetGameRequest(
        game_id=game_id))).get_game.game
    seat = view.awaiting_seats[0]
    answer = await players[seat].call(tokens[seat], submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(war={"reveal": {}})))
    assert answer.HasField("submit_action")
    assert players[0].seen(streams[0]) == answer.submit_action.version
    last = [f for f, _ in players[1].sink.messages() if f.id == streams[1]][-1]
    assert last.HasField("refusal") and last.refusal.code == 13  # INTERNAL, as its task's
    assert streams[1] not in players[1].connection.streams


async def _resumed_or_task(resumed: bool, how: str) -> list[str]:
    """A request's coroutine run up to its first wait (``_serve_now``'s), then resumed by a
    task or by ``_Resumed``; what it saw, when ``how`` disturbs it: its future answered, the
    socket gone while it waits, its future answered and the socket gone in the same loop step,
    a bare yield, a bare yield then the socket gone."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    seen: list[str] = []

    async def serving() -> None:
        try:
            if how.startswith("bare"):
                await asyncio.sleep(0)
                seen.append("resumed")
            else:
                seen.append(await future)
            await asyncio.sleep(0)  # a later wait: the same either way
            seen.append("ended")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    request = _started(serving(), resumed)
    if how in ("answered", "answered then gone"):
        future.set_result("answered")
    if how in ("gone", "answered then gone", "bare then gone"):
        request.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    return seen


def _started(coroutine: Coroutine[Any, Any, None], resumed: bool) -> Any:
    """``coroutine`` run up to its first wait in a context of its own (``_serve_now``'s), then
    left to ``_Resumed`` or, the way before, to a task handed what it waits on first."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    waiting = context.run(coroutine.send, None)
    if resumed:
        return _Resumed(loop, coroutine, waiting, context)
    return loop.create_task(_AsTask(coroutine, waiting), context=context)


class _AsTask(Coroutine[Any, Any, None]):
    """A started coroutine for a task: its first step hands the task ``waiting``."""

    def __init__(self, coroutine: Any, waiting: Any) -> None:
        self.coroutine, self.waiting, self.first = coroutine, waiting, True

    def send(self, value: Any) -> Any:
        if self.first:
            self.first = False
            return self.waiting
        return self.coroutine.send(value)

    def throw(self, error: Any, *_: Any) -> Any:
        if self.first:
            self.first = False
            if isinstance(self.waiting, asyncio.Future) and self.waiting.cancel():
                return self.coroutine.send(None)
        return self.coroutine.throw(error)

    def close(self) -> None:
        self.coroutine.close()

    def __await__(self) -> Any:
        raise TypeError("run by a task")


@pytest.mark.parametrize("how", ["answered", "gone", "answered then gone", "bare",
                                 "bare then gone"])
async def test_a_request_resumed_without_a_task_sees_what_a_task_would(how: str) -> None:
    """``_Resumed`` resumes a waiting request as a task did: its answer, its cancellation
    (while it waits, or once its answer is in but before it ran), a bare yield."""
    ours = await _resumed_or_task(True, how)
    assert ours == await _resumed_or_task(False, how)
    assert ours[-1] == ("cancelled" if how.endswith("gone") else "ended")


async def _followed_or_task(resumed: bool, how: str) -> tuple[list[str], list[str]]:
    """A request awaiting a shielded input (a table actor's on a store that keeps a journal:
    it waits on its journal write, ``gate``, then commits), resumed by the input itself
    (``_Resumed`` following it) or by a task; what the request saw and what the input did,
    when ``how`` disturbs it: the input committed, the socket gone while it waits, both in
    one step of the loop."""
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    seen: list[str] = []
    done: list[str] = []
    shield = shielding.Shield(keeps_journal=True)

    async def act() -> str:
        await gate
        done.append("committed")  # never cancelled by its caller
        return "answered"

    async def serving() -> None:
        try:
            seen.append(await shield.run(act()))
            await asyncio.sleep(0)
            seen.append("ended")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    request = _started(serving(), resumed)
    assert not resumed or request.following
    if how.startswith("answered"):
        gate.set_result(None)
    if how.endswith("gone"):
        request.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    if not how.startswith("answered"):
        assert done == []
        gate.set_result(None)
        await asyncio.sleep(0)
    return seen, done


@pytest.mark.parametrize("how", ["answered", "gone", "answered then gone"])
async def test_a_request_its_input_resumes_sees_what_a_task_would(how: str) -> None:
    """``_Resumed`` resumed by the shielded input it awaits (``shielding.follow``), not by its
    waiter's callback: its answer, its cancellation (the input committing anyway), as a
    task's."""
    ours = await _followed_or_task(True, how)
    assert ours == await _followed_or_task(False, how)
    seen, done = ours
    assert seen[-1] == ("cancelled" if how.endswith("gone") else "ended")
    assert done == ["committed"]


async def test_a_stop_waits_for_a_request_resumed_without_a_task() -> None:
    """What a stop waits for (``Connection.running``) covers a request that waits: done once
    it is answered, not before."""
    api, door = Held(), Door(max_in_flight=10)
    routes = {rpc.name: Route(rpc, api.get_game) for rpc in frames.CARRIED}
    sink = Sink()
    connection = Connection(api, "ipv4:10.0.0.1:1", sink, door=door,  # type: ignore[arg-type]
                            calls=socket_calls(routes, door))
    connection.received(ws_pb.ClientFrame(id=1, get_game=pb.GetGameRequest(
        game_id="t")).SerializeToString(), Format.BINARY)
    running = connection.running()
    assert len(running) == 1
    await asyncio.sleep(0)
    assert not running[0].done()
    api.waiting.set_result(None)
    await asyncio.wait(running, timeout=5)
    assert running[0].done() and not connection.in_flight
    assert sink.writes  # answered


def _steps(body: Any, by: Any) -> list[Any]:
    """Every step of ``body`` taken by ``by`` until it ends (``stepping.ENDED``)."""
    taken = []
    while True:
        waiting = by(body)
        taken.append(waiting)
        if waiting is stepping.ENDED:
            return taken


def _sent(body: Any) -> Any:
    """The plain step: ``send``, its end a ``StopIteration``."""
    try:
        return body.send(None)
    except StopIteration:
        return stepping.ENDED


def test_a_step_is_a_send_for_a_compiled_coroutine_and_a_python_one() -> None:
    """``stepping.step`` takes an iterator (what mypyc's coroutines are) by ``next`` and a
    Python coroutine by ``send``: the same steps as ``send`` either way, and a failure
    raised as ``send`` raises it."""
    def iterated(fail: bool) -> Any:  # an iterator with send, as a compiled coroutine is
        yield "first"
        yield None
        if fail:
            raise ValueError("refused")
        return "dropped"

    @types.coroutine
    def waits(value: Any) -> Any:
        yield value

    async def python(fail: bool) -> str:
        await waits("first")
        await waits(None)
        if fail:
            raise ValueError("refused")
        return "dropped"

    for make in (iterated, python):
        assert _steps(make(False), stepping.step) == _steps(make(False), _sent) == [
            "first", None, stepping.ENDED]
        for by in (stepping.step, _sent):
            failing = make(True)
            assert by(failing) == "first" and by(failing) is None
            with pytest.raises(ValueError, match="refused"):
                by(failing)
