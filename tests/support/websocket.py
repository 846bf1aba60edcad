"""A real WebSocket client for the tests of the player WebSocket (picows's own): sends
ClientFrames, collects ServerFrames and the close code."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.rpc import error_details_pb2
from picows import WSCloseCode, WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

from tapis.v1 import websocket_pb2 as ws_pb


class _Collector(WSListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.frames: asyncio.Queue[ws_pb.ServerFrame] = asyncio.Queue()
        self.texts: list[str] = []
        self.closed: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type is WSMsgType.BINARY:
            self.frames.put_nowait(ws_pb.ServerFrame.FromString(frame.get_payload_as_bytes()))
        elif frame.msg_type is WSMsgType.TEXT:
            text = frame.get_payload_as_utf8_text()
            self.texts.append(text)
            self.frames.put_nowait(json_format.Parse(text, ws_pb.ServerFrame()))
        elif frame.msg_type is WSMsgType.CLOSE and not self.closed.done():
            self.closed.set_result(frame.get_close_code().value)

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        if not self.closed.done():
            self.closed.set_result(WSCloseCode.ABNORMAL_CLOSURE.value)


class Client:
    """One socket to the server."""

    def __init__(self, transport: WSTransport, collector: _Collector) -> None:
        self.transport = transport
        self.collector = collector
        self.next_id = 0
        self.set_aside: list[ws_pb.ServerFrame] = []

    @classmethod
    async def open(cls, url: str, ssl_context: ssl.SSLContext | None = None,
                   auto_pong: bool = True,
                   headers: list[tuple[str, str]] | None = None,
                   socket_factory: Any = None) -> Client:
        """``socket_factory``: picows's, e.g. a socket from another loopback address."""
        transport, collector = await ws_connect(_Collector, url, ssl_context=ssl_context,
                                                enable_auto_pong=auto_pong,
                                                extra_headers=headers,
                                                socket_factory=socket_factory)
        return cls(transport, collector)

    def send(self, frame: ws_pb.ClientFrame, *, text: bool = False) -> int:
        if not frame.id:
            self.next_id += 1
            frame.id = self.next_id
        if text:
            self.transport.send(WSMsgType.TEXT, json_format.MessageToJson(frame).encode())
        else:
            self.transport.send(WSMsgType.BINARY, frame.SerializeToString())
        return frame.id

    def send_raw(self, payload: bytes) -> None:
        self.transport.send(WSMsgType.BINARY, payload)

    async def receive(self) -> ws_pb.ServerFrame:
        """The next frame (those ``call`` set aside first)."""
        if self.set_aside:
            return self.set_aside.pop(0)
        return await asyncio.wait_for(self.collector.frames.get(), 10)

    async def call(self, seat_token: str = "", **request: Any) -> ws_pb.ServerFrame:
        """Send one request and wait for its answer (other frames meanwhile are kept for
        ``receive``)."""
        frame_id = self.send(ws_pb.ClientFrame(seat_token=seat_token, **request))
        while True:
            answer = await asyncio.wait_for(self.collector.frames.get(), 10)
            if answer.id == frame_id:
                return answer
            self.set_aside.append(answer)

    async def closed(self) -> int:
        return await asyncio.wait_for(asyncio.shield(self.collector.closed), 10)

    def close(self) -> None:
        self.transport.disconnect()


def reason(frame: ws_pb.ServerFrame) -> str:
    """The ErrorInfo reason of a refusal frame."""
    assert frame.WhichOneof("response") == "refusal", frame
    info = error_details_pb2.ErrorInfo()
    assert frame.refusal.details[0].Unpack(info)
    assert info.domain == "tapis.v1"
    return info.reason



async def tls_handshake(port: int, ca: Path) -> bool:
    """A TLS handshake with ``localhost:port`` trusting only ``ca``: True if it succeeds (the
    port showed a certificate that CA signed)."""
    trusting = ssl.create_default_context(cafile=str(ca))
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection("localhost", port, ssl=trusting), timeout=30)
    except ssl.SSLCertVerificationError:
        return False
    writer.close()
    return True
