"""The server's door: its TLS credentials, its backends' keys, and whether it may start.

Built once at start-up from the settings (``Security.build``): files that cannot be used and a
server exposed beyond loopback without TLS and keys refuse to start (exit 2, one line);
``reload()`` re-reads the certificates and the keys (SIGHUP) and keeps those in force when the
new files are bad.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog

from tapis_service.door import exposure
from tapis_service.door.api_keys import ApiKeys, ApiKeysError, Backend, authenticate
from tapis_service.door.tls import ClusterTls, ReloadingTls, TlsFiles, TlsFilesError, cluster_tls
from tapis_service.observe.errors import ServiceError
from tapis_service.settings import Settings

log = structlog.get_logger("tapis.security")


class CannotSecure(Exception):
    """The server's TLS or keys cannot be set up as told: it refuses to start (exit 2)."""


@dataclass
class Security:
    """TLS (None: plaintext) and API keys (None: open mode, no backends)."""

    tls: ReloadingTls | None = None
    keys: ApiKeys | None = None

    @classmethod
    def build(cls, host: str, *, tls_cert: Path | None = None, tls_key: Path | None = None,
              tls_client_ca: Path | None = None, api_keys_file: Path | None = None,
              insecure: bool = False) -> Security:
        """The server's security as told, or ``CannotSecure`` / ``exposure.Exposed``."""
        if (tls_cert is None) != (tls_key is None):
            raise CannotSecure("--tls-cert and --tls-key go together")
        if tls_client_ca is not None and tls_cert is None:
            raise CannotSecure("--tls-client-ca needs --tls-cert and --tls-key")
        warning = exposure.check(host, tls=tls_cert is not None,
                                 api_keys=api_keys_file is not None, insecure=insecure)
        try:
            tls = (None if tls_cert is None or tls_key is None
                   else ReloadingTls(TlsFiles(tls_cert, tls_key, tls_client_ca)))
            keys = None if api_keys_file is None else ApiKeys(api_keys_file)
        except (TlsFilesError, ApiKeysError) as error:
            raise CannotSecure(str(error)) from error
        if warning is not None:
            log.warning("insecure", message=warning)
        return cls(tls, keys)

    @classmethod
    def from_settings(cls, settings: Settings) -> Security:
        return cls.build(settings.host, tls_cert=settings.tls_cert, tls_key=settings.tls_key,
                         tls_client_ca=settings.tls_client_ca,
                         api_keys_file=settings.api_keys_file, insecure=settings.insecure)

    @property
    def open_mode(self) -> bool:
        """No keys: no backends, every table public."""
        return self.keys is None

    def add_port(self, server: grpc.aio.Server, address: str) -> int:
        """Listen on ``address``, over TLS when configured; the port bound (0: none)."""
        if self.tls is None:
            return int(server.add_insecure_port(address))
        return int(server.add_secure_port(address, self.tls.credentials()))

    def cluster_tls(self, settings: Settings) -> ClusterTls | None:
        """How a cluster node reaches the others: over TLS when it serves TLS (its own
        certificate unless --cluster-tls-cert/--cluster-tls-key, the nodes' CA
        --cluster-tls-ca or --tls-client-ca), else in clear."""
        if self.tls is None:
            if settings.cluster_tls_cert or settings.cluster_tls_ca:
                raise CannotSecure("--cluster-tls-* need --tls-cert and --tls-key")
            return None
        try:
            return cluster_tls(self.tls.pem, cert=settings.cluster_tls_cert,
                               key=settings.cluster_tls_key, ca=settings.cluster_tls_ca,
                               server_name=settings.cluster_tls_name)
        except TlsFilesError as error:
            raise CannotSecure(str(error)) from error

    def backend_of(self, api_key: str | None) -> Backend | None:
        """The backend a call with ``api_key`` acts as (None: none sent); refused if wrong."""
        return authenticate(api_key, self.keys)

    def holds_key(self, api_key: str) -> bool:
        """Whether ``api_key`` is one of the server's (never raises)."""
        try:
            return self.backend_of(api_key) is not None
        except ServiceError:
            return False

    def reload(self) -> None:
        """Re-read the certificates and the keys (SIGHUP)."""
        if self.tls is not None:
            self.tls.reload()
        if self.keys is not None:
            self.keys.reload()
