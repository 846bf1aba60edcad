"""The node-to-node tunnel (``tapis_service.cluster.tunnel``): its frames (``cluster.frames``),
its two ends over a real grpc.aio server in this process, and relayed calls between real nodes
through it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.cluster import frames, relay, tunnel
from tapis_service.codec.wire import varint
from tapis_service.door.caller import Caller
from tapis_service.door.rpcs import BY_NAME, RPCS, Access, Routing, Rpc
from tapis_service.observe.errors import ServiceError
from tests.cluster.harness import Node
from tests.cluster.play import Stats, new_table
from tests.support.calls import auth, events_until, reason_of

KEY = "relay-key"

header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)
callers = st.builds(Caller, seat_token=st.none() | header_text, bad_authorization=st.booleans(),
                    api_key=st.none() | header_text, peer=header_text, forwarded=st.just(True),
                    deadline=st.none(), traceparent=st.none())


@given(st.integers(0, 2**32 - 1), st.sampled_from([rpc.code for rpc in RPCS]), callers,
       st.binary(max_size=300))
def test_a_request_frame_gives_back_what_was_put_in(call_id: int, method: int, caller: Caller,
                                                     request: bytes) -> None:
    frame = frames.encode_request(call_id, method, caller, request)
    assert frames.decode_request(frame) == (call_id, method, caller, request)


def test_a_request_frame_carries_the_time_left_not_the_deadline() -> None:
    caller = Caller(seat_token="t", peer="ipv4:10.0.0.1:5", deadline=time.monotonic() + 2.0)
    _, _, relayed, _ = frames.decode_request(frames.encode_request(1, 0, caller, b""))
    assert relayed.forwarded and relayed.seat_token == "t" and relayed.deadline is not None
    assert 1.5 < relayed.deadline - time.monotonic() <= 2.0
    far = Caller(seat_token="x" * (frames.MAX_CREDENTIAL + 1))  # no token is that long
    _, _, relayed, _ = frames.decode_request(frames.encode_request(1, 0, far, b""))
    assert relayed.seat_token is None and relayed.bad_authorization


def test_a_refusal_frame_keeps_the_code_the_reason_the_message_and_the_metadata() -> None:
    error = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW",
                         "resume with after_sequence=4", {"resume_after_sequence": "4"})
    call_id, refusal = frames.decode_answer(frames.encode_refusal(7, error))
    assert call_id == 7 and isinstance(refusal, ServiceError)
    assert (refusal.code, refusal.reason, refusal.message, refusal.metadata) == (
        error.code, error.reason, error.message, error.metadata)
    assert refusal.logged  # counted where it was decided, not again where it is relayed
    assert frames.decode_answer(frames.encode_answer(8, b"\x08\x05")) == (8, b"\x08\x05")


def test_bytes_that_are_not_frames_are_refused() -> None:
    good = frames.encode_request(1, 0, Caller(seat_token="abc", peer="p"), b"")
    for junk in (b"", b"\x00\x00", good[:-2]):  # truncated
        with pytest.raises(ValueError):
            frames.decode_request(junk)
    with pytest.raises(ValueError):
        frames.frames_of(b"\x00\x00\x00\x09abc")


def test_a_method_code_no_row_has_is_decoded_for_the_tunnel_to_refuse() -> None:
    unknown = max(rpc.code for rpc in RPCS) + 1
    frame = frames.encode_request(3, unknown, ANYONE, b"x")
    assert frames.decode_request(frame)[:2] == (3, unknown)


async def test_a_message_carries_every_frame_queued_and_no_more_than_the_limit() -> None:
    outbox = frames.Outbox()
    small = [bytes([n]) * 10 for n in range(3)]
    big = [b"x" * (frames.MAX_FRAME // 2), b"y" * (frames.MAX_FRAME // 2)]
    for frame in small + big:
        outbox.put(frame)
    outbox.close()
    messages = [message async for message in outbox.messages()]
    assert [frames.frames_of(m) for m in messages] == [small + big[:1], big[1:]]
    assert all(len(m) <= frames.MAX_FRAME for m in messages)


# --- both ends, in this process ------------------------------------------------------------


class Owner:
    """A grpc.aio server with the owner's end of the tunnel: JoinGame refuses, GetGame echoes
    what it got, SubmitAction waits for ``release``."""

    def __init__(self, rpcs: tuple[Rpc, ...] = RPCS) -> None:
        self.rpcs = rpcs
        """The methods this owner's version serves."""
        self.served: list[str] = []
        self.release = asyncio.Event()
        self.feed: asyncio.Queue[bytes | None] = asyncio.Queue()
        """What the stream method sends: each message, then None to end it."""
        self.streams_closed = 0
        self.seen: list[Caller] = []
        self.server: grpc.aio.Server | None = None
        self.tunnels: tunnel.TunnelServer | None = None

    async def serve(self, method: str, request: bytes, caller: Caller) -> bytes:
        self.served.append(method)
        if method == "JoinGame":
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                               "this seat token is not valid")
        if method == "SubmitAction":
            await self.release.wait()
            return b"released:" + request
        self.seen.append(caller)
        return b"echo:" + request

    async def stream(self, request: bytes, caller: Caller,
                     end: Callable[[ServiceError], None]) -> AsyncIterator[bytes]:
        try:
            if request == b"refuse":
                await self.serve("JoinGame", request, caller)
            while (message := await self.feed.get()) is not None:
                yield message
        finally:
            self.streams_closed += 1

    async def holding_a_call(self) -> None:
        """Until a call has reached this end (it is being served)."""
        while not self.tunnels or not self.tunnels.calls_in_flight:
            await asyncio.sleep(0)

    async def start(self) -> str:
        self.tunnels = tunnel.TunnelServer(self.serve, self.stream, KEY, max_in_flight=100,
                                           rpcs=self.rpcs)
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((self.tunnels.handler(),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"


JOIN, GET, SUBMIT = (BY_NAME[m].code for m in ("JoinGame", "GetGame", "SubmitAction"))
ANYONE = Caller(peer="ipv4:10.9.9.9:9")


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
    client = tunnel.TunnelClient(channel, KEY)
    waiting = asyncio.ensure_future(client.call(SUBMIT, ANYONE, b"first"))
    caller = Caller(seat_token="abc", api_key="k", peer="ipv4:10.1.2.3:4")
    assert await client.call(GET, caller, b"second") == b"echo:second"
    assert await client.call(GET, ANYONE, b"third") == b"echo:third"
    assert not waiting.done()
    end.release.set()
    assert await waiting == b"released:first"
    # the owner sees the client's own caller, marked as relayed
    assert end.seen[0] == Caller(seat_token="abc", api_key="k", peer="ipv4:10.1.2.3:4",
                                 forwarded=True)
    client.close()


async def test_a_refusal_reaches_the_relaying_node_as_the_owner_gave_it(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    _, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    with pytest.raises(ServiceError) as refused:
        await client.call(JOIN, ANYONE, b"")
    assert (refused.value.code, refused.value.reason, refused.value.message) == (
        grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "this seat token is not valid")
    assert await client.call(GET, ANYONE, b"after") == b"echo:after"  # the tunnel stays open
    client.close()


async def test_a_tunnel_without_the_relay_key_is_refused(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, "not-the-key")
    with pytest.raises(tunnel.OwnerUnreachable) as broken:
        await client.call(GET, ANYONE, b"x")
    assert "PERMISSION_DENIED" in str(broken.value)
    assert end.seen == [] and client.broken
    client.close()


async def test_a_graceful_stop_answers_the_calls_received_then_closes(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    assert await client.call(GET, ANYONE, b"open") == b"echo:open"
    waiting = asyncio.ensure_future(client.call(SUBMIT, ANYONE, b"in flight"))
    await end.holding_a_call()
    assert end.tunnels is not None
    draining = asyncio.ensure_future(end.tunnels.drain(within_s=30))
    end.release.set()
    await draining
    assert await waiting == b"released:in flight"
    with pytest.raises(tunnel.OwnerUnreachable):
        await client.call(GET, ANYONE, b"too late")
    client.close()


async def test_a_tunnel_opened_after_the_drain_is_refused_with_nothing_served(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    """A node that drained its tunnels (stopping) refuses a new one at once, instead of holding
    it, and its stop, to the end of its grace; the calls sent in it were not served."""
    end, channel = owner
    assert end.tunnels is not None
    await end.tunnels.drain(within_s=30)
    client = tunnel.TunnelClient(channel, KEY)
    with pytest.raises(tunnel.OwnerUnreachable) as refused:
        await client.call(SUBMIT, ANYONE, b"after the drain")
    assert not refused.value.sent and end.served == []
    client.close()


async def test_calls_waiting_when_the_owner_goes_away_fail_as_unreachable(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    assert await client.call(GET, ANYONE, b"open") == b"echo:open"
    waiting = asyncio.ensure_future(client.call(SUBMIT, ANYONE, b"never answered"))
    await end.holding_a_call()
    assert end.server is not None
    await end.server.stop(None)
    with pytest.raises(tunnel.OwnerUnreachable):  # the node looks the table up again
        await waiting
    client.close()


def never() -> None:
    raise AssertionError("no overflow expected")


async def test_a_relayed_stream_gives_the_owners_messages_then_its_end(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    stream = client.stream(ANYONE, b"watch", limit=10, on_overflow=never)
    for message in (b"one", b"two", None):
        end.feed.put_nowait(message)
    assert [await stream.read() for _ in range(3)] == [b"one", b"two", None]
    refused = client.stream(ANYONE, b"refuse", limit=10, on_overflow=never)
    with pytest.raises(ServiceError) as error:
        await refused.read()
    assert (error.value.code, error.value.reason) == (grpc.StatusCode.UNAUTHENTICATED,
                                                      "INVALID_TOKEN")
    assert await client.call(GET, ANYONE, b"still open") == b"echo:still open"
    client.close()


async def test_a_stream_stopped_by_its_client_ends_at_the_owner(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    stream = client.stream(ANYONE, b"watch", limit=10, on_overflow=never)
    end.feed.put_nowait(b"first")
    assert await stream.read() == b"first"
    stream.stop()
    assert await stream.read() is None
    assert await client.call(GET, ANYONE, b"sync") == b"echo:sync"  # the cancel went before it
    while end.streams_closed < 1:
        await asyncio.sleep(0)
    client.close()


async def test_a_stream_whose_client_does_not_read_is_ended_at_the_limit(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    overflowed = asyncio.Event()
    stream = client.stream(ANYONE, b"watch", limit=2, on_overflow=overflowed.set)
    for message in (b"1", b"2", b"3"):
        end.feed.put_nowait(message)
    await overflowed.wait()
    assert await stream.read() is None
    while end.streams_closed < 1:  # the owner stopped producing for it
        await asyncio.sleep(0)
    client.close()


async def test_a_relayed_stream_breaks_with_its_tunnel(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY)
    stream = client.stream(ANYONE, b"watch", limit=10, on_overflow=never)
    end.feed.put_nowait(b"first")
    assert await stream.read() == b"first"
    assert end.server is not None
    await end.server.stop(None)
    with pytest.raises(tunnel.OwnerUnreachable):
        await stream.read()
    late = client.stream(ANYONE, b"watch", limit=10, on_overflow=never)
    with pytest.raises(tunnel.OwnerUnreachable):
        await late.read()
    client.close()


# --- a rolling restart: nodes of two versions side by side ------------------------------------

ADDED = Rpc("PeekGame", pb.GetGameRequest, pb.GetGameResponse, "get_game", RPCS[-1].code + 40,
            Routing.TABLE, Access.ANYONE)
"""A method a newer version adds (one more row; every other row, and its code, unchanged)."""
NEWER = (*RPCS, ADDED)


async def test_a_rolling_restart_across_an_added_method_loses_nothing() -> None:
    old, new = Owner(RPCS), Owner(NEWER)
    channels = [grpc.aio.insecure_channel(await end.start()) for end in (old, new)]
    to_old, to_new = (tunnel.TunnelClient(channel, KEY) for channel in channels)
    try:
        # a write in flight at the old node while the new node relays to it
        in_flight = asyncio.ensure_future(to_old.call(SUBMIT, ANYONE, b"write"))
        await old.holding_a_call()
        # every method both know is served either way, by the same fixed code
        for code in (BY_NAME[name].code for name in ("GetGame", "ListGames", "EndTable")):
            assert await to_old.call(code, ANYONE, b"x") == b"echo:x"
            assert await to_new.call(code, ANYONE, b"x") == b"echo:x"
        # the added method, relayed to a node that does not serve it yet: a clear refusal the
        # client retries, answered at once (never dropped, never applied)
        with pytest.raises(ServiceError) as refused:
            await to_old.call(ADDED.code, ANYONE, b"peek")
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.UNAVAILABLE, "NODE_VERSION_MISMATCH")
        assert "PeekGame" not in old.served
        # the tunnel stays open: the write in flight is answered, once
        old.release.set()
        assert await in_flight == b"released:write"
        assert old.served.count("SubmitAction") == 1
        # the old node restarted with the new version: the retry is served
        assert await to_new.call(ADDED.code, ANYONE, b"peek") == b"echo:peek"
        assert new.served.count("PeekGame") == 1
    finally:
        for client in (to_old, to_new):
            client.close()
        for channel in channels:
            await channel.close()
        for end in (old, new):
            assert end.server is not None
            await end.server.stop(None)


async def test_a_tunnel_of_an_unknown_protocol_version_is_refused_clearly(
        owner: tuple[Owner, grpc.aio.Channel]) -> None:
    end, channel = owner
    client = tunnel.TunnelClient(channel, KEY, version=frames.VERSION + 1)
    # The refusal read first: a call written while the owner ends the tunnel can have its
    # status turned into INTERNAL by grpc.aio itself (grpc/grpc#36066: a write that fails
    # after the server's status replaces it), and is then in doubt, never answered OK.
    await asyncio.wait_for(asyncio.shield(client._reader), 30)  # patience, not a condition
    with pytest.raises(ServiceError) as refused:  # not in doubt: nothing was served
        await client.call(SUBMIT, ANYONE, b"write")
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.UNAVAILABLE, "NODE_VERSION_MISMATCH")
    assert end.served == [] and client.broken
    client.close()


# --- between real nodes -----------------------------------------------------------------------


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


async def no_stream_left(stub: pb_grpc.GameServiceStub, game_id: str) -> None:
    """Until the table's view says no seat is connected (its streams' ends reached the owner)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while any(seat.connected for seat in
              (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.seats):
        assert loop.time() < give_up, "a cancelled stream still counts as connected"
        await asyncio.sleep(0.01)  # polling the owner's view for a condition, bounded


async def test_calls_relayed_between_nodes_are_answered_as_the_owner_answers(
        cluster_url: str, tmp_path: Path) -> None:
    owner, other = Node(cluster_url, tmp_path), Node(cluster_url, tmp_path)
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
            # both streams were cancelled: once the owner has seen them end (the relayed
            # one's end crosses the tunnel), seat 0 is not connected in any view
            await no_stream_left(pb_grpc.GameServiceStub(to_owner), table.game_id)
            # a request near the receive limit is answered as the owner answers it
            big = pb.GetGameRequest(game_id=table.game_id).SerializeToString() \
                + b"\x7a" + varint(65_000) + b"x" * 65_000  # field 15 (unknown), 65,000 bytes
            for method in ("GetGame", "StreamEvents"):
                answers = [await first_answer(channel, method, big)
                           for channel in (to_other, to_owner)]
                assert answers[0] == answers[1], method
            assert (await stub.GetGame(pb.GetGameRequest(game_id=table.game_id))).game.version \
                == answer.version
        assert other.metric("tapis_cluster_forwards_total", method="SubmitAction") == 6
        assert other.metric("tapis_cluster_forwards_total", method="StreamEvents") >= 1
    finally:
        for node in (owner, other):
            node.stop()


@pytest.mark.parametrize(("seen", "resume"), [(True, 42), (False, 7)])
def test_a_relayed_stream_too_slow_for_its_queue_resumes_after_its_last_message(
        seen: bool, resume: int) -> None:
    last = pb.StreamEventsResponse(events=[pb.Event(sequence=41), pb.Event(sequence=42)])
    request = pb.StreamEventsRequest(game_id="g", after_sequence=7).SerializeToString()
    assert relay._last_sequence(last.SerializeToString() if seen else b"", request) == resume
