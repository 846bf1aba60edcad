"""`python -m tapis_service.healthcheck`: exit 0 while the server on this machine reports
SERVING (grpc.health.v1), 1 otherwise — the container's and Kubernetes' probe.

It dials ``localhost:$TAPIS_PORT``: over TLS when ``TAPIS_TLS_CERT`` is set, trusting
``TAPIS_TLS_CA`` (the CA that signed the server's certificate) and checking the name
``TAPIS_HEALTH_NAME`` (default ``localhost``) in the certificate; in clear otherwise. (Kubernetes'
own gRPC probes do not speak TLS.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def channel(environ: Mapping[str, str]) -> grpc.Channel:
    """A channel to ``localhost:$TAPIS_PORT``, over TLS when ``TAPIS_TLS_CERT`` is set."""
    target = f"localhost:{environ.get('TAPIS_PORT', '50051')}"
    return channel_to(target, bool(environ.get("TAPIS_TLS_CERT")), environ)


def channel_to(target: str, tls: bool, environ: Mapping[str, str]) -> grpc.Channel:
    """A channel to a server on this machine: over TLS when it serves TLS, trusting
    ``TAPIS_TLS_CA`` and checking the name ``TAPIS_HEALTH_NAME`` (default ``localhost``)."""
    if not tls:
        return grpc.insecure_channel(target)
    ca = environ.get("TAPIS_TLS_CA")
    credentials = grpc.ssl_channel_credentials(Path(ca).read_bytes() if ca else None)
    name = environ.get("TAPIS_HEALTH_NAME", "localhost")
    return grpc.secure_channel(target, credentials,
                               options=[("grpc.ssl_target_name_override", name)])


def serving(environ: Mapping[str, str], timeout_s: float = 3.0) -> bool:
    try:
        with channel(environ) as probe:
            answer = health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(),
                                                             timeout=timeout_s)
    except (grpc.RpcError, OSError):
        return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def main() -> None:
    sys.exit(0 if serving(os.environ) else 1)


if __name__ == "__main__":
    main()
