"""The API keys file: keys or their SHA-256, names shared by a backend's keys, reload on SIGHUP
keeping the keys in force when the file is bad, and refusals that never show a key."""

from __future__ import annotations

import hashlib
from pathlib import Path

import grpc
import pytest
import structlog

from tapis_service.door.api_keys import (
    ApiKeys,
    ApiKeysError,
    Backend,
    authenticate,
    digest,
    fingerprint,
    parse,
    require,
)
from tapis_service.observe.errors import ServiceError

KEY_A = "a-key-of-backend-a-0123456789"
KEY_A2 = "the-next-key-of-backend-a-4567"
KEY_B = "b-key-without-a-name-9876543210"


def keys_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "api-keys"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_key_or_its_sha256_names_a_backend(tmp_path: Path) -> None:
    hashed = hashlib.sha256(KEY_A2.encode()).hexdigest()
    keys = ApiKeys(keys_file(tmp_path, f"# backends\n\n{KEY_A}  backend-a\n"
                                       f"sha256:{hashed} backend-a\n{KEY_B}\n"))
    a = keys.backend_of(KEY_A)
    assert a is not None and a.name == "backend-a"
    a2 = keys.backend_of(KEY_A2)
    assert a2 is not None and a2.name == "backend-a" and a2.fingerprint != a.fingerprint
    b = keys.backend_of(KEY_B)
    assert b == Backend(f"key-{fingerprint(digest(KEY_B))}", fingerprint(digest(KEY_B)))
    assert keys.backend_of(hashed) is None  # the hash is not the key
    assert keys.backend_of(KEY_A + "x") is None
    assert keys.backends() == {"backend-a", b.name}


@pytest.mark.parametrize(("text", "message"), [
    ("", "holds no key"),
    ("# only a comment\n", "holds no key"),
    ("short\n", "line 1: a key has at least 16"),
    (f"{KEY_A}\n{KEY_A} again\n", "line 2: the same key twice"),
    (f"{KEY_A} name extra\n", "line 1: a key, then at most a name"),
    ("sha256:abc\n", "line 1: sha256: takes 64"),
    (f"{KEY_A} bad name!\n", "line 1: a key, then at most a name"),
    (f"{KEY_A} bad|name\n", "line 1: a name is"),
])
def test_a_bad_file_is_refused_naming_the_line_never_the_key(text: str, message: str) -> None:
    with pytest.raises(ApiKeysError, match=message) as raised:
        parse(text, "keys")
    assert KEY_A not in str(raised.value)


def test_a_reload_takes_the_new_keys_and_a_bad_one_keeps_the_old(tmp_path: Path) -> None:
    path = keys_file(tmp_path, f"{KEY_A} backend-a\n")
    keys = ApiKeys(path)
    path.write_text(f"{KEY_B} backend-b\n", encoding="utf-8")
    assert keys.reload()
    assert keys.backend_of(KEY_A) is None and keys.backend_of(KEY_B) is not None
    path.write_text("too-short\n", encoding="utf-8")
    assert not keys.reload()
    assert keys.backend_of(KEY_B) is not None
    path.unlink()
    assert not keys.reload()
    assert keys.backend_of(KEY_B) is not None


def test_a_missing_file_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ApiKeysError, match="cannot read the API keys file"):
        ApiKeys(tmp_path / "nowhere")


def test_keys_never_reach_the_logs(tmp_path: Path) -> None:
    path = keys_file(tmp_path, f"{KEY_A} backend-a\n")
    with structlog.testing.capture_logs() as lines:
        keys = ApiKeys(path)
        path.write_text(f"{KEY_A}\n{KEY_A}\n", encoding="utf-8")
        keys.reload()
        with pytest.raises(ServiceError):
            authenticate(KEY_B, keys)
    assert lines and KEY_A not in repr(lines) and KEY_B not in repr(lines)


def test_authenticate_and_require(tmp_path: Path) -> None:
    keys = ApiKeys(keys_file(tmp_path, f"{KEY_A} backend-a\n"))
    assert authenticate(None, keys) is None
    backend = authenticate(KEY_A, keys)
    assert backend is not None and require(backend, "EndTable") is backend
    with pytest.raises(ServiceError) as wrong:
        authenticate(KEY_B, keys)
    assert (wrong.value.code, wrong.value.reason) == (grpc.StatusCode.UNAUTHENTICATED,
                                                     "INVALID_API_KEY")
    assert KEY_B not in wrong.value.message
    with pytest.raises(ServiceError) as open_mode:
        authenticate(KEY_A, None)  # a server without keys takes none
    assert open_mode.value.reason == "INVALID_API_KEY"
    with pytest.raises(ServiceError) as missing:
        require(None, "EndTable")
    assert (missing.value.code, missing.value.reason) == (grpc.StatusCode.UNAUTHENTICATED,
                                                         "API_KEY_REQUIRED")
