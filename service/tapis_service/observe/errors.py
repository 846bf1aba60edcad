"""One mapping from refusals to gRPC statuses with ``google.rpc.ErrorInfo`` details (and
``handled_elsewhere``, for a background future whose failure is reported elsewhere), and
``CannotListen``, the process's refusal of an address it cannot take."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from tapis_engine.errors import ErrorKind, RuleError

DOMAIN = "tapis.v1"


class CannotListen(OSError):
    """The server's address is taken or not ours: it refuses to start (exit 2)."""


class ServiceError(Exception):
    """A refusal decided by the service (not the rules): code, UPPER_SNAKE reason, message."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 metadata: dict[str, str] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = metadata or {}
        """The ErrorInfo's metadata (e.g. where a cut stream resumes)."""
        self.logged = False
        """Already logged where it was decided (the servicer does not log it again)."""


_KIND_TO_CODE = {
    ErrorKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.PERMISSION: grpc.StatusCode.PERMISSION_DENIED,
    ErrorKind.RATE_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def from_rule_error(error: RuleError) -> ServiceError:
    """The service refusal for an engine refusal."""
    return ServiceError(_KIND_TO_CODE[error.kind], error.reason.value, error.message)


def error_info(error: ServiceError) -> error_details_pb2.ErrorInfo:
    """The refusal's ErrorInfo(reason, domain="tapis.v1", metadata)."""
    return error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN,
                                       metadata=error.metadata)


def from_error_info(code: grpc.StatusCode, message: str,
                    info: error_details_pb2.ErrorInfo) -> ServiceError:
    """A refusal decided elsewhere (by another node), as it was given (already counted and
    logged there)."""
    refusal = ServiceError(code, info.reason, message, dict(info.metadata))
    refusal.logged = True
    return refusal


def status_message(error: ServiceError) -> status_pb2.Status:
    """The ``google.rpc.Status`` of a refusal, carrying its ErrorInfo: what gRPC sends in its
    trailers, and the WebSocket in a refusal frame."""
    detail = any_pb2.Any()
    detail.Pack(error_info(error))
    return status_pb2.Status(code=_CODE_VALUES[error.code], message=error.message,
                             details=[detail])


def to_status(error: ServiceError) -> grpc.Status:
    """A rich ``grpc.Status`` carrying the refusal's ErrorInfo."""
    return rpc_status.to_status(status_message(error))


FAULT = "the server failed on this request"
"""How a request the server failed on through a fault of its own is answered (``INTERNAL``), on
both doors: the exception's text stays in the log, since it may name anything, another seat's
cards included."""


def fault() -> ServiceError:
    """The refusal of a request the server failed on through a fault of its own (``FAULT``)."""
    return ServiceError(grpc.StatusCode.INTERNAL, "INTERNAL", FAULT)


async def end_call(context: grpc.aio.ServicerContext, error: ServiceError) -> NoReturn:
    """End a gRPC call with ``error``'s status (``abort_with_status`` raises, always)."""
    await context.abort_with_status(to_status(error))
    raise AssertionError("grpc's abort_with_status returned")


_CODE_VALUES = {code: getattr(code_pb2, code.name) for code in grpc.StatusCode
                if hasattr(code_pb2, code.name)}


def not_found(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.NOT_FOUND, "GAME_NOT_FOUND", message)


def invalid_argument(reason: str, message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, reason, message)


def failed_precondition(reason: str, message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.FAILED_PRECONDITION, reason, message)


def handled_elsewhere(future: asyncio.Future[Any]) -> None:
    """A done callback for a background future whose failure is reported elsewhere (a store
    write's failure reaches its table through the store's health, say): marks its exception
    retrieved, so asyncio logs nothing."""
    if not future.cancelled():
        future.exception()
