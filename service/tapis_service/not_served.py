"""The contract's methods and fields this server does not serve yet (issue 24, in progress).

Each is refused precisely, UNIMPLEMENTED / FEATURE_NOT_AVAILABLE, never answered half-done nor
silently ignored; the proto comments say "Not served yet" for each. A method leaves this module
when it is served.
"""

from __future__ import annotations

from typing import Any

import grpc
import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_service import metrics
from tapis_service.errors import ServiceError, to_status

log = structlog.get_logger("tapis.rpc")

UNARY_METHODS: dict[str, type[Any]] = {
    "ReplaceSeat": pb.ReplaceSeatRequest,
}
STREAM_METHODS: dict[str, type[Any]] = {}


def not_available(what: str) -> ServiceError:
    """The refusal of something the contract has and this server does not serve yet."""
    return ServiceError(grpc.StatusCode.UNIMPLEMENTED, "FEATURE_NOT_AVAILABLE",
                        f"{what} is not served by this version of the server yet")


async def refuse(method: str, context: grpc.aio.ServicerContext) -> None:
    """End the call with the method's refusal."""
    error = not_available(method)
    metrics.REFUSALS.labels(error.code.name, error.reason).inc()
    log.info("refused", rpc=method, code=error.code.name, reason=error.reason)
    await context.abort_with_status(to_status(error))


class NotServedYet:
    """The servicer's answers to the methods not served yet."""

    async def ReplaceSeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await refuse("ReplaceSeat", context)



def method_handlers(servicer: NotServedYet) -> dict[str, grpc.RpcMethodHandler]:
    """The same answers as method handlers, for a server that registers its own (a cluster
    node)."""
    handlers = {name: grpc.unary_unary_rpc_method_handler(
                    getattr(servicer, name), request_deserializer=request.FromString)
                for name, request in UNARY_METHODS.items()}
    handlers.update({name: grpc.unary_stream_rpc_method_handler(
                        getattr(servicer, name), request_deserializer=request.FromString)
                     for name, request in STREAM_METHODS.items()})
    return handlers
