"""Seat tokens: issued at a join, kept only as their hashes, looked up on every call.

A join with a ``request_id`` gets a token derived from the game, the seat and the id under the
server's join key (an HMAC, never stored), so a retried join is answered with the same token,
after a restart too. The key lives in the data directory (``join.key``), or in the shared
database of a cluster (every node derives the same tokens), or per process without either. A
token its backend revoked (``ReplaceSeat``) is known as revoked, and refused as such
(TOKEN_REVOKED), for as long as its table is served here.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

import grpc

from tapis_service.errors import ServiceError
from tapis_service.session import Session
from tapis_service.streams import revoked


@functools.lru_cache(maxsize=1 << 16)
def token_hash(token: str) -> str:
    """Seat tokens are kept (and persisted) only as this hash (cached: every call hashes its
    token)."""
    return hashlib.sha256(token.encode()).hexdigest()


class SeatTokens:
    """The seat of every token this server knows, by the token's hash."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._seats: dict[str, tuple[str, int]] = {}
        self._revoked: dict[str, str] = {}
        """Hashes of revoked tokens -> their table."""
        self._by_table: dict[str, set[str]] = {}
        """Table -> the hashes of its tokens, live and revoked: revoking a seat or forgetting a
        table looks at that table's tokens only, not at every token of the server."""

    def issue(self, game_id: str, seat: int, request_id: str) -> str:
        """A new seat token: derived from the join's ``request_id``, else random."""
        if not request_id:
            return secrets.token_urlsafe(24)
        mac = hmac.new(self.key, f"{game_id}\0{seat}\0{request_id}".encode(),
                       hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:24]).decode()

    def add(self, digest: str, game_id: str, seat: int) -> None:
        """Know the token whose hash is ``digest`` as ``seat`` of ``game_id``."""
        self._seats[digest] = (game_id, seat)
        self._by_table.setdefault(game_id, set()).add(digest)

    def revoke(self, game_id: str, seat: int) -> list[str]:
        """Revoke every token of ``seat`` of ``game_id``; the hashes revoked (sorted)."""
        revoked = sorted(digest for digest in self._by_table.get(game_id, ())
                         if self._seats.get(digest) == (game_id, seat))
        for digest in revoked:
            self.add_revoked(digest, game_id)
        return revoked

    def add_revoked(self, digest: str, game_id: str) -> None:
        """Know the token whose hash is ``digest`` as revoked at ``game_id``."""
        self._seats.pop(digest, None)
        self._revoked[digest] = game_id
        self._by_table.setdefault(game_id, set()).add(digest)

    def forget(self, game_id: str) -> None:
        """Forget every token of a table (it left this server), revoked ones too."""
        for digest in self._by_table.pop(game_id, ()):
            if self._seats.get(digest, ("",))[0] == game_id:
                del self._seats[digest]
            if self._revoked.get(digest) == game_id:
                del self._revoked[digest]

    def seat_of(self, session: Session, token: str | None) -> int | None:
        """The caller's seat at ``session`` from its token; None for a spectator (no token)."""
        if token is None:
            return None
        digest = token_hash(token)
        owner = self._seats.get(digest)
        if owner is None and self._revoked.get(digest) == session.game_id:
            raise revoked()
        if owner is None:
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                               "this seat token is not valid on this server")
        if owner[0] != session.game_id:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "TOKEN_FOR_ANOTHER_GAME",
                               "this seat token belongs to another game")
        return owner[1]
