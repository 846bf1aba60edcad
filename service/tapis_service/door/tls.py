"""TLS for the server's ports: credentials that reload their certificates, and the channel
credentials a node (or a client) reaches a TLS server with.

The gRPC port's credentials are grpc's *dynamic* SSL credentials: grpc asks ``ReloadingTls``
for the certificates at every new connection's handshake. The WebSocket port's ``SSLContext``
is the live one its server socket uses: a reload loads the new chain into it, and OpenSSL gives
each new handshake the context's certificate of the moment. So a ``reload()`` (on SIGHUP)
takes effect on both ports for the next connection without a restart, and connections already
open keep theirs. Files are checked with the standard library's ``ssl`` before they are used: a
bad reload keeps the certificates in force and says why.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog

log = structlog.get_logger("tapis.tls")


class TlsFilesError(ValueError):
    """The certificate files cannot be used (missing, unreadable, or a key that does not match
    its certificate); the message names the file."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files: a certificate chain and its private key, and optionally the CA whose
    certificates clients must present (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True, slots=True)
class Pem:
    """The bytes of a checked set of TLS files."""

    cert: bytes
    key: bytes
    client_ca: bytes | None


def read_pem(path: Path, what: str) -> bytes:
    """The bytes of the PEM file ``path`` (``what`` it is, for the refusal)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TlsFilesError(f"cannot read the {what} {path}: {error.strerror}") from error
    if b"-----BEGIN " not in data:
        raise TlsFilesError(f"the {what} {path} is not PEM")
    return data


def load(files: TlsFiles) -> Pem:
    """Read and check the files: the key must match the certificate, the CA must parse."""
    cert = read_pem(files.cert, "TLS certificate")
    key = read_pem(files.key, "TLS key")
    client_ca = None if files.client_ca is None else read_pem(files.client_ca, "client CA")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(files.cert, files.key)
    except (ssl.SSLError, OSError) as error:
        raise TlsFilesError(f"the TLS key {files.key} does not fit the certificate "
                            f"{files.cert} ({error})") from error
    if files.client_ca is not None:
        try:
            context.load_verify_locations(cafile=files.client_ca)
        except (ssl.SSLError, OSError) as error:
            raise TlsFilesError(f"the client CA {files.client_ca} is not a certificate "
                                f"({error})") from error
    return Pem(cert, key, client_ca)


def _configuration(pem: Pem) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration([(pem.key, pem.cert)],
                                                     root_certificates=pem.client_ca)


class ReloadingTls:
    """Server credentials for ``files`` that ``reload()`` re-reads (the next handshake uses
    them)."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self._pem = load(files)
        self._lock = threading.Lock()
        self._pending: grpc.ServerCertificateConfiguration | None = None
        self._contexts: list[ssl.SSLContext] = []
        """The live contexts handed out by ``ssl_context()``, reloaded with the files."""

    @property
    def mutual(self) -> bool:
        """Clients must present a certificate signed by the client CA."""
        return self.files.client_ca is not None

    @property
    def pem(self) -> Pem:
        """The certificates in force (or about to be, after a reload)."""
        return self._pem

    def ssl_context(self) -> ssl.SSLContext:
        """The same files for a server socket of the standard library (the WebSocket port:
        wss and https), kept live: ``reload()`` loads the new chain into it, for the next
        handshake. (A reloaded client CA is added to the ones it trusts: one taken away stays
        trusted on this port until a restart.)"""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.files.cert, self.files.key)
        if self.files.client_ca is not None:
            context.load_verify_locations(cafile=self.files.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        self._contexts.append(context)
        return context

    def credentials(self) -> grpc.ServerCredentials:
        """The credentials to give ``add_secure_port``."""
        return grpc.dynamic_ssl_server_credentials(
            _configuration(self._pem), self._fetch,
            require_client_authentication=self.mutual)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """grpc's question at each handshake (from a core thread): new certificates, or None
        to keep the current ones."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def reload(self) -> bool:
        """Read the files again; False (and the certificates in force kept) if they are bad."""
        try:
            pem = load(self.files)
        except TlsFilesError as error:
            log.error("tls_reload_failed", error=str(error))
            return False
        for context in self._contexts:
            try:
                context.load_cert_chain(self.files.cert, self.files.key)
                if self.files.client_ca is not None:
                    context.load_verify_locations(cafile=self.files.client_ca)
            except (ssl.SSLError, OSError) as error:  # the files changed again meanwhile
                log.error("tls_reload_failed", error=str(error))
                return False
        with self._lock:
            self._pem = pem
            self._pending = _configuration(pem)
        log.info("tls_reloaded", cert=str(self.files.cert))
        return True


def channel_credentials(ca: bytes | None, cert: bytes | None = None,
                        key: bytes | None = None) -> grpc.ChannelCredentials:
    """Credentials to reach a TLS server: trusting ``ca`` (None: the system's roots), and
    presenting ``cert``/``key`` when the server asks for a client certificate."""
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                        certificate_chain=cert)


@dataclass(frozen=True, slots=True)
class ClusterTls:
    """How a cluster node reaches the others: over TLS, trusting the CA that signed the nodes'
    certificates, presenting its own certificate (for a cluster whose port asks for one), and
    checking the peers' certificates against ``server_name`` instead of the address it dials
    (when the nodes' certificates name a service, not each node's address)."""

    ca: bytes
    cert: bytes
    key: bytes
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return channel_credentials(self.ca, self.cert, self.key)

    def channel_options(self) -> list[tuple[str, str]]:
        return [] if self.server_name is None \
            else [("grpc.ssl_target_name_override", self.server_name)]


def cluster_tls(server: Pem, *, cert: Path | None = None, key: Path | None = None,
                ca: Path | None = None, server_name: str | None = None) -> ClusterTls:
    """The node-to-node TLS of a node serving ``server``: its own certificate unless ``cert``
    and ``key`` are given, and the CA ``ca`` (default: the server's client CA). Without either
    CA, ``TlsFilesError``: a node cannot tell a peer from a stranger."""
    if (cert is None) != (key is None):
        raise TlsFilesError("--cluster-tls-cert and --cluster-tls-key go together")
    own = server if cert is None or key is None \
        else load(TlsFiles(cert, key))
    trusted = read_pem(ca, "cluster CA") if ca is not None else server.client_ca
    if trusted is None:
        raise TlsFilesError("a cluster over TLS needs --cluster-tls-ca (the CA that signed "
                            "the nodes' certificates) or --tls-client-ca")
    if ca is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            context.load_verify_locations(cafile=ca)
        except (ssl.SSLError, OSError) as error:
            raise TlsFilesError(f"the cluster CA {ca} is not a certificate ({error})") \
                from error
    return ClusterTls(trusted, own.cert, own.key, server_name)
