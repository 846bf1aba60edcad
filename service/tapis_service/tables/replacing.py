"""ReplaceSeat (issue 24.5): a backend gives a person's seat of its table to another holder.

The seat's former token is revoked at once: its calls are refused UNAUTHENTICATED /
TOKEN_REVOKED and its open streams end so, after what was published before. A bot plays the
seat (the engine's ``Replace`` takes it over) until the new holder sends ReclaimSeat, which its
legal actions offer; a free seat is taken by the replace. The new holder's token belongs to the
seat's next *generation* (``ownership.seat_token``), so a retried replace (the same request
id) answers the same token without storing it. Without a player_id the seat has no holder: the
bot keeps it for good, until another ReplaceSeat names a player.

Besides the engine's table, a replacement changes the seat's name, the player it is bound to,
its generation and the request ids answered (the former holder's SubmitAction request ids are
forgotten: a request id belongs to its sender, and the new holder's are its own): ``hand_over``
applies them, live and on replay alike (the journal entry carries them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.errors import ServiceError, failed_precondition, invalid_argument
from tapis_service.tables.ownership import seat_token
from tapis_service.tables.session import HANDED_OVER, Applied, Session


@dataclass(frozen=True, slots=True)
class Replacement:
    """A seat's new holder: its generation, the backend's player ("": none), its name."""

    seat: int
    generation: int
    player_id: str
    name: str

    def entry(self) -> dict[str, Any]:
        """What the journal entry of the ``Replace`` input adds."""
        return {"player_id": self.player_id, "name": self.name, "generation": self.generation}

    @classmethod
    def of_entry(cls, seat: int, entry: dict[str, Any]) -> Replacement:
        return cls(seat, int(entry["generation"]), str(entry.get("player_id", "")),
                   str(entry.get("name", "")))

    def token(self, key: bytes, game_id: str) -> str:
        """The new holder's seat token ("" when the seat has no holder)."""
        return seat_token(key, game_id, self.seat, self.generation) if self.player_id else ""

    def to_proto(self, key: bytes, game_id: str) -> pb.SeatToken:
        return pb.SeatToken(seat=self.seat, seat_token=self.token(key, game_id),
                            player_id=self.player_id)


def _refused(message: str) -> ServiceError:
    return invalid_argument("INVALID_SEAT_CONFIG", message)


def replacement(session: Session, seat: int, player_id: str, name: str) -> Replacement:
    """The replacement a ReplaceSeat asks for, checked against the table (the engine refuses
    the rest: an abandoned table)."""
    table = session.table
    if not table.abandoned and table.game_over(session.rules) \
            and session.ownership.series_over(table.game_number):
        raise failed_precondition("SERIES_OVER", "the table's series is over: its seats are "
                                  "no longer played")
    seats = table.seats
    if seat >= len(seats):
        raise _refused(f"this table has no seat {seat}")
    if seats[seat].bot is not None:
        raise _refused(f"seat {seat} is a server bot's: it has no holder to replace")
    if name and not player_id:
        raise _refused("a display_name goes with the player_id it names")
    held = session.ownership.player_ids
    if player_id and any(other == player_id and index != seat
                         for index, other in enumerate(held)):
        raise _refused(f"player {player_id!r} holds another seat of this table")
    return Replacement(seat, session.generations.get(seat, 0) + 1, player_id,
                       name or player_id)


def hand_over(session: Session, replaced: Replacement, request_id: str,
              applied: Applied) -> None:
    """The seat's new holder, as the session keeps it (beside the engine's table), once
    ``applied`` (its ``Replace``) gave it the seat."""
    seat = replaced.seat
    session.name_holder(seat, replaced.name, applied)
    session.ownership = session.ownership.holding(seat, replaced.player_id, replaced.name,
                                                  len(session.table.seats))
    session.generations[seat] = replaced.generation
    session.request_ids.pop(seat, None)  # the former holder's answers are not the new one's
    joins = session.join_requests  # nor its joins: a retry must not get the seat's view
    for key in [key for key, held in joins.items() if held == seat]:
        joins[key] = HANDED_OVER
    if request_id:
        session.replace_requests[request_id] = replaced
