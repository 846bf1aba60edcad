"""Protobuf <-> domain for the table-level messages (the per-game parts are in ``adapters``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import fairness as seeds
from tapis_engine import table as tbl
from tapis_engine.cards import Card
from tapis_engine.errors import Reason, RuleError, invalid
from tapis_engine.protocol import Rules
from tapis_engine.registry import rules_for
from tapis_service.codec.adapters import ADAPTERS, BY_PROTO_KIND, GameAdapter
from tapis_service.codec.adapters.cards import card_from_proto
from tapis_service.codec.moves import move_from_proto as move_from_proto  # compiled (mypyc)
from tapis_service.codec.table_messages import (
    deadlines,
    scoreboard,
    summaries,
    table_body,
    timestamp,
)
from tapis_service.door.limits import MAX_BOT_REACTION_MS, check_stacked_deck, check_text, quote
from tapis_service.observe.errors import ServiceError, failed_precondition, invalid_argument

if TYPE_CHECKING:  # the codec reads a table's session; it runs nothing of tables/
    from tapis_service.tables.session import LoggedEvent, Session


def seat_range(rules: Rules[Any, Any, Any]) -> str:
    """How many players a game takes, in words: "exactly 2", "2 to 6"."""
    if rules.min_seats == rules.max_seats:
        return f"exactly {rules.min_seats}"
    return f"{rules.min_seats} to {rules.max_seats}"


def check_id(value: str, what: str) -> str:
    """An id or name from a request: at most ``limits.MAX_TEXT_BYTES`` (VALUE_TOO_LONG)."""
    return check_text(value, what)


def _adapter_of(proto_kind: pb.GameKind.ValueType) -> GameAdapter:
    """The adapter of a named game kind: INVALID_GAME_KIND for a number the contract does not
    define, GAME_KIND_NOT_AVAILABLE for a defined kind this server does not host."""
    adapter = BY_PROTO_KIND.get(proto_kind)
    if adapter is None:
        if proto_kind in pb.GameKind.values():
            raise ServiceError(grpc.StatusCode.UNIMPLEMENTED, "GAME_KIND_NOT_AVAILABLE",
                               f"{pb.GameKind.Name(proto_kind)} is not available yet")
        raise invalid_argument("INVALID_GAME_KIND", f"unknown game kind {proto_kind}")
    return adapter


def listed_kind(proto_kind: pb.GameKind.ValueType) -> str | None:
    """The engine kind a ListGames request filters on: None (every kind) when unspecified,
    refused as CreateGame refuses it when unknown (``_adapter_of``)."""
    if proto_kind == pb.GAME_KIND_UNSPECIFIED:
        return None
    return _adapter_of(proto_kind).kind


def _stacked_cards(request: pb.CreateGameRequest) -> tuple[Card, ...]:
    """The stacked deck's cards; a card that does not exist (rank 0, a joker with a suit...)
    is INVALID_STACKED_DECK, naming its position in the caller's own deck and nothing else."""
    cards = []
    for position, message in enumerate(request.stacked_deck):
        try:
            cards.append(card_from_proto(message))
        except RuleError as error:
            raise invalid(Reason.INVALID_STACKED_DECK,
                          f"stacked_deck[{position}]: {error.message}") from None
    return tuple(cards)


def create_arguments(request: pb.CreateGameRequest,
                     allow_chosen_deals: bool = True) -> dict[str, Any]:
    """The host's ``create`` arguments from a CreateGameRequest (refusals raise).

    A stacked deck or a chosen seed is refused first when ``allow_chosen_deals`` is off, and a
    deck longer than the game's is refused before a single card is converted.
    """
    if request.kind == pb.GAME_KIND_UNSPECIFIED:
        raise invalid_argument("INVALID_GAME_KIND", "name the game kind")
    adapter = _adapter_of(request.kind)
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
    if request.bot_reaction_ms > MAX_BOT_REACTION_MS:
        raise invalid(Reason.INVALID_OPTIONS, f"bot_reaction_ms is at most {MAX_BOT_REACTION_MS}")
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
    stacked = _stacked_cards(request) or None
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


def action_to_proto(session: Session, action: Any) -> pb.Action:
    message = pb.Action()
    getattr(message, session.adapter.field).CopyFrom(session.adapter.action_to_proto(action))
    return message


def fairness(session: Session) -> pb.Fairness:
    """The commitment to the seed of the game in play, revealed once it is over."""
    table = session.table
    setup = table.setup
    message = pb.Fairness(deal_chosen=setup.deal_chosen)
    number = table.game_number
    if number:
        message.seed_commitment = seeds.seed_commitment(setup, number)
        if table.game_over(session.rules):
            message.seed = seeds.game_seed(setup, number)
            message.seed_salt = seeds.seed_salt(setup, number)
    return message


def status(session: Session) -> int:
    """The table's status, the same in its view (GetGame), its listing (ListGames) and its
    stored listing at rest: GAME_STATUS_SERIES_OVER once the last game of its series is
    over."""
    table = session.table
    if table.abandoned:
        return pb.GAME_STATUS_ABANDONED
    if not table.started:
        return pb.GAME_STATUS_WAITING_FOR_PLAYERS
    if table.game_over(session.rules):
        if session.ownership.series_over(table.game_number):
            return pb.GAME_STATUS_SERIES_OVER
        return pb.GAME_STATUS_GAME_OVER
    return pb.GAME_STATUS_IN_PROGRESS


def connected_seats(session: Session) -> dict[int, int]:
    """Person seat -> its open streams (the seats connected now)."""
    state = session.presence
    return {} if state is None else state.streams


def _seats(session: Session) -> list[pb.Seat]:
    streams = connected_seats(session)
    types = seat_types(session.table.seats)
    return [pb.Seat(seat=i, type=types[i],
                    taken=s.claimed, bot_controlled=s.bot_controlled,
                    bot_strategy=s.bot or "", display_name=session.names[i],
                    connected=i in streams)
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
        scoreboard=scoreboard(len(table.seats), table.records),
        series=summaries(session, table.records),
        awaiting_seats=session.awaiting(),
        deadlines=deadlines(table.deadlines),
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


def event(session: Session, logged: LoggedEvent, seat: int | None) -> pb.Event:
    """One logged event as ``seat`` may see it (``wire.event_wire`` writes its bytes)."""
    e = logged.event
    message = pb.Event(sequence=e.sequence, game_number=e.game_number, version=logged.version,
                       awaiting_seats=logged.awaiting)
    stamp = message.time  # Timestamp.FromMilliseconds, without its pure-Python checks
    stamp.seconds, millis = divmod(logged.time_ms, 1000)
    stamp.nanos = millis * 1_000_000
    table_level = table_body(session, e)
    if table_level is not None:
        name, body = table_level
        getattr(message, name).CopyFrom(body)
    else:
        redacted = session.rules.redact(e.body, seat)
        getattr(message, session.adapter.field).CopyFrom(
            session.adapter.event_to_proto(redacted))
    return message


def listing(session: Session) -> pb.GameListing:
    table = session.table
    return pb.GameListing(
        game_id=session.game_id,
        kind=session.adapter.proto_kind,  # type: ignore[arg-type]
        status=status(session),  # type: ignore[arg-type]
        seats=len(table.seats),
        open_seats=[i for i, s in enumerate(table.seats) if not s.claimed],
        game_number=table.game_number,
        create_time=timestamp(session.created_ms),
        display_names=list(session.names),
        seat_types=seat_types(table.seats),
    )


def seat_types(seats: Sequence[tbl.SeatSlot]) -> list[pb.SeatType.ValueType]:
    """Each seat's ``SeatType``: a bot's, or a person's."""
    return [pb.SEAT_TYPE_PERSON if seat.bot is None else pb.SEAT_TYPE_BOT for seat in seats]


def quarantined_listing(game_id: str, kind: str) -> pb.GameListing:
    """The ListGames line of a quarantined table (its records are damaged: only its id and,
    when it could be read, its kind)."""
    adapter = ADAPTERS.get(kind)
    return pb.GameListing(game_id=game_id, status=pb.GAME_STATUS_QUARANTINED,
                          kind=adapter.proto_kind if adapter  # type: ignore[arg-type]
                          else pb.GAME_KIND_UNSPECIFIED)
