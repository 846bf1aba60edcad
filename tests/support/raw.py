"""Raw calls: bytes sent to a method by name, bypassing the generated stubs."""

from __future__ import annotations

import grpc

from tapis.v1 import game_service_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["GameService"]
METHODS = [f"/{SERVICE.full_name}/{m.name}" for m in SERVICE.methods]
HEALTH = "/grpc.health.v1.Health/Check"
# bytes that are never a valid message: a truncated length-delimited field, a bad wire type
JUNK = [b"\x0a\xff\xff\xff\xff\x0f", b"\x0f", b"\x0a\x05ab", b"\xff" * 7]


async def raw_call(channel: grpc.aio.Channel, method: str, payload: bytes,
                   streaming: bool) -> grpc.aio.AioRpcError | None:
    """Send ``payload`` to ``method``; the refusal, or None when it was answered."""
    try:
        if streaming:
            call = channel.unary_stream(method)(payload)
            async for _ in call:
                break
            call.cancel()
        else:
            await channel.unary_unary(method)(payload)
    except grpc.aio.AioRpcError as error:
        return error
    return None
