"""The node-to-node tunnel (``tapis_service.cluster.tunnel``): its frames, its two ends over a
real grpc.aio server in this process, and relayed calls between real nodes through it (and,
for comparison, with ``--relay call``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.cluster import tunnel
from tapis_service.errors import ServiceError, to_status
from tapis_service.wire import varint
from tests.cluster.harness import Node
from tests.cluster.play import Stats, new_table
from tests.support.calls import auth, reason_of

KEY = "relay-key"
FORWARDED = "tapis-forwarded"

header_keys = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
text_headers = st.tuples(header_keys.filter(lambda k: not k.endswith("-bin")),
                         st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60))
binary_headers = st.tuples(header_keys.map(lambda k: k + "-bin"), st.binary(max_size=60))


@given(st.integers(0, 2**32 - 1), st.integers(0, len(tunnel.METHODS) - 1),
       st.lists(st.one_of(text_headers, binary_headers), max_size=5), st.binary(max_size=300))
def test_a_request_frame_gives_back_what_was_put_in(call_id: int, method: int,
                                                     headers: list[tuple[str, Any]],
                                                     request: bytes) -> None:
    frame = tunnel.encode_request(call_id, method, headers, request)
    assert tunnel.decode_request(frame) == (call_id, method, tuple(headers), request)


def test_a_refusal_frame_keeps_the_code_the_message_and_the_error_info() -> None:
    status = to_status(ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_SEAT",
                                    "your token is for seat 1, not seat 0"))
    call_id, refusal = tunnel.decode_answer(tunnel.encode_refusal(7, status))
    assert call_id == 7 and isinstance(refusal, tunnel.RelayError)
    assert refusal.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refusal.details() == "your token is for seat 1, not seat 0"
    assert dict(refusal.trailing_metadata()) == {
        "grpc-status-details-bin": dict(status.trailing_metadata)["grpc-status-details-bin"]}
    assert tunnel.decode_answer(tunnel.encode_answer(8, b"\x08\x05")) == (8, b"\x08\x05")


def test_bytes_that_are_not_frames_are_refused() -> None:
    for junk in (b"", b"\x00\x00", b"\x00\x00\x00\x01\x09\x00\x00",  # method 9: unknown
                 b"\x00\x00\x00\x01\x00\x00\x01\x00\x05\x00\x00\x00\x01ab"):  # truncated
        with pytest.raises(ValueError):
            tunnel.decode_request(junk)
    with pytest.raises(ValueError):
        tunnel.frames_of(b"\x00\x00\x00\x09abc")


async def test_a_message_carries_every_frame_queued_and_no_more_than_the_limit() -> None:
    outbox = tunnel.Outbox()
    small = [bytes([n]) * 10 for n in range(3)]
    big = [b"x" * (tunnel.MAX_FRAME // 2), b"y" * (tunnel.MAX_FRAME // 2)]
    for frame in small + big:
        outbox.put(frame)
    outbox.close()
    messages = [message async for message in outbox.messages()]
    assert [tunnel.frames_of(m) for m in messages] == [small + big[:1], big[1:]]
    assert all(len(m) <= tunnel.MAX_FRAME for m in messages)


# --- both ends, in this process ------------------------------------------------------------


Handler = Callable[[bytes, Any], Awaitable[bytes]]


class Owner:
    """A grpc.aio server with the owner's end of the tunnel; each method echoes what it got,
    refuses, or waits for ``release``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.feed: asyncio.Queue[bytes | None] = asyncio.Queue()
        """What the stream method sends: each message, then None to end it."""
        self.streams_closed = 0
        self.seen: list[tuple[tuple[str, Any], ...]] = []
        self.server: grpc.aio.Server | None = None
        self.tunnels: tunnel.TunnelServer | None = None

    async def echo(self, request: bytes, call: Any) -> bytes:
        self.seen.append(call.invocation_metadata())
        return b"echo:" + request

    async def refuse(self, request: bytes, call: Any) -> bytes:
        await call.abort_with_status(to_status(ServiceError(
            grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "this seat token is not valid")))
        raise AssertionError("unreachable")

    async def wait(self, request: bytes, call: Any) -> bytes:
        await self.release.wait()
        return b"released:" + request

    async def stream(self, request: bytes, call: Any) -> AsyncIterator[bytes]:
        try:
            if request == b"refuse":
                await self.refuse(request, call)
            while (message := await self.feed.get()) is not None:
                yield message
        finally:
            self.streams_closed += 1

    async def holding_a_call(self) -> None:
        """Until a call has reached this end (it is being served)."""
        while not self.tunnels or not any(t._calls for t in self.tunnels._open):
            await asyncio.sleep(0)

    async def start(self) -> str:
        self.tunnels = tunnel.TunnelServer(
            {"JoinGame": self.refuse, "GetGame": self.echo, "SubmitAction": self.wait},
            self.stream, KEY, FORWARDED, max_in_flight=100)
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((self.tunnels.handler(),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"


JOIN, GET, SUBMIT = (tunnel.METHODS.index(m) for m in ("JoinGame", "GetGame", "SubmitAction"))


@pytest.fixture
async def owner() -> AsyncIterator[tuple[Owner, grpc.aio.Channel]]:
    end = Owner()
    address = await end.start()
    channel = grpc.aio.insecure_channel(address)
    yield end, channel
    await channel.close()
    assert end.server is not None
    await end.server.stop(None)


async def test_answers_come_back_to_their_own_calls_while_others_wait(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    waiting = asyncio.ensure_future(client.call(SUBMIT, (), b"first"))
    headers = [("authorization", "Bearer abc"), ("tapis-forwarded-for", "ipv4:10.1.2.3:4"),
               ("trace-bin", b"\x00\xff")]
    assert await client.call(GET, headers, b"second") == b"echo:second"
    assert await client.call(GET, (), b"third") == b"echo:third"
    assert not waiting.done()
    end.release.set()
    assert await waiting == b"released:first"
    # the owner sees the client's headers, and the relay key the tunnel was opened with
    assert end.seen[0] == (*headers, (FORWARDED, KEY))
    client.close()


async def test_a_refusal_reaches_the_relaying_node_as_the_owner_gave_it(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    _, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    with pytest.raises(tunnel.RelayError) as refused:
        await client.call(JOIN, (), b"")
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.details() == "this seat token is not valid"
    assert [k for k, _ in refused.value.trailing_metadata()] == ["grpc-status-details-bin"]
    assert not isinstance(refused.value, tunnel.TunnelBroken)
    assert await client.call(GET, (), b"after") == b"echo:after"  # the tunnel stays open
    client.close()


async def test_a_tunnel_without_the_relay_key_is_refused(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, "not-the-key", FORWARDED)
    with pytest.raises(tunnel.TunnelBroken) as broken:
        await client.call(GET, (), b"x")
    assert "PERMISSION_DENIED" in broken.value.details()
    assert end.seen == [] and client.broken
    client.close()


async def test_a_graceful_stop_answers_the_calls_received_then_closes(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    assert await client.call(GET, (), b"open") == b"echo:open"
    waiting = asyncio.ensure_future(client.call(SUBMIT, (), b"in flight"))
    await end.holding_a_call()
    assert end.tunnels is not None
    draining = asyncio.ensure_future(end.tunnels.drain(within_s=30))
    end.release.set()
    await draining
    assert await waiting == b"released:in flight"
    with pytest.raises(tunnel.TunnelBroken):
        await client.call(GET, (), b"too late")
    client.close()


async def test_calls_waiting_when_the_owner_goes_away_fail_as_unreachable(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    assert await client.call(GET, (), b"open") == b"echo:open"
    waiting = asyncio.ensure_future(client.call(SUBMIT, (), b"never answered"))
    await end.holding_a_call()
    assert end.server is not None
    await end.server.stop(None)
    with pytest.raises(tunnel.TunnelBroken) as broken:
        await waiting
    assert broken.value.code() == grpc.StatusCode.UNAVAILABLE
    assert broken.value.trailing_metadata() == ()  # no ErrorInfo: the node retries elsewhere
    client.close()


def never() -> None:
    raise AssertionError("no overflow expected")


async def test_a_relayed_stream_gives_the_owners_messages_then_its_end(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    stream = client.stream((), b"watch", limit=10, on_overflow=never)
    for message in (b"one", b"two", None):
        end.feed.put_nowait(message)
    assert [await stream.read() for _ in range(3)] == [b"one", b"two", grpc.aio.EOF]
    refused = client.stream((), b"refuse", limit=10, on_overflow=never)
    with pytest.raises(tunnel.RelayError) as error:
        await refused.read()
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert [k for k, _ in error.value.trailing_metadata()] == ["grpc-status-details-bin"]
    assert await client.call(GET, (), b"still open") == b"echo:still open"
    client.close()


async def test_a_stream_cancelled_by_its_client_ends_at_the_owner(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    stream = client.stream((), b"watch", limit=10, on_overflow=never)
    end.feed.put_nowait(b"first")
    assert await stream.read() == b"first"
    stream.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stream.read()
    assert await client.call(GET, (), b"sync") == b"echo:sync"  # the cancel went before it
    while end.streams_closed < 1:
        await asyncio.sleep(0)
    client.close()


async def test_a_stream_whose_client_does_not_read_is_ended_at_the_limit(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    overflowed = asyncio.Event()
    stream = client.stream((), b"watch", limit=2, on_overflow=overflowed.set)
    for message in (b"1", b"2", b"3"):
        end.feed.put_nowait(message)
    await overflowed.wait()
    with pytest.raises(asyncio.CancelledError):
        await stream.read()
    while end.streams_closed < 1:  # the owner stopped producing for it
        await asyncio.sleep(0)
    client.close()


async def test_a_relayed_stream_breaks_with_its_tunnel(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, FORWARDED)
    stream = client.stream((), b"watch", limit=10, on_overflow=never)
    end.feed.put_nowait(b"first")
    assert await stream.read() == b"first"
    assert end.server is not None
    await end.server.stop(None)
    with pytest.raises(tunnel.TunnelBroken):
        await stream.read()
    late = client.stream((), b"watch", limit=10, on_overflow=never)
    with pytest.raises(tunnel.TunnelBroken):
        await late.read()
    client.close()


# --- between real nodes -----------------------------------------------------------------------


async def events_until(stub: pb_grpc.GameServiceStub, game_id: str, token: str,
                       version: int) -> list[bytes]:
    """A seat's events from the first, serialized, until one reaches ``version``."""
    call = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(token))
    seen: list[bytes] = []
    async for message in call:
        seen.extend(event.SerializeToString() for event in message.events)
        if message.events[-1].version >= version:
            call.cancel()
            return seen
    raise AssertionError("the stream ended first")


NOTE = (("x-note", "n" * 2000),)
"""A header that the relaying node passes on: with a request near the receive limit, more than
one frame of the tunnel can hold."""


async def first_answer(channel: grpc.aio.Channel, method: str, request: bytes) -> object:
    """The answer (a stream's first message) to raw request bytes, or the refusal's code and
    reason."""
    try:
        if method == "StreamEvents":
            call = channel.unary_stream(f"/tapis.v1.GameService/{method}")(
                request, metadata=NOTE)
            first = await call.read()
            call.cancel()
            return first
        return await channel.unary_unary(f"/tapis.v1.GameService/{method}")(
            request, metadata=NOTE)
    except grpc.aio.AioRpcError as error:
        return error.code(), reason_of(error)


@pytest.mark.parametrize("relay", ["tunnel", "call"])
async def test_calls_relayed_between_nodes_are_answered_as_the_owner_answers(
        relay: str, cluster_url: str, tmp_path: Path) -> None:
    owner, other = Node(cluster_url, tmp_path), Node(cluster_url, tmp_path,
                                                     extra=("--relay", relay))
    try:
        for node in (owner, other):
            await node.start()
        async with grpc.aio.insecure_channel(owner.address) as to_owner, \
                grpc.aio.insecure_channel(other.address) as to_other:
            table = await new_table(pb_grpc.GameServiceStub(to_owner), Stats(), "war", seed=11)
            stub = pb_grpc.GameServiceStub(to_other)
            for number in range(6):
                view = (await stub.GetGame(pb.GetGameRequest(game_id=table.game_id))).game
                seat = view.awaiting_seats[0]
                answer = await stub.SubmitAction(pb.SubmitActionRequest(
                    game_id=table.game_id, request_id=f"a{number}",
                    action=pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal())),
                    expected_version=view.version), metadata=auth(table.tokens[seat]))
                assert answer.version == view.version + 1
                at_owner = await pb_grpc.GameServiceStub(to_owner).GetGame(
                    pb.GetGameRequest(game_id=table.game_id))
                assert at_owner.game.version == answer.version
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetGame(pb.GetGameRequest(game_id=table.game_id),
                                   metadata=auth("not-a-token"))
            assert (refused.value.code(), reason_of(refused.value)) == (
                grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
            # seat 0's stream through the other node: the owner's events, byte for byte
            relayed = await events_until(stub, table.game_id, table.tokens[0], answer.version)
            direct = await events_until(pb_grpc.GameServiceStub(to_owner), table.game_id,
                                        table.tokens[0], answer.version)
            assert relayed == direct and len(relayed) >= 6
            # a request too big for a frame goes as a call of its own, answered the same
            big = pb.GetGameRequest(game_id=table.game_id).SerializeToString() \
                + b"\x7a" + varint(65_000) + b"x" * 65_000  # field 15 (unknown), 65,000 bytes
            for method in ("GetGame", "StreamEvents"):
                answers = [await first_answer(channel, method, big)
                           for channel in (to_other, to_owner)]
                assert answers[0] == answers[1], method
            assert (await stub.GetGame(pb.GetGameRequest(game_id=table.game_id))).game.version \
                == answer.version
        tunneled = other.metric("tapis_cluster_tunneled_total", method="SubmitAction")
        streams = other.metric("tapis_cluster_tunneled_total", method="StreamEvents")
        assert other.metric("tapis_cluster_forwards_total", method="SubmitAction") == 6
        assert tunneled == (6 if relay == "tunnel" else 0)
        assert streams == (1 if relay == "tunnel" else 0)
    finally:
        for node in (owner, other):
            node.stop()


class Cut:
    """The servicer context of a relayed stream, as ``node._cut_slow`` ends it."""

    def __init__(self) -> None:
        self.status: Any = None
        self.ended = asyncio.Event()

    async def abort_with_status(self, status: Any) -> None:
        self.status = status
        self.ended.set()
        raise RuntimeError("aborted")  # as grpc's abort does


@pytest.mark.parametrize(("seen", "resume"), [(True, 42), (False, 7)])
async def test_a_relayed_stream_too_slow_for_its_queue_resumes_after_its_last_message(
        seen: bool, resume: int) -> None:
    from tapis_service.cluster import node

    context = Cut()
    serving = asyncio.ensure_future(asyncio.Event().wait())
    last = pb.StreamEventsResponse(events=[pb.Event(sequence=41), pb.Event(sequence=42)])
    node._cut_slow(context, serving,  # type: ignore[arg-type]
                   pb.StreamEventsRequest(game_id="g", after_sequence=7).SerializeToString(),
                   [last.SerializeToString() if seen else b""])
    await context.ended.wait()
    with pytest.raises(asyncio.CancelledError):
        await serving
    assert context.status.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"after_sequence={resume}" in context.status.details
