"""The server's door as a whole: what refuses to start, and a SIGHUP reload of both."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from tapis_service.door.exposure import Exposed
from tapis_service.door.security import CannotSecure, Security
from tests.support.certificates import issue

KEY = "backend-key-0123456789abcdef"
OTHER = "other-backend-key-0123456789"


def test_loopback_without_anything_is_open_mode() -> None:
    security = Security.build("127.0.0.1")
    assert security.open_mode and security.tls is None
    assert security.backend_of(None) is None


def test_flags_that_do_not_go_together_refuse_to_start(tmp_path: Path) -> None:
    issued = issue(tmp_path, "server")
    with pytest.raises(CannotSecure, match="go together"):
        Security.build("127.0.0.1", tls_cert=issued.cert)
    with pytest.raises(CannotSecure, match="needs --tls-cert"):
        Security.build("127.0.0.1", tls_client_ca=issued.ca)
    with pytest.raises(CannotSecure, match="cannot read the API keys file"):
        Security.build("127.0.0.1", api_keys_file=tmp_path / "none")
    with pytest.raises(CannotSecure, match="does not fit"):
        Security.build("127.0.0.1", tls_cert=issued.cert, tls_key=issue(tmp_path, "x").key)


def test_exposed_without_tls_and_keys_refuses_unless_insecure(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY} backend-a\n")
    with pytest.raises(Exposed, match="--insecure"):
        Security.build("0.0.0.0", api_keys_file=keys)
    with structlog.testing.capture_logs() as lines:
        security = Security.build("0.0.0.0", api_keys_file=keys, insecure=True)
    assert [line["event"] for line in lines if line["log_level"] == "warning"] == ["insecure"]
    assert not security.open_mode
    issued = issue(tmp_path, "server")
    secured = Security.build("0.0.0.0", tls_cert=issued.cert, tls_key=issued.key,
                             api_keys_file=keys)
    assert secured.tls is not None and secured.keys is not None


def test_a_reload_reads_the_keys_and_the_certificates_again(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY} backend-a\n")
    first = issue(tmp_path, "first")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(first.cert_bytes())
    key.write_bytes(first.key_bytes())
    security = Security.build("127.0.0.1", tls_cert=cert, tls_key=key, api_keys_file=keys)
    second = issue(tmp_path, "second")
    cert.write_bytes(second.cert_bytes())
    key.write_bytes(second.key_bytes())
    keys.write_text(f"{OTHER} backend-b\n")
    security.reload()
    assert security.tls is not None and security.tls.pem.cert == second.cert_bytes()
    backend = security.backend_of(OTHER)
    assert backend is not None and backend.name == "backend-b"
