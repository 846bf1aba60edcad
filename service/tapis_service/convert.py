"""Protobuf <-> domain for the table-level messages (the per-game parts are in ``adapters``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.errors import Reason, invalid
from tapis_engine.protocol import Rules
from tapis_engine.registry import rules_for
from tapis_service import wire
from tapis_service.adapters import ADAPTERS, BY_PROTO_KIND
from tapis_service.adapters.cards import card_from_proto
from tapis_service.errors import ServiceError, failed_precondition, invalid_argument
from tapis_service.limits import check_stacked_deck, check_text, quote
from tapis_service.session import LoggedEvent, Session
from tapis_service.wire import varint


def seat_range(rules: Rules[Any, Any, Any]) -> str:
    """How many players a game takes, in words: "exactly 2", "2 to 6"."""
    if rules.min_seats == rules.max_seats:
        return f"exactly {rules.min_seats}"
    return f"{rules.min_seats} to {rules.max_seats}"


def check_id(value: str, what: str) -> str:
    """An id or name from a request: at most ``limits.MAX_TEXT_BYTES`` (VALUE_TOO_LONG)."""
    return check_text(value, what)


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def create_arguments(request: pb.CreateGameRequest,
                     allow_chosen_deals: bool = True) -> dict[str, Any]:
    """The host's ``create`` arguments from a CreateGameRequest (refusals raise).

    A stacked deck or a chosen seed is refused first when ``allow_chosen_deals`` is off, and a
    deck longer than the game's is refused before a single card is converted.
    """
    if request.kind == pb.GAME_KIND_UNSPECIFIED:
        raise invalid_argument("INVALID_GAME_KIND", "name the game kind")
    adapter = BY_PROTO_KIND.get(request.kind)
    if adapter is None:
        if request.kind in pb.GameKind.values():
            raise ServiceError(grpc.StatusCode.UNIMPLEMENTED, "GAME_KIND_NOT_AVAILABLE",
                               f"{pb.GameKind.Name(request.kind)} is not available yet")
        raise invalid_argument("INVALID_GAME_KIND", f"unknown game kind {request.kind}")
    deck_length = len(request.stacked_deck)
    if not allow_chosen_deals:
        if deck_length:
            raise failed_precondition(
                "STACKED_DECKS_DISABLED",
                "stacked decks are only accepted by a server started with --allow-stacked-decks")
        if request.HasField("seed"):
            raise failed_precondition(
                "SEED_CHOICE_DISABLED",
                "a chosen seed is only accepted by a server started with --allow-stacked-decks; "
                "leave it out and the server draws one (and commits to it)")
    check_stacked_deck(adapter.kind, deck_length)
    rules = rules_for(adapter.kind)
    assert rules is not None
    seats = request.seats or rules.min_seats
    if not rules.min_seats <= seats <= rules.max_seats:
        raise invalid(Reason.INVALID_SEAT_COUNT, f"this game is for {seat_range(rules)} players")
    if len(request.seat_configs) > seats:
        raise invalid(Reason.INVALID_SEAT_COUNT, "more seat configs than seats")
    bots: list[str | None] = []
    for config in list(request.seat_configs) + [pb.SeatConfig()] * (
            seats - len(request.seat_configs)):
        if config.type == pb.SEAT_TYPE_BOT:
            strategy = config.bot_strategy or rules.bot_strategies[0]
            if strategy not in rules.bot_strategies:
                raise invalid(Reason.INVALID_OPTIONS,
                              f"unknown bot {quote(strategy)}; this game has "
                              f"{', '.join(rules.bot_strategies)}")
            bots.append(strategy)
        else:
            if config.bot_strategy:
                raise invalid(Reason.INVALID_OPTIONS, "only a bot seat takes a bot strategy")
            bots.append(None)
    chosen = request.WhichOneof("options")
    if chosen is not None and chosen != adapter.field:
        raise invalid(Reason.WRONG_GAME_KIND, f"{chosen} options given for a {adapter.field} game")
    options = adapter.options_from_proto(getattr(request, chosen) if chosen else None)
    stacked = tuple(card_from_proto(c) for c in request.stacked_deck) or None
    first = request.stacked_first_seat if request.HasField("stacked_first_seat") else None
    if first is not None and stacked is None:
        raise invalid(Reason.INVALID_STACKED_DECK, "stacked_first_seat needs a stacked deck")
    return {
        "kind": adapter.kind,
        "seats": seats,
        "seed": request.seed if request.HasField("seed") else None,
        "turn_time_ms": request.turn_time_limit_ms,
        "bots": bots,
        "options": options,
        "stacked_deck": stacked,
        "stacked_first": first,
        "request_id": check_id(request.request_id, "request_id"),
    }


def move_from_proto(session: Session, seat: int, action: pb.Action) -> tbl.Input:
    """The table input for a person's action."""
    which = action.WhichOneof("action")
    if which is None:
        raise invalid(Reason.INVALID_ACTION, "the action is empty")
    if which == "reclaim_seat":
        return tbl.Reclaim(seat)
    if which == "start_next_game":
        return tbl.NextGame(seat)
    if which != session.adapter.field:
        raise invalid(Reason.WRONG_GAME_KIND,
                      f"a {which} action was sent to a {session.adapter.field} game")
    return tbl.Act(seat, session.adapter.action_from_proto(getattr(action, which)))


def action_to_proto(session: Session, action: Any) -> pb.Action:
    message = pb.Action()
    getattr(message, session.adapter.field).CopyFrom(session.adapter.action_to_proto(action))
    return message


def _summaries(session: Session, records: tuple[tbl.GameRecord, ...]) -> list[pb.GameSummary]:
    setup = session.table.setup
    return [pb.GameSummary(game_number=r.number, winners=r.winners, scores=r.scores,
                           summary=r.summary, seed=r.seed,
                           seed_salt=tbl.seed_salt(setup, r.number),
                           seed_commitment=tbl.seed_commitment(setup, r.number))
            for r in records]


def fairness(session: Session) -> pb.Fairness:
    """The commitment to the seed of the game in play, revealed once it is over."""
    table = session.table
    setup = table.setup
    message = pb.Fairness(deal_chosen=setup.deal_chosen)
    number = table.game_number
    if number:
        message.seed_commitment = tbl.seed_commitment(setup, number)
        if table.game_over(session.rules):
            message.seed = tbl.game_seed(setup, number)
            message.seed_salt = tbl.seed_salt(setup, number)
    return message


def _scoreboard(seats: int, records: tuple[tbl.GameRecord, ...]) -> pb.Scoreboard:
    board = tbl.scoreboard(seats, records)
    return pb.Scoreboard(wins=board.wins, draws=board.draws, games_played=board.games)


def status(session: Session) -> int:
    table = session.table
    if table.abandoned:
        return pb.GAME_STATUS_ABANDONED
    if not table.started:
        return pb.GAME_STATUS_WAITING_FOR_PLAYERS
    if table.game_over(session.rules):
        return pb.GAME_STATUS_GAME_OVER
    return pb.GAME_STATUS_IN_PROGRESS


def _seats(session: Session) -> list[pb.Seat]:
    return [pb.Seat(seat=i, type=pb.SEAT_TYPE_PERSON if s.bot is None else pb.SEAT_TYPE_BOT,
                    taken=s.claimed, bot_controlled=s.bot_controlled,
                    bot_strategy=s.bot or "", display_name=session.names[i])
            for i, s in enumerate(session.table.seats)]


def settings(session: Session) -> pb.GameSettings:
    table = session.table
    message = pb.GameSettings(seats=len(table.seats), turn_time_limit_ms=table.turn_time_ms,
                              stacked_deck=table.setup.stacked_deck is not None)
    getattr(message, session.adapter.field).CopyFrom(
        session.adapter.options_to_proto(table.setup.options))
    return message


def view(session: Session, seat: int | None) -> pb.GameView:
    """The caller's view of the table."""
    table = session.table
    message = pb.GameView(
        game_id=session.game_id,
        kind=session.adapter.proto_kind,  # type: ignore[arg-type]
        status=status(session),  # type: ignore[arg-type]
        version=table.version,
        last_sequence=session.last_sequence,
        game_number=table.game_number,
        your_seat=seat,
        seats=_seats(session),
        scoreboard=_scoreboard(len(table.seats), table.records),
        series=_summaries(session, table.records),
        awaiting_seats=session.awaiting(),
        deadlines=[pb.Deadline(seat=s, expire_time=_timestamp(at)) for s, at in table.deadlines],
        settings=settings(session),
        fairness=fairness(session),
    )
    if table.state is not None:
        rules = session.rules
        getattr(message, session.adapter.field).CopyFrom(
            session.adapter.view_to_proto(rules.view(table.state, seat)))
        if seat is not None:
            slot = table.seats[seat]
            if table.abandoned:
                pass
            elif table.game_over(rules):
                message.legal_actions.append(pb.Action(start_next_game=pb.StartNextGame()))
            elif slot.taken_over:
                message.legal_actions.append(pb.Action(reclaim_seat=pb.ReclaimSeat()))
            elif slot.bot is None:
                message.legal_actions.extend(
                    action_to_proto(session, a) for a in rules.legal_actions(table.state, seat))
    return message


def _table_body(session: Session, body: Any) -> tuple[str, Message] | None:
    """A table-level event body as its ``Event.body`` field and message (None: a game's)."""
    if isinstance(body, tbl.SeatClaimed):
        return "seat_claimed", pb.SeatClaimed(seat=body.seat,
                                              display_name=session.names[body.seat])
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
    if isinstance(body, tbl.GameEnded):
        return "game_ended", pb.GameEnded(
            game_number=body.number, winners=body.outcome.winners,
            scores=body.outcome.scores, summary=body.outcome.summary,
            series=_summaries(session, body.records),
            scoreboard=_scoreboard(len(session.table.seats), body.records))
    return None


def event(session: Session, logged: LoggedEvent, seat: int | None) -> pb.Event:
    """One logged event as ``seat`` may see it (``event_wire`` writes its bytes)."""
    e = logged.event
    message = pb.Event(sequence=e.sequence, game_number=e.game_number, version=logged.version,
                       awaiting_seats=logged.awaiting)
    stamp = message.time  # Timestamp.FromMilliseconds, without its pure-Python checks
    stamp.seconds, millis = divmod(logged.time_ms, 1000)
    stamp.nanos = millis * 1_000_000
    table_body = _table_body(session, e.body)
    if table_body is not None:
        name, body = table_body
        getattr(message, name).CopyFrom(body)
    else:
        redacted = session.rules.redact(e.body, seat)
        getattr(message, session.adapter.field).CopyFrom(
            session.adapter.event_to_proto(redacted))
    return message


_EVENT = pb.Event.DESCRIPTOR
_K_SEQUENCE = wire.tag(_EVENT, "sequence")
_K_GAME_NUMBER = wire.tag(_EVENT, "game_number")
_K_VERSION = wire.tag(_EVENT, "version")
_K_AWAITING = wire.tag(_EVENT, "awaiting_seats")
_K_TIME = wire.tag(_EVENT, "time")
_K_SECONDS = wire.tag(Timestamp.DESCRIPTOR, "seconds")
_K_NANOS = wire.tag(Timestamp.DESCRIPTOR, "nanos")
_K_BODY = {field.name: wire.tag(_EVENT, field.name)
           for field in _EVENT.oneofs_by_name["body"].fields}
_AWAITING: dict[tuple[int, ...], bytes] = {}
"""Awaited seats -> their encoded field (a handful of distinct tuples per game kind)."""
_NANOS = tuple(wire.uint(_K_NANOS, millis * 1_000_000) for millis in range(1000))
_TABLE_EVENTS = (tbl.SeatClaimed, tbl.GameStarted, tbl.GameAbandoned, tbl.SeatTakenOver,
                 tbl.SeatReclaimed, tbl.GameEnded)
_last_seconds: tuple[int, bytes] = (0, b"")
"""The last ``Timestamp.seconds`` encoded, and its field (the same for a second at a time)."""
_last_time: tuple[int, bytes] = (0, wire.nested(_K_TIME, b""))
"""The last ``Event.time`` encoded (an action's events share it)."""


def _time_wire(time_ms: int) -> bytes:
    """``Event.time``: a ``Timestamp`` of ``time_ms``."""
    global _last_seconds, _last_time
    last_ms, field = _last_time
    if time_ms == last_ms:
        return field
    seconds, millis = divmod(time_ms, 1000)
    last, encoded = _last_seconds
    if seconds != last:
        encoded = _K_SECONDS + wire.int64(seconds) if seconds else b""
        _last_seconds = (seconds, encoded)
    field = wire.nested(_K_TIME, encoded + _NANOS[millis])
    _last_time = (time_ms, field)
    return field


def event_wire(session: Session, logged: LoggedEvent, seat: int | None) -> bytes:
    """``event(session, logged, seat).SerializeToString()``, written by hand (the envelope,
    and the game's body when its adapter writes it by hand)."""
    e = logged.event
    awaiting = logged.awaiting
    awaited = _AWAITING.get(awaiting)
    if awaited is None:
        awaited = _AWAITING[awaiting] = wire.packed(_K_AWAITING, awaiting)
    body = e.body
    table_body = _table_body(session, body) if isinstance(body, _TABLE_EVENTS) else None
    if table_body is None:
        adapter = session.adapter
        rules = session.rules
        framed = wire.nested(_K_BODY[adapter.field], adapter.event_wire(
            rules.redact(body, seat) if rules.hides_events else body))
    else:
        name, message = table_body
        framed = wire.nested(_K_BODY[name], message.SerializeToString())
    number, version = e.game_number, logged.version
    return b"".join((
        _K_SEQUENCE, varint(e.sequence),  # every event has a sequence (from 1)
        _K_GAME_NUMBER + varint(number) if number else b"",
        _K_VERSION + varint(version) if version else b"",
        awaited, _time_wire(logged.time_ms), framed))


PUBLIC = -1
"""The view key of an event every recipient sees alike (seat events, and game events that
``redact`` gives back unchanged): converted and serialized once for everyone."""
_TABLE_BODIES = (tbl.SeatClaimed, tbl.GameStarted, tbl.SeatTakenOver, tbl.SeatReclaimed,
                 tbl.GameEnded)
STREAM_EVENTS_TAG = b"\x0a"
"""``StreamEventsResponse.events`` (field 1, length-delimited): a serialized response is these
framed events one after the other."""
ANSWER_VERSION_TAG = b"\x08"
"""``SubmitActionResponse.version`` (field 1, varint)."""
ANSWER_EVENTS_TAG = b"\x12"
"""``SubmitActionResponse.events`` (field 2, length-delimited)."""


def _seen_alike(rules: Rules[Any, Any, Any], body: Any, seat: int | None) -> bool:
    """Whether every recipient sees ``body`` as ``seat`` does (nothing of it is hidden)."""
    return not rules.hides_events or isinstance(body, _TABLE_BODIES) \
        or rules.redact(body, seat) is body


def view_key(session: Session, logged: LoggedEvent, seat: int | None) -> int | None:
    """Whose view of the event ``seat`` gets: ``PUBLIC`` when everyone sees it alike."""
    return PUBLIC if _seen_alike(session.rules, logged.event.body, seat) else seat


_VIEW_BITS = 4
"""Low bits of a ``wire_key`` for the view: public, a spectator, or one of up to 14 seats."""


def wire_key(sequence: int, view: int | None) -> int:
    """The ``Session.wire`` key of an event's frame for a view (``PUBLIC``, a spectator, a
    seat): ordered by sequence, public first."""
    return sequence << _VIEW_BITS | (0 if view == PUBLIC else 1 if view is None else view + 2)


def framed_event(session: Session, logged: LoggedEvent, seat: int | None) -> bytes:
    """``event`` as ``seat`` sees it, serialized and framed as one entry of
    ``StreamEventsResponse.events``: converted once per recipient view (once for everyone
    when public) and shared by every stream of that view, the SubmitAction answer and the
    compaction (``Session.wire``, emptied as the events leave the live log)."""
    e = logged.event
    if _seen_alike(session.rules, e.body, seat):
        key = e.sequence << _VIEW_BITS  # wire_key, inlined: PUBLIC
    else:
        key = e.sequence << _VIEW_BITS | (1 if seat is None else seat + 2)
    framed = session.wire.get(key)
    if framed is None:
        raw = event_wire(session, logged, seat)
        framed = STREAM_EVENTS_TAG + varint(len(raw)) + raw
        events = session.events
        if events and e.sequence >= events[0].event.sequence:  # live log only
            session.wire[key] = framed
    return framed


def events_wire(session: Session, batch: Sequence[LoggedEvent], seat: int | None) -> bytes:
    """One serialized ``StreamEventsResponse`` for a run of events, as ``seat`` sees them."""
    if len(batch) == 1:
        return framed_event(session, batch[0], seat)
    return b"".join([framed_event(session, logged, seat) for logged in batch])


def answer_wire(session: Session, version: int, batch: Sequence[LoggedEvent],
                seat: int | None, earlier: Sequence[bytes] = ()) -> bytes:
    """The serialized ``SubmitActionResponse``, built from the events the fan-out framed
    (after ``earlier``: frames of compacted events, for a retried answer)."""
    parts = [ANSWER_VERSION_TAG, varint(version)] if version else []
    for frame in earlier:
        parts.append(ANSWER_EVENTS_TAG)
        parts.append(frame[1:])
    for logged in batch:
        parts.append(ANSWER_EVENTS_TAG)
        parts.append(framed_event(session, logged, seat)[1:])
    return b"".join(parts)


def listing(session: Session) -> pb.GameListing:
    table = session.table
    return pb.GameListing(
        game_id=session.game_id,
        kind=session.adapter.proto_kind,  # type: ignore[arg-type]
        status=status(session),  # type: ignore[arg-type]
        seats=len(table.seats),
        open_seats=[i for i, s in enumerate(table.seats) if not s.claimed],
        game_number=table.game_number,
        create_time=_timestamp(session.created_ms),
        display_names=list(session.names),
    )


def quarantined_listing(game_id: str, kind: str) -> pb.GameListing:
    """The ListGames line of a quarantined table (its records are damaged: only its id and,
    when it could be read, its kind)."""
    adapter = ADAPTERS.get(kind)
    return pb.GameListing(game_id=game_id, status=pb.GAME_STATUS_QUARANTINED,
                          kind=adapter.proto_kind if adapter  # type: ignore[arg-type]
                          else pb.GAME_KIND_UNSPECIFIED)


def kind_of(proto_kind: int) -> str | None:
    adapter = BY_PROTO_KIND.get(proto_kind)
    return adapter.kind if adapter else None

