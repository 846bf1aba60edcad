"""Whose a table is, and what that allows (issue 24.3-24.5): its backend, its visibility, the
players its seats are reserved for, its series length, its bots' reaction time.

A table created with a backend key belongs to that backend: private unless it asks for public,
its person seats that name a ``player_id`` reserved (bound at creation, their tokens returned at
once, never free for JoinGame), its names the backend's. A table created without a key belongs
to nobody and is public (today's lobby). ``Ownership`` is plain data kept in the table's
creation record (``encode``/``decode``); the checks below decide from it alone.

Tokens the backend receives are HMACs under the server's join key (as retried joins' are): the
same table, seat and *generation* give the same token, so a retried create or replace answers
the same token without storing it; ``ReplaceSeat`` moves the seat to its next generation, which
revokes the former token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.api_keys import Backend, require
from tapis_service.observe.errors import ServiceError, failed_precondition, invalid_argument

PUBLIC = "public"
PRIVATE = "private"
MAX_ID_BYTES = 128
RESERVED_REQUEST = "\0reserved:"
"""The JoinGame request id under which a reserved seat is claimed at creation (``\0`` and the
seat): a retried create claims it again harmlessly, and JoinGame refuses such ids."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """What the backend decided about a table at its creation."""

    backend: str | None = None
    """The backend's name; None: created without a key."""
    visibility: str = PUBLIC
    player_ids: tuple[str, ...] = ()
    """Per seat: the backend's player it is reserved for ("" : none)."""
    names: tuple[str, ...] = ()
    """Per seat: the name the backend gave ("" : none)."""
    series_length: int = 0
    """Games in the series (0: open-ended)."""
    labels: tuple[tuple[str, str], ...] = ()
    """The backend's labels (key, value), sorted by key: given back to the backend only."""
    bot_reaction_ms: int | None = None
    """The median reaction time of the table's server bots (None: the server's
    ``--bot-delay-ms``); any creator may choose it, with or without a key."""

    @property
    def private(self) -> bool:
        return self.visibility == PRIVATE

    def reserved(self, seat: int) -> bool:
        return seat < len(self.player_ids) and bool(self.player_ids[seat])

    def reserved_seats(self) -> list[int]:
        return [seat for seat, player in enumerate(self.player_ids) if player]

    def belongs_to(self, backend: Backend | None) -> bool:
        return backend is not None and self.backend == backend.name

    def listed_to(self, backend: Backend | None) -> bool:
        """ListGames shows the table (its id, its names) to this caller."""
        return not self.private or self.belongs_to(backend)

    def check_backend(self, backend: Backend | None, what: str) -> Backend:
        """A backend call on this table: the caller must be its backend."""
        caller = require(backend, what)
        if self.backend != caller.name:
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE",
                               f"{what}: this table is not one your backend created")
        return caller

    def check_join(self, seat: int | None, backend: Backend | None) -> None:
        """JoinGame of ``seat`` (None: the first free one) by this caller."""
        if self.private and not self.belongs_to(backend):
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE",
                               "this table is private: its backend gives its seats")
        if seat is not None and self.reserved(seat):
            raise failed_precondition("SEAT_RESERVED",
                                      f"seat {seat} is reserved for a player of the backend")

    def check_watch(self, spectator: bool, backend: Backend | None) -> None:
        """A view without a seat token: anyone on a public table; on a private one, its
        backend or a spectator token."""
        if self.private and not spectator and not self.belongs_to(backend):
            raise ServiceError(grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE",
                               "this table is private: watching it needs a spectator token")

    def check_next_game(self, games_played: int) -> None:
        """StartNextGame after ``games_played`` games."""
        if self.series_length and games_played >= self.series_length:
            raise failed_precondition("SERIES_OVER",
                                      f"the series' {self.series_length} games are played")

    def series_over(self, games_played: int) -> bool:
        return bool(self.series_length) and games_played >= self.series_length

    def label(self, backend: Backend | None, labels: MutableMapping[str, str]) -> None:
        """Fill ``labels`` (a view's, a listing's) with the table's, when ``backend`` is the
        table's: nobody else sees them."""
        if self.labels and self.belongs_to(backend):
            labels.update(self.labels)

    def annotate(self, view: pb.GameView) -> pb.GameView:
        """Add to a view what the table's ownership says: reserved seats, visibility, series
        length, and no next game once the series is over (``convert.status`` says
        GAME_STATUS_SERIES_OVER then)."""
        for seat in self.reserved_seats():
            if seat < len(view.seats):
                view.seats[seat].reserved = True
        view.settings.visibility = (pb.VISIBILITY_PRIVATE if self.private
                                    else pb.VISIBILITY_PUBLIC)
        view.settings.series_length = self.series_length
        if self.bot_reaction_ms is not None:
            view.settings.bot_reaction_ms = self.bot_reaction_ms
        if view.status == pb.GAME_STATUS_SERIES_OVER:
            del view.legal_actions[:]
        return view

    def holding(self, seat: int, player_id: str, name: str, seats: int) -> Ownership:
        """The same, with ``seat`` bound to ``player_id`` ("": to nobody) under ``name``
        (ReplaceSeat)."""
        players = list(self.player_ids or [""] * seats)
        names = list(self.names or [""] * seats)
        players[seat], names[seat] = player_id, name if player_id else ""
        if not any(players):
            return replace(self, player_ids=(), names=())
        return replace(self, player_ids=tuple(players), names=tuple(names))

    def encode(self) -> dict[str, Any]:
        encoded: dict[str, Any] = {"backend": self.backend, "visibility": self.visibility,
                                   "player_ids": list(self.player_ids),
                                   "names": list(self.names),
                                   "series_length": self.series_length}
        if self.labels:  # a table without labels keeps the record it had before them
            encoded["labels"] = dict(self.labels)
        if self.bot_reaction_ms is not None:  # likewise
            encoded["bot_reaction_ms"] = self.bot_reaction_ms
        return encoded

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> Ownership:
        """From a creation record (None: a table from before ownership: nobody's, public)."""
        if not data:
            return cls()
        return cls(data.get("backend"), data.get("visibility", PUBLIC),
                   tuple(data.get("player_ids", ())), tuple(data.get("names", ())),
                   int(data.get("series_length", 0)), sorted_labels(data.get("labels") or {}),
                   None if data.get("bot_reaction_ms") is None
                   else int(data["bot_reaction_ms"]))


def sorted_labels(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Labels as ``Ownership`` keeps them (checked before: ``limits.check_labels``)."""
    return tuple(sorted((str(key), str(value)) for key, value in labels.items()))


def scope_of(backend: Backend | None) -> str:
    """Whose request ids a caller's are (issue 36.3): its backend's name, or "" for every
    caller without a key (one shared keyless scope, apart from every backend's: a backend's
    name is never empty). A request id is remembered and looked up within its scope only."""
    return "" if backend is None else backend.name


def _checked_id(value: str, what: str) -> str:
    if len(value.encode("utf-8")) > MAX_ID_BYTES:
        raise invalid_argument("VALUE_TOO_LONG", f"{what} is longer than {MAX_ID_BYTES} bytes")
    return value


def decide(request: pb.CreateGameRequest, seats: int, backend: Backend | None) -> Ownership:
    """The ownership a CreateGame asks for, checked: reserved seats and a private table need a
    backend key; a player is named once, on a person seat."""
    configs: Sequence[pb.SeatConfig] = request.seat_configs
    players = [_checked_id(c.player_id, "player_id") for c in configs] + [""] * (seats
                                                                               - len(configs))
    names = [_checked_id(c.display_name, "display_name") for c in configs] + [""] * (
        seats - len(configs))
    for config in configs:
        if config.display_name and not config.player_id:
            raise invalid_argument("INVALID_SEAT_CONFIG",
                                   "a display_name goes with the player_id it names")
        if config.player_id and config.type == pb.SEAT_TYPE_BOT:
            raise invalid_argument("INVALID_SEAT_CONFIG", "a bot seat has no player_id")
    named = [p for p in players if p]
    if len(set(named)) != len(named):
        raise invalid_argument("INVALID_SEAT_CONFIG", "a player_id is named twice")
    if named:
        require(backend, "reserving seats (player_id)")
    if request.visibility == pb.VISIBILITY_PRIVATE:
        require(backend, "a private table")
    if request.labels:
        require(backend, "labels")
    if backend is None:
        visibility = PUBLIC
    else:
        visibility = PUBLIC if request.visibility == pb.VISIBILITY_PUBLIC else PRIVATE
    return Ownership(None if backend is None else backend.name, visibility,
                     tuple(players) if named else (),
                     tuple(n or p for n, p in zip(names, players, strict=True)) if named
                     else (),
                     request.series_length, sorted_labels(request.labels),
                     request.bot_reaction_ms if request.HasField("bot_reaction_ms") else None)


def seat_token(join_key: bytes, game_id: str, seat: int, generation: int) -> str:
    """The token of a reserved seat at its ``generation`` (0 at creation, +1 per replace)."""
    mac = hmac.new(join_key, f"reserved\0{game_id}\0{seat}\0{generation}".encode(),
                   hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:24]).decode()


def spectator_token(join_key: bytes, game_id: str, generation: int = 0) -> str:
    """The spectator token of a table at its ``generation`` (0 at creation, +1 per
    RotateSpectatorToken): one at a time, whoever holds it may watch."""
    text = f"spectator\0{game_id}" + (f"\0{generation}" if generation else "")
    mac = hmac.new(join_key, text.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:24]).decode()


def is_spectator_token(join_key: bytes, game_id: str, token: str | None,
                       generation: int = 0) -> bool:
    """``token`` is the table's spectator token at ``generation`` (its current one)."""
    return token is not None and hmac.compare_digest(
        token.encode(), spectator_token(join_key, game_id, generation).encode())
