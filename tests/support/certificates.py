"""Throwaway certificates made at test time (trustme): a CA and what it signs, as PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

from tapis_service.door.tls import TlsFiles

NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Issued:
    """A CA's PEM file and a certificate it signed (chain and key files)."""

    ca: Path
    cert: Path
    key: Path

    def files(self, client_ca: Path | None = None) -> TlsFiles:
        return TlsFiles(self.cert, self.key, client_ca)

    def ca_bytes(self) -> bytes:
        return self.ca.read_bytes()

    def cert_bytes(self) -> bytes:
        return self.cert.read_bytes()

    def key_bytes(self) -> bytes:
        return self.key.read_bytes()


def issue(directory: Path, name: str, *identities: str) -> Issued:
    """A fresh CA and a certificate for ``identities`` (default: this machine's loopback
    names), written under ``directory`` as ``NAME-ca.pem``, ``NAME.pem``, ``NAME-key.pem``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert(*(identities or NAMES))
    paths = Issued(directory / f"{name}-ca.pem", directory / f"{name}.pem",
                   directory / f"{name}-key.pem")
    ca.cert_pem.write_to_path(str(paths.ca))
    paths.cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(paths.key))
    return paths
