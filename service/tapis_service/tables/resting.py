"""Tables at rest: finished tables that left memory while the store keeps them.

A finished table nobody watches leaves memory as soon as its last input commits, or its last
stream ends (``Shelf.rest_if_done``); at start, a table recovered finished rests at once; one
loaded back by a call rests at the second housekeeping sweep after its last use
(``Shelf.rest_idle``). The store keeps its records and, beside them, its listing (the
``ListGames`` line, a small JSON object: ``listing_of``); the host keeps only that line
(``RestingTable``). The next call that needs the table (``GetGame``, ``JoinGame``, a retried
request id, ``StreamEvents``, ``StartNextGame``, a retried ``CreateGame``) loads it back from
the store (snapshot-checked journal replay, as after a restart), and its first input clears the
listing in the store again, so a restart loads it (it may have bots or timers then). A restart
reads only the listings of resting tables: start-up time and memory follow the tables that must
run, not the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec import convert
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.door.api_keys import Backend
from tapis_service.tables.ownership import sorted_labels
from tapis_service.tables.session import Session

JSON = dict[str, Any]


def listing_of(session: Session) -> JSON:
    """The stored listing of a table about to rest (what ``ListGames`` shows of it)."""
    table = session.table
    return {"kind": session.rules.kind,
            "status": pb.GameStatus.Name(convert.status(session)),  # type: ignore[arg-type]
            "seats": len(table.seats),
            "open_seats": [i for i, s in enumerate(table.seats) if not s.claimed],
            "game_number": table.game_number, "created_ms": session.created_ms,
            "names": list(session.names),
            "bots": [i for i, s in enumerate(table.seats) if s.bot is not None],
            "request_id": session.create_request_id,
            "backend": session.ownership.backend, "private": session.ownership.private,
            **({"labels": dict(session.ownership.labels)} if session.ownership.labels else {})}


@dataclass(frozen=True, slots=True)
class RestingTable:
    """What the host keeps of a table at rest: its ``ListGames`` line and what orders it."""

    kind: str
    created_ms: int
    request_id: str
    """Its CreateGame request id ("" for none): a retry loads the table back."""
    listing: bytes
    """Its serialized ``GameListing`` (as bytes: about 40 bytes where a message object
    takes about 900)."""
    backend: str | None = None
    """The backend that created it (None: created without a key)."""
    private: bool = False
    """Listed to its backend only."""
    epoch: int = 1
    """The fencing epoch this server holds the table at (a cluster node: it stays the owner;
    a call loads it back through the locator, confirmed at this epoch)."""
    labels: tuple[tuple[str, str], ...] = ()
    """Its backend's labels (listed to that backend only)."""

    def listed_to(self, backend: Backend | None) -> bool:
        """ListGames shows the table to this caller (as ``Ownership.listed_to``)."""
        return not self.private or (backend is not None and self.backend == backend.name)

    def to_proto(self, backend: Backend | None = None) -> pb.GameListing:
        """Its ``ListGames`` line as ``backend`` sees it (the labels to its own backend)."""
        line = pb.GameListing.FromString(self.listing)
        if self.labels and backend is not None and self.backend == backend.name:
            line.labels.update(self.labels)
        return line

    @classmethod
    def of(cls, game_id: str, stored: JSON, epoch: int = 1) -> RestingTable:
        """From a stored listing (``listing_of``); ``KeyError``/``ValueError``/``TypeError``
        when it cannot be read (the host then loads the table itself)."""
        kind = str(stored["kind"])
        created_ms = int(stored["created_ms"])
        stamp = Timestamp()
        stamp.FromMilliseconds(created_ms)
        listing = pb.GameListing(
            game_id=game_id, kind=ADAPTERS[kind].proto_kind,  # type: ignore[arg-type]
            status=pb.GameStatus.Value(str(stored["status"])),
            seats=int(stored["seats"]), open_seats=[int(s) for s in stored["open_seats"]],
            game_number=int(stored["game_number"]), create_time=stamp,
            display_names=[str(n) for n in stored["names"]],
            seat_types=_seat_types(int(stored["seats"]), stored.get("bots")))
        owner = stored.get("backend")
        return cls(kind, created_ms, str(stored.get("request_id") or ""),
                   listing.SerializeToString(), None if owner is None else str(owner),
                   bool(stored.get("private", False)), epoch,
                   sorted_labels(stored.get("labels") or {}))


def _seat_types(seats: int, bots: Any) -> list[pb.SeatType.ValueType]:
    """Each seat's ``SeatType`` from a stored listing's bot seats; none (unknown) for a listing
    stored before it held them."""
    if bots is None:
        return []
    bot_seats = {int(seat) for seat in bots}
    return [pb.SEAT_TYPE_BOT if seat in bot_seats else pb.SEAT_TYPE_PERSON
            for seat in range(seats)]


def restable(session: Session) -> bool:
    """A table that may leave memory: finished, nobody watching, nothing in flight, every
    event committed and published, no timer armed."""
    return (session.table.game_over(session.rules) and not session.subscribers
            and not session.pending and not session.writes and not session.bot_timers
            and not session.deadline_timers
            and session.durable_sequence >= session.last_sequence
            and session.published_sequence >= session.last_sequence)
