"""A channel to a Tapis server on this machine for a health probe (``tapis-admin health``, the
container's and Kubernetes' probe): over TLS when the server serves TLS, trusting
``TAPIS_TLS_CA`` (the CA that signed the server's certificate) and checking the name
``TAPIS_HEALTH_NAME`` (default ``localhost``) in the certificate; in clear otherwise.
(Kubernetes' own gRPC probes do not speak TLS.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import grpc


def channel_to(target: str, tls: bool, environ: Mapping[str, str]) -> grpc.Channel:
    """A channel to ``target``, over TLS when ``tls``."""
    if not tls:
        return grpc.insecure_channel(target)
    ca = environ.get("TAPIS_TLS_CA")
    credentials = grpc.ssl_channel_credentials(Path(ca).read_bytes() if ca else None)
    name = environ.get("TAPIS_HEALTH_NAME", "localhost")
    return grpc.secure_channel(target, credentials,
                               options=[("grpc.ssl_target_name_override", name)])
