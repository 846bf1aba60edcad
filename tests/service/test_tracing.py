"""Optional OpenTelemetry tracing (``--otel``, tracing.py): a call gets a server span that
continues the client's trace, and a relayed call carries the span's context through the
tunnel's frame, where the owner's span is its child."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed "
                    "(pip install 'tapis[otel]'; `make setup` installs it)")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.cluster import frames
from tapis_service.door.caller import Caller
from tapis_service.door.rpcs import BY_NAME
from tapis_service.observe import tracing
from tapis_service.observe.clock import ManualClock
from tests.support.calls import auth, person_seats
from tests.support.server import ServerFactory
from tests.support.websocket import Client

EXPORTER = InMemorySpanExporter()
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once: OpenTelemetry allows no other), exporting to
    memory; tracing is off again after the test."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    monkeypatch.setattr(tracing, "ENABLED", tracing.ENABLED)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


async def test_a_submit_action_produces_a_server_span_in_the_clients_trace(
        make_server: ServerFactory, spans: InMemorySpanExporter) -> None:
    h = await make_server(clock=ManualClock(), otel=True)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=3, seat_configs=person_seats(2)))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in range(2)]
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                 metadata=auth(tokens[0]))).game
    seat = view.awaiting_seats[0]
    await h.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=view.legal_actions[0]),
        metadata=(*auth(tokens[seat]), ("traceparent", PARENT)))
    [span] = named(spans, "/tapis.v1.GameService/SubmitAction")
    assert span.kind == trace.SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID  # the client's trace goes on
    assert span.status.is_ok
    assert named(spans, "/tapis.v1.GameService/CreateGame")
    assert not [s for s in spans.get_finished_spans() if "Health" in s.name]


async def test_a_server_without_the_flag_makes_no_span(
        make_server: ServerFactory, spans: InMemorySpanExporter) -> None:
    h = await make_server(clock=ManualClock())
    await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                                 seat_configs=person_seats(2)))
    assert not spans.get_finished_spans()
    assert tracing.traceparent() is None


async def test_a_relayed_call_carries_the_trace_to_the_owners_span(
        spans: InMemorySpanExporter) -> None:
    tracing.interceptors(True)  # tracing on, with the provider above
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("relaying node", kind=trace.SpanKind.SERVER) as relaying:
        caller = Caller(peer="ipv4:10.0.0.9:5000", traceparent=tracing.traceparent())
    assert caller.traceparent and caller.traceparent.startswith("00-")
    frame = frames.encode_request(7, BY_NAME["GetGame"].code, caller, b"request")
    call_id, method, relayed, request = frames.decode_request(frame)
    assert (call_id, request, relayed.traceparent) == (7, b"request", caller.traceparent)
    assert frames.decode_request(frames.encode_request(7, method, Caller(), b"r"))[2] \
        .traceparent is None  # a call without a trace: no trace in its frame
    with tracing.relayed("GetGame", relayed.traceparent):
        pass
    [owner] = named(spans, "tapis.cluster.Tunnel/GetGame")
    assert owner.parent is not None
    assert owner.parent.span_id == relaying.get_span_context().span_id
    assert owner.context.trace_id == relaying.get_span_context().trace_id


def test_the_flag_without_the_extra_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tapis_service.process.main import KNOWN_REFUSALS

    monkeypatch.setitem(sys.modules, "opentelemetry.instrumentation.grpc", None)  # not there
    monkeypatch.setattr(tracing, "ENABLED", False)
    with pytest.raises(tracing.TracingUnavailable, match=r"pip install 'tapis\[otel\]'") as no:
        tracing.interceptors(True)
    assert isinstance(no.value, KNOWN_REFUSALS) and not tracing.ENABLED


async def test_a_websocket_request_gets_a_server_span_named_as_grpcs(
        make_server: ServerFactory, spans: InMemorySpanExporter) -> None:
    """The socket's calls are traced as gRPC's are: one server span per request and per
    stream, named by the method, ``rpc.system`` ``websocket``; a refusal is an error."""
    h = await make_server(clock=ManualClock(), otel=True, ws_port=0)
    client = await Client.open(f"ws://127.0.0.1:{h.running.ws_port}/ws")
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=3, seat_configs=person_seats(2)))
    game_id = created.create_game.game.game_id
    follow = client.send(ws_pb.ClientFrame(stream_events=pb.StreamEventsRequest(
        game_id=game_id)))
    missing = await client.call(get_game=pb.GetGameRequest(game_id="0" * 16))
    assert missing.WhichOneof("response") == "refusal"
    stopped = await client.call(stop_events=ws_pb.StopEvents(stream_id=follow))
    assert stopped.WhichOneof("response") == "events_stopped"
    for _ in range(1000):  # the stream's task ends a step or two after its answer
        if named(spans, "/tapis.v1.GameService/StreamEvents"):
            break
        await asyncio.sleep(0)
    client.close()
    [create] = named(spans, "/tapis.v1.GameService/CreateGame")
    assert create.kind == trace.SpanKind.SERVER and create.status.is_ok
    assert dict(create.attributes or {}) == {"rpc.system": "websocket",
                                             "rpc.service": "tapis.v1.GameService",
                                             "rpc.method": "CreateGame"}
    [get] = named(spans, "/tapis.v1.GameService/GetGame")
    assert get.status.status_code == trace.StatusCode.ERROR  # GAME_NOT_FOUND
    [stream] = named(spans, "/tapis.v1.GameService/StreamEvents")
    assert stream.kind == trace.SpanKind.SERVER
