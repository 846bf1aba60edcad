"""Seat tokens: issued at a join, kept only as their hashes, looked up on every call.

A join with a ``request_id`` gets a token derived from the game, the seat and the id under the
server's join key (an HMAC, never stored), so a retried join is answered with the same token,
after a restart too. The key lives in the data directory (``join.key``), or in the shared
database of a cluster (every node derives the same tokens), or per process without either. A
token its backend revoked (a seat's by ``ReplaceSeat``, the table's former spectator token by
``RotateSpectatorToken``) is known as revoked, and refused as such (TOKEN_REVOKED, saying which
token it was), for as long as its table is served here.

A connection that sends the same token again and again (a player's WebSocket, a gRPC channel)
remembers its verification (``caller.Remembered``), valid while the registry's ``generation``
is the one it was verified at: every change that can take a verified token's seat away (a seat
revoked or replaced, a table forgotten here — ended, evicted, at rest, moved to another node —,
a token known for another seat, the key changed) moves the generation on, here and nowhere
else, so the next request of every connection is verified from scratch.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import itertools
import secrets

import grpc

from tapis_service.door.caller import Remembered
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.session import Session
from tapis_service.tables.streams import revoked

_GENERATIONS = itertools.count()
"""The generations of every registry of the process."""


@functools.lru_cache(maxsize=1 << 16)
def token_hash(token: str) -> str:
    """Seat tokens are kept (and persisted) only as this hash (cached: every call hashes its
    token)."""
    return hashlib.sha256(token.encode()).hexdigest()


class SeatTokens:
    """The seat of every token this server knows, by the token's hash."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self.generation = next(_GENERATIONS)
        """Moved on by every revocation: a ``Remembered`` verification of an earlier one is
        void (numbers never repeat in a process, so one registry's never matches another's)."""
        self._seats: dict[str, tuple[str, int]] = {}
        self._revoked: dict[str, tuple[str, bool]] = {}
        """Hashes of revoked tokens -> their table, and whether it was the table's spectator
        token (its refusal says which token it was)."""
        self._by_table: dict[str, set[str]] = {}
        """Table -> the hashes of its tokens, live and revoked: revoking a seat or forgetting a
        table looks at that table's tokens only, not at every token of the server."""

    @property
    def key(self) -> bytes:
        """The join key tokens are derived under."""
        return self._key

    @key.setter
    def key(self, key: bytes) -> None:
        self._key = key
        self.generation = next(_GENERATIONS)

    def issue(self, game_id: str, seat: int, request_id: str) -> str:
        """A new seat token: derived from the join's ``request_id``, else random."""
        if not request_id:
            return secrets.token_urlsafe(24)
        mac = hmac.new(self.key, f"{game_id}\0{seat}\0{request_id}".encode(),
                       hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:24]).decode()

    def add(self, digest: str, game_id: str, seat: int) -> None:
        """Know the token whose hash is ``digest`` as ``seat`` of ``game_id``."""
        owner = (game_id, seat)
        if self._seats.get(digest, owner) != owner:  # another seat's now: not as verified
            self.generation = next(_GENERATIONS)
        self._seats[digest] = owner
        self._by_table.setdefault(game_id, set()).add(digest)

    def revoke(self, game_id: str, seat: int) -> list[str]:
        """Revoke every token of ``seat`` of ``game_id``; the hashes revoked (sorted)."""
        revoked = sorted(digest for digest in self._by_table.get(game_id, ())
                         if self._seats.get(digest) == (game_id, seat))
        for digest in revoked:
            self.add_revoked(digest, game_id)
        return revoked

    def add_revoked(self, digest: str, game_id: str, spectator: bool = False) -> None:
        """Know the token whose hash is ``digest`` as revoked at ``game_id`` (a seat's, or
        with ``spectator`` the table's former spectator token)."""
        self.generation = next(_GENERATIONS)
        self._seats.pop(digest, None)
        self._revoked[digest] = (game_id, spectator)
        self._by_table.setdefault(game_id, set()).add(digest)

    def forget(self, game_id: str) -> None:
        """Forget every token of a table (it left this server), revoked ones too."""
        self.generation = next(_GENERATIONS)
        for digest in self._by_table.pop(game_id, ()):
            if self._seats.get(digest, ("",))[0] == game_id:
                del self._seats[digest]
            if self._revoked.get(digest, ("",))[0] == game_id:
                del self._revoked[digest]

    def seat_of(self, session: Session, token: str | None,
                remembered: Remembered | None = None) -> int | None:
        """The caller's seat at ``session`` from its token; None for a spectator (no token).
        With ``remembered`` (the connection's memory of ``token``), a verification at this
        table since the last revocation is answered from it, and a new one is kept there
        (``tests/service/test_seat_tokens.py``: the same answers, refusals included)."""
        if remembered is not None and remembered.generation == self.generation \
                and remembered.token is token and remembered.game_id == session.game_id:
            return remembered.seat
        if remembered is None or token is None:
            return self._seat_of(session, token)
        seat = self._seat_of(session, token)
        assert seat is not None
        remembered.token, remembered.game_id, remembered.seat = token, session.game_id, seat
        remembered.generation = self.generation
        return seat

    def _seat_of(self, session: Session, token: str | None) -> int | None:
        """``seat_of`` looked up: the token's hash in the registry."""
        if token is None:
            return None
        digest = token_hash(token)
        owner = self._seats.get(digest)
        if owner is None:
            revoked_at = self._revoked.get(digest)
            if revoked_at is not None and revoked_at[0] == session.game_id:
                raise revoked(revoked_at[1])
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN",
                               "this seat token is not valid on this server")
        if owner[0] != session.game_id:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "TOKEN_FOR_ANOTHER_GAME",
                               "this seat token belongs to another game")
        return owner[1]
