"""Backend credentials: the API keys file, who a key belongs to, and its fingerprint.

The file (``--api-keys-file``, ``TAPIS_API_KEYS_FILE``) holds one key per line, either the key
itself or ``sha256:`` and the lowercase hex SHA-256 of its UTF-8 bytes, optionally followed by
white space and the backend's name; blank lines and lines starting with ``#`` are skipped::

    # backend-a's key, and a second key of the same backend while it rotates
    3Yc9Lw0pX...  backend-a
    sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  backend-a

Two keys with the same name act as the same backend (the same tables, the same results), so a
key can be rotated without a gap. A key without a name is its own backend, named by its
fingerprint. Keys are held as their SHA-256 only and never logged: the fingerprint (the first
12 hex digits of the SHA-256) names a key in logs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog

from tapis_service.observe.errors import ServiceError

log = structlog.get_logger("tapis.api_keys")

HEADER = "x-api-key"
"""The call metadata that carries a backend's key."""
MIN_KEY_CHARS = 16
HASHED = re.compile(r"sha256:([0-9a-f]{64})")
NAME = re.compile(r"[A-Za-z0-9._:@/-]{1,64}")


class ApiKeysError(ValueError):
    """The keys file cannot be used; the message names the file and line (never a key)."""


@dataclass(frozen=True, slots=True)
class Backend:
    """Who a call with a valid key acts as."""

    name: str
    fingerprint: str
    """Of the key used (a backend may hold several keys)."""


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def fingerprint(key_digest: bytes) -> str:
    """A short name for a key, safe to log."""
    return key_digest.hex()[:12]


def parse(text: str, source: str = "the API keys file") -> dict[bytes, Backend]:
    """Each key's SHA-256 -> its backend."""
    found: dict[bytes, Backend] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{source}, line {number}"
        if len(fields) > 2:
            raise ApiKeysError(f"{where}: a key, then at most a name")
        key, name = fields[0], fields[1] if len(fields) == 2 else None
        hashed = HASHED.fullmatch(key)
        if hashed is not None:
            key_digest = bytes.fromhex(hashed.group(1))
        elif key.startswith("sha256:"):
            raise ApiKeysError(f"{where}: sha256: takes 64 lowercase hex digits")
        elif len(key) < MIN_KEY_CHARS:
            raise ApiKeysError(f"{where}: a key has at least {MIN_KEY_CHARS} characters")
        else:
            key_digest = digest(key)
        if name is not None and NAME.fullmatch(name) is None:
            raise ApiKeysError(f"{where}: a name is 1 to 64 of A-Z a-z 0-9 . _ : @ / -")
        if key_digest in found:
            raise ApiKeysError(f"{where}: the same key twice")
        short = fingerprint(key_digest)
        found[key_digest] = Backend(name or f"key-{short}", short)
    if not found:
        raise ApiKeysError(f"{source} holds no key")
    return found


class ApiKeys:
    """The keys of ``path``, re-read by ``reload()`` (on SIGHUP)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys = self._load()
        log.info("api_keys_loaded", keys=len(self._keys), backends=len(self.backends()))

    def _load(self) -> dict[bytes, Backend]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ApiKeysError(f"cannot read the API keys file {self.path}: {error}") from error
        return parse(text, str(self.path))

    def backends(self) -> set[str]:
        return {backend.name for backend in self._keys.values()}

    def reload(self) -> bool:
        """Read the file again; False (and the keys in force kept) if it is bad."""
        try:
            keys = self._load()
        except ApiKeysError as error:
            log.error("api_keys_reload_failed", error=str(error))
            return False
        self._keys = keys
        log.info("api_keys_reloaded", keys=len(keys), backends=len(self.backends()))
        return True

    def backend_of(self, key: str) -> Backend | None:
        """The backend a key belongs to (None: not a key of this file)."""
        return self._keys.get(digest(key))


def authenticate(key: str | None, keys: ApiKeys | None) -> Backend | None:
    """The backend a call acts as: None without a key; refused with a key the server does not
    hold (or any key, on a server without keys)."""
    if key is None:
        return None
    backend = keys.backend_of(key) if keys is not None else None
    if backend is None:
        raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_API_KEY",
                           "the x-api-key is not a key of this server" if keys is not None
                           else "this server holds no API keys (no --api-keys-file)")
    return backend


def require(backend: Backend | None, what: str) -> Backend:
    """The call's backend, which ``what`` needs."""
    if backend is None:
        raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED",
                           f"{what} needs a backend key (metadata {HEADER})")
    return backend
