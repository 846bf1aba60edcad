"""A health probe of a Tapis server (``tapis-admin health``: the image's HEALTHCHECK, an
operator's check): a ``grpc.health.v1`` Check on the server's own port, in clear or over TLS.

Where and how to dial:

- ``--pid`` (default: PID 1, a container's server): the server process's own flags and
  ``TAPIS_*`` variables as the server parsed them (``tapis_service.settings``): its port, and TLS
  when it has ``--tls-cert``. Over TLS the probe trusts ``--tls-ca`` (else ``TAPIS_TLS_CA``),
  else the system's roots with ``--tls`` (else ``TAPIS_TLS``), else the server's own certificate
  chain file when it holds a self-signed certificate (a self-signed server certificate, or a
  chain that ends with its root CA); otherwise it refuses, asking for ``--tls-ca``: it never
  dials without checking the certificate. A server that asks client certificates
  (``--tls-client-ca``) is probed on its plaintext ``--health-port``, or refused without one.
- ``--target HOST:PORT``: TLS when ``--tls-ca``/``TAPIS_TLS_CA`` or ``--tls``/``TAPIS_TLS`` says
  so, in clear otherwise.

The name checked in the server's certificate is ``--tls-name`` (else ``TAPIS_HEALTH_NAME``), else
``localhost`` with ``--pid`` (the probe dials a loopback address) and the target's own host with
``--target``. (Kubernetes' own gRPC probes speak no TLS: they use ``--health-port``.)
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from tapis_service.door.tls import TlsFilesError, channel_credentials, read_pem
from tapis_service.process.configuration import TRUE, BadSetting, parse
from tapis_service.settings import Settings


class Unprobed(Exception):
    """The probe cannot tell where or how to dial (``tapis-admin`` exits 2 with the message)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """Where to dial, and how: in clear (``tls`` False) or over TLS trusting ``roots`` (None:
    the system's roots) and checking ``name`` in the certificate (None: the target's host)."""

    target: str
    tls: bool = False
    roots: bytes | None = None
    name: str | None = None

    def channel(self) -> grpc.Channel:
        if not self.tls:
            return grpc.insecure_channel(self.target)
        options = [] if self.name is None else [("grpc.ssl_target_name_override", self.name)]
        return grpc.secure_channel(self.target, channel_credentials(self.roots), options=options)


def check(probe: Probe, service: str, timeout_s: float) -> str:
    """The status the server reports for ``service`` (``SERVING``, ``NOT_SERVING``...), or
    ``UNREACHABLE (CODE)``."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with probe.channel() as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"UNREACHABLE ({error.code().name})"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


@dataclass(frozen=True, slots=True)
class Trust:
    """What the operator said about TLS: a CA file, the system's roots, a name to check."""

    ca: Path | None = None
    system_roots: bool = False
    name: str | None = None

    @classmethod
    def given(cls, ca: Path | None, system_roots: bool, name: str | None,
              environ: Mapping[str, str]) -> Trust:
        """The options, else ``TAPIS_TLS_CA``, ``TAPIS_TLS`` and ``TAPIS_HEALTH_NAME``."""
        ca_text = environ.get("TAPIS_TLS_CA") or None
        return cls(ca if ca is not None else Path(ca_text) if ca_text else None,
                   system_roots or environ.get("TAPIS_TLS", "").lower() in TRUE,
                   name or environ.get("TAPIS_HEALTH_NAME") or None)

    def roots(self) -> bytes | None:
        """The CA file's PEM (None: the system's roots)."""
        return None if self.ca is None else _pem(self.ca, "CA")


def to_target(target: str, trust: Trust) -> Probe:
    """``--target``: over TLS when a CA or ``--tls`` is given."""
    if trust.ca is None and not trust.system_roots:
        return Probe(target)
    return Probe(target, True, trust.roots(), trust.name)


def to_process(process: Path, trust: Trust) -> Probe:
    """``--pid``: the port and the TLS of the server process ``process`` (a /proc entry)."""
    settings = server_settings(process)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.host,
                                                                        settings.host)
    if settings.port == 0 and not (settings.tls_client_ca and settings.health_port):
        raise Unprobed("the server listens on a free port (--port 0), named in its `serving` "
                       "log line: give --target HOST:PORT")
    if settings.tls_cert is not None and settings.tls_client_ca is not None:
        if not settings.health_port:
            raise Unprobed("the server asks client certificates (--tls-client-ca) on its port: "
                           "give it a plaintext --health-port to probe")
        return Probe(_address(host, settings.health_port))
    target = _address(host, settings.port)
    if settings.tls_cert is None:
        return Probe(target)
    name = trust.name or "localhost"
    if trust.ca is not None or trust.system_roots:
        return Probe(target, True, trust.roots(), name)
    chain = settings.tls_cert if settings.tls_cert.is_absolute() \
        else process / "cwd" / settings.tls_cert
    if not _holds_a_root(chain):
        raise Unprobed(f"the server serves TLS with {settings.tls_cert}, signed by a CA it does "
                       "not hold: give --tls-ca FILE (or TAPIS_TLS_CA), the CA that signed it")
    return Probe(target, True, _pem(chain, "server's certificate"), name)


def server_settings(process: Path) -> Settings:
    """The settings of the tapis-server process ``process`` (a /proc entry), read from its own
    command line and environment as it parsed them: ``--port 6000`` is followed as well as
    ``TAPIS_PORT``."""
    try:
        argv = (process / "cmdline").read_bytes().split(b"\0")[:-1]
        environ = dict(item.split(b"=", 1) for item in
                       (process / "environ").read_bytes().split(b"\0") if b"=" in item)
    except OSError as error:
        raise Unprobed(f"cannot read the server's command line ({error}): give --target") \
            from None
    words = [word.decode() for word in argv]
    flags = next((words[i + 1:] for i, word in enumerate(words)
                  if word.endswith("tapis-server") or word == "tapis_service.process.main"), None)
    if flags is None:
        raise Unprobed(f"{process} is not a tapis-server ({' '.join(words)[:80]}): give "
                       "--target")
    try:
        return parse(flags, {k.decode(): v.decode() for k, v in environ.items()})
    except (BadSetting, SystemExit) as error:
        raise Unprobed(f"cannot read the server's settings ({error}): give --target") from None


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _pem(path: Path, what: str) -> bytes:
    """The certificates of the PEM file ``path`` (read as the server reads its TLS files)."""
    try:
        data = read_pem(path, what)
    except TlsFilesError as error:
        raise Unprobed(str(error)) from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise Unprobed(f"the {what} {path} is not a PEM certificate")
    return data


def _holds_a_root(chain: Path) -> bool:
    """Whether the PEM file ``chain`` holds a self-signed CA certificate, which makes it a trust
    root for itself (grpc's TLS, like OpenSSL's, wants a chain to end at one it trusts: a leaf
    or an intermediate alone is not enough)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=chain)
    except (OSError, ssl.SSLError) as error:
        raise Unprobed(f"cannot read the server's certificate {chain}: {error}") from None
    return any(cert["subject"] == cert["issuer"] for cert in context.get_ca_certs())
