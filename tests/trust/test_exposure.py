"""Safe by default: beyond loopback, TLS and API keys or --insecure."""

from __future__ import annotations

import pytest

from tapis_service.door.exposure import Exposed, check, is_loopback


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
    ("10.0.0.5", False), ("192.168.1.2", False), ("tapis.example", False), ("", False),
])
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_loopback_runs_open() -> None:
    assert check("127.0.0.1", tls=False, api_keys=False, insecure=False) is None


def test_beyond_loopback_tls_and_keys_are_enough() -> None:
    assert check("0.0.0.0", tls=True, api_keys=True, insecure=False) is None


@pytest.mark.parametrize(("tls", "api_keys", "missing"), [
    (False, False, "TLS (--tls-cert/--tls-key) and API keys (--api-keys-file)"),
    (True, False, "API keys (--api-keys-file)"),
    (False, True, "TLS (--tls-cert/--tls-key)"),
])
def test_beyond_loopback_without_both_it_refuses_naming_insecure(
        tls: bool, api_keys: bool, missing: str) -> None:
    with pytest.raises(Exposed) as raised:
        check("0.0.0.0", tls=tls, api_keys=api_keys, insecure=False)
    message = str(raised.value)
    assert "\n" not in message and "--insecure" in message and missing in message
    warning = check("0.0.0.0", tls=tls, api_keys=api_keys, insecure=True)
    assert warning is not None and missing in warning
