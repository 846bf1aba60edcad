"""A small client over the generated stubs: seat tokens, retries through restarts, resumable
event streams."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc

T = TypeVar("T")

RETRYABLE = {grpc.StatusCode.UNAVAILABLE}
DEFAULT_TARGET = "127.0.0.1:50051"
RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                     ("grpc.min_reconnect_backoff_ms", 100),
                     ("grpc.max_reconnect_backoff_ms", 1000)]
"""Reconnect soon after a server restart (gRPC's default backoff grows to 120 s)."""


def error_reason(error: grpc.RpcError) -> str:
    """The ErrorInfo reason carried by a refusal ("" if none)."""
    status = rpc_status.from_call(error)
    if status is None:
        return ""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason
    return ""


class Connection:
    """A channel to a Tapis server; calls are retried on UNAVAILABLE with backoff."""

    def __init__(self, target: str = DEFAULT_TARGET, retry_for_s: float = 60.0) -> None:
        self.target = target
        self.retry_for_s = retry_for_s
        self.channel = grpc.aio.insecure_channel(target, options=RECONNECT_OPTIONS)
        self.stub = pb_grpc.GameServiceStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()

    async def call(self, method: Callable[..., Awaitable[T]], request: Any,
                   token: str | None = None, timeout: float = 10.0) -> T:
        """Call ``method``; on UNAVAILABLE retry the *same* request (same request_id)."""
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        delay = 0.05
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.retry_for_s
        while True:
            try:
                return await method(request, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                if error.code() not in RETRYABLE or loop.time() > give_up:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    async def events(self, game_id: str, after: int = 0,
                     token: str | None = None) -> AsyncIterator[pb.Event]:
        """Every event after ``after``, resuming by sequence after a dropped stream: no gap,
        no duplicate."""
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        last = after
        delay = 0.05
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.retry_for_s
        while True:
            try:
                stream = self.stub.StreamEvents(
                    pb.StreamEventsRequest(game_id=game_id, after_sequence=last),
                    metadata=metadata)
                async for response in stream:
                    for event in response.events:
                        if event.sequence <= last:
                            continue
                        last = event.sequence
                        delay = 0.05
                        give_up = loop.time() + self.retry_for_s
                        yield event
                return
            except grpc.aio.AioRpcError as error:
                resumable = error.code() in RETRYABLE or error_reason(error) == "STREAM_TOO_SLOW"
                if not resumable or loop.time() > give_up:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)
