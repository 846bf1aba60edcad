"""The table's own events and records as protobuf messages (not a game's: nothing of them is
hidden from anyone), shared by the converters (``convert``) and the hand encoder (``wire``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import fairness
from tapis_engine import table as tbl

if TYPE_CHECKING:  # the codec reads a table's session; it runs nothing of tables/
    from tapis_service.tables.session import Session


def summaries(session: Session, records: tuple[tbl.GameRecord, ...]) -> list[pb.GameSummary]:
    setup = session.table.setup
    return [pb.GameSummary(game_number=r.number, winners=r.winners, scores=r.scores,
                           summary=r.summary, seed=r.seed,
                           seed_salt=fairness.seed_salt(setup, r.number),
                           seed_commitment=fairness.seed_commitment(setup, r.number))
            for r in records]


def scoreboard(seats: int, records: tuple[tbl.GameRecord, ...]) -> pb.Scoreboard:
    board = tbl.scoreboard(seats, records)
    return pb.Scoreboard(wins=board.wins, draws=board.draws, games_played=board.games)


TABLE_EVENTS = (tbl.SeatClaimed, tbl.GameStarted, tbl.GameAbandoned, tbl.SeatTakenOver,
                tbl.SeatReclaimed, tbl.SeatReplaced, tbl.GameEnded, tbl.TurnTimersResumed)
"""The table's own events (not a game's): nothing of them is hidden from anyone."""
TABLE_EVENT_TYPES: Final = frozenset(TABLE_EVENTS)
"""The same classes, for ``type(body) in``: ``isinstance(body, TABLE_EVENTS)`` at a set
lookup's cost (isinstance tries the eight in turn, on every event encoded), equal as none of
them has a subclass (``tests/service/test_wire.py`` checks)."""


def table_body(session: Session, event: tbl.TableEvent) -> tuple[str, Message] | None:
    """A table-level event's body as its ``Event.body`` field and message (None: a game's).
    A SeatClaimed or SeatReplaced names the holder as of that event, not the seat's now."""
    body = event.body
    if isinstance(body, tbl.SeatClaimed):
        return "seat_claimed", pb.SeatClaimed(
            seat=body.seat, display_name=session.holder_names.get(event.sequence, ""))
    if isinstance(body, tbl.GameStarted):
        return "game_started", pb.GameStarted(game_number=body.number, seats=body.seats,
                                              seed_commitment=body.seed_commitment)
    if isinstance(body, tbl.GameAbandoned):
        return "game_abandoned", pb.GameAbandoned(
            game_number=body.number, reason=pb.ABANDON_REASON_ENDED_BY_BACKEND
            if session.ended_by_backend else pb.ABANDON_REASON_IDLE)
    if isinstance(body, tbl.SeatTakenOver):
        return "seat_taken_over", pb.SeatTakenOver(seat=body.seat,
                                                   until_reclaimed=body.until_reclaimed)
    if isinstance(body, tbl.SeatReclaimed):
        return "seat_reclaimed", pb.SeatReclaimed(seat=body.seat)
    if isinstance(body, tbl.SeatReplaced):
        return "seat_replaced", pb.SeatReplaced(
            seat=body.seat, display_name=session.holder_names.get(event.sequence, ""))
    if isinstance(body, tbl.GameEnded):
        return "game_ended", pb.GameEnded(
            game_number=body.number, winners=body.outcome.winners,
            scores=body.outcome.scores, summary=body.outcome.summary,
            series=summaries(session, body.records),
            scoreboard=scoreboard(len(session.table.seats), body.records))
    if isinstance(body, tbl.TurnTimersResumed):
        return "turn_timers_resumed", pb.TurnTimersResumed(deadlines=deadlines(body.deadlines))
    return None


def deadlines(pairs: tuple[tuple[int, int], ...]) -> list[pb.Deadline]:
    """``Table.deadlines`` (seat, ms) as the contract's ``Deadline`` messages (the view's and
    ``TurnTimersResumed``'s)."""
    return [pb.Deadline(seat=seat, expire_time=timestamp(at)) for seat, at in pairs]


def timestamp(ms: int) -> Timestamp:
    """Milliseconds since the epoch as a protobuf ``Timestamp``."""
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp
