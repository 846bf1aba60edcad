"""The tunnel's own refusals (``cluster.tunnel``): a tunnel or a relayed call its owner
will not serve, each a precise status, and the reason a tunnel ended with."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis_service.cluster.frames import VERSIONS
from tapis_service.observe.errors import ServiceError


def reason_of(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of the status a tunnel ended with ("" when it has none)."""
    status = rpc_status.from_call(error)
    for detail in () if status is None else status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            return str(error_details_pb2.ErrorInfo.FromString(detail.value).reason)
    return ""


def not_a_node() -> ServiceError:
    return ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_A_CLUSTER_NODE",
                        "the tunnel is opened by a node of this cluster only")


def version_mismatch(detail: str) -> ServiceError:
    """A call the table's owner cannot serve: it runs another version (a rolling upgrade).
    Nothing of it was applied: the client retries, with the same request id."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "NODE_VERSION_MISMATCH",
                        f"the node holding this table runs another version ({detail}); "
                        "nothing was applied: retry with backoff, with the same request_id")


def unknown_version(version: str) -> ServiceError:
    """The refusal of a tunnel opened with a protocol version this owner does not speak."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "NODE_VERSION_MISMATCH",
                        f"tunnel protocol version {version or 'none'}; this node speaks "
                        f"{', '.join(map(str, sorted(VERSIONS)))}")


def stopping() -> ServiceError:
    """The refusal of a tunnel opened to a node that has drained its tunnels (it is stopping):
    no call of it is served; the relaying node looks the table up again."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "SERVER_STOPPING",
                        "this node is stopping: it takes no relayed call")


OVERLOADED = ServiceError(
    grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
    "the table's owner has too many relayed calls in flight; retry with backoff")
