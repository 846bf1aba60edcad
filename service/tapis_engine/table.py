"""A table: one series of games of one kind among the same seats, with turn timers and bots.

The table wraps any ``Rules``: it claims seats, starts each game of the series, keeps the
scoreboard, runs the per-turn deadlines (as data: times come in as ``now_ms`` inputs) and lets
server bots and timed-out seats move. It is as pure as the rules: ``step`` returns a new table and
the sequenced events; the same inputs always give the same table, event for event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tapis_engine import fairness, rng
from tapis_engine.errors import Reason, invalid, precondition
from tapis_engine.frozen import fast_init
from tapis_engine.inputs import (
    Abandon,
    Act,
    BotMove,
    Claim,
    Input,
    NextGame,
    Reclaim,
    Replace,
    Resume,
    Timeout,
)
from tapis_engine.protocol import GameSetup, Outcome, Rules

# --- seats, records and the scoreboard -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeatSlot:
    """Who plays a seat. ``bot`` names a server bot strategy; None is a seat for a person."""

    bot: str | None = None
    claimed: bool = False
    taken_over: bool = False
    """A person's seat that a bot plays since its timer ran out (until reclaimed)."""

    @property
    def bot_controlled(self) -> bool:
        return self.bot is not None or self.taken_over


@dataclass(frozen=True, slots=True)
class GameRecord:
    """One finished game of the series, as the end-of-game summary shows it."""

    number: int
    seed: int
    winners: tuple[int, ...]
    scores: tuple[int, ...]
    summary: str


@dataclass(frozen=True, slots=True)
class Scoreboard:
    """Games won by each seat, and draws, over the series so far."""

    wins: tuple[int, ...]
    draws: int
    games: int


def scoreboard(seats: int, records: Sequence[GameRecord]) -> Scoreboard:
    """Count wins per seat (a shared win counts for each winner) and draws."""
    wins = [0] * seats
    draws = 0
    for record in records:
        if not record.winners:
            draws += 1
        for seat in record.winners:
            wins[seat] += 1
    return Scoreboard(tuple(wins), draws, len(records))


# --- table-level events ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeatClaimed:
    seat: int


@dataclass(frozen=True, slots=True)
class GameStarted:
    number: int
    seats: int
    seed_commitment: str = ""
    """The commitment to this game's seed (``fairness.seed_commitment``), revealed when it ends."""


@dataclass(frozen=True, slots=True)
class SeatTakenOver:
    """The seat's turn timer ran out; a bot plays it (War: until reclaimed)."""

    seat: int
    until_reclaimed: bool


@dataclass(frozen=True, slots=True)
class SeatReclaimed:
    seat: int


@dataclass(frozen=True, slots=True)
class SeatReplaced:
    """The seat has a new holder (or none): a bot plays it until the holder reclaims it."""

    seat: int


@dataclass(frozen=True, slots=True)
class GameEnded:
    """A game of the series ended; ``records`` summarises every game of the series so far."""

    number: int
    outcome: Outcome
    records: tuple[GameRecord, ...]


@dataclass(frozen=True, slots=True)
class GameAbandoned:
    """The table ended without a result: nobody acted for the server's abandonment time."""

    number: int


@dataclass(frozen=True, slots=True)
class TurnTimersResumed:
    """The table is served again after a time nobody could play at it (``Resume``): the turn
    timers of the persons it awaits, each at least one whole turn from then."""

    deadlines: tuple[tuple[int, int], ...]
    """(seat, deadline in ms) of every person awaited, as ``Table.deadlines``."""


@dataclass(frozen=True, slots=True)
class TableEvent:
    """An event with its table-wide rising sequence number and the game it belongs to."""

    sequence: int
    game_number: int
    body: Any

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(self, sequence: int, game_number: int, body: Any) -> None:
        object.__setattr__(self, "sequence", sequence)
        object.__setattr__(self, "game_number", game_number)
        object.__setattr__(self, "body", body)


fast_init(TableEvent)


# --- the table --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    """The whole pure state of one table."""

    kind: str
    setup: GameSetup[Any]
    turn_time_ms: int
    seats: tuple[SeatSlot, ...]
    game_number: int = 0
    """The game in play (1-based); 0 while waiting for people to take their seats."""
    state: Any = None
    records: tuple[GameRecord, ...] = ()
    deadlines: tuple[tuple[int, int], ...] = ()
    """(seat, at_ms) for each person's seat whose move is awaited under a turn timer."""
    version: int = 0
    """Bumped by every accepted input (optimistic concurrency)."""
    next_sequence: int = 1
    abandoned: bool = False
    """Ended by the server (``Abandon``): every further input is refused."""
    resumes: int = 0
    """``Resume`` inputs since the last accepted move (``resume_due``: ``MAX_RESUMES``)."""

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, kind: str, setup: GameSetup[Any], turn_time_ms: int, seats: tuple[SeatSlot, ...],
        game_number: int = 0, state: Any = None, records: tuple[GameRecord, ...] = (),
        deadlines: tuple[tuple[int, int], ...] = (), version: int = 0, next_sequence: int = 1,
        abandoned: bool = False, resumes: int = 0
    ) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "setup", setup)
        object.__setattr__(self, "turn_time_ms", turn_time_ms)
        object.__setattr__(self, "seats", seats)
        object.__setattr__(self, "game_number", game_number)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "records", records)
        object.__setattr__(self, "deadlines", deadlines)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "next_sequence", next_sequence)
        object.__setattr__(self, "abandoned", abandoned)
        object.__setattr__(self, "resumes", resumes)

    @property
    def started(self) -> bool:
        return self.game_number > 0

    def game_over(self, rules: Rules[Any, Any, Any]) -> bool:
        """The latest game is over, or the table was abandoned."""
        return self.abandoned or (self.state is not None
                                  and rules.outcome(self.state) is not None)

    def deadline_of(self, seat: int) -> int | None:
        for s, at in self.deadlines:
            if s == seat:
                return at
        return None


fast_init(Table)


def new_table(
    rules: Rules[Any, Any, Any],
    setup: GameSetup[Any],
    bots: Sequence[str | None],
    turn_time_ms: int,
    now_ms: int,
) -> tuple[Table, list[TableEvent]]:
    """Create a table; ``bots[i]`` is the server bot of seat i, or None for a person.

    When no seat waits for a person the first game starts at once.
    """
    if len(bots) != setup.seats:
        raise invalid(Reason.INVALID_SEAT_COUNT, "give one seat description per seat")
    if turn_time_ms < 0:
        raise invalid(Reason.INVALID_OPTIONS, "the turn time limit cannot be negative")
    for bot in bots:
        if bot is not None and bot not in rules.bot_strategies:
            raise invalid(
                Reason.INVALID_OPTIONS,
                f"unknown bot {bot!r}; this game has {', '.join(rules.bot_strategies)}",
            )
    rules.check_setup(setup)
    seats = tuple(SeatSlot(bot=bot, claimed=bot is not None) for bot in bots)
    table = Table(kind=rules.kind, setup=setup, turn_time_ms=turn_time_ms, seats=seats)
    events: list[TableEvent] = []
    if all(slot.claimed for slot in seats):
        table = _start_game(rules, table, 1, now_ms, events)
    return table, events


def step(
    rules: Rules[Any, Any, Any], table: Table, move: Input, now_ms: int
) -> tuple[Table, list[TableEvent]]:
    """Apply one input; raise ``RuleError`` (and change nothing) when it is refused."""
    events: list[TableEvent] = []
    if table.abandoned:
        raise precondition(Reason.GAME_ABANDONED, "this table was abandoned; it is over")
    if isinstance(move, Abandon):
        return _abandon(rules, table, events), events
    if isinstance(move, Resume):
        return _resume(table, now_ms, events), events
    _check_seat(table, move.seat)
    if isinstance(move, Claim):
        table = _claim(rules, table, move.seat, now_ms, events)
    elif isinstance(move, Replace):
        table = _replace(rules, table, move.seat, now_ms, events)
    elif isinstance(move, NextGame):
        if not table.started or not table.game_over(rules):
            raise precondition(Reason.GAME_NOT_OVER, "the current game is not over yet")
        table = _start_game(rules, table, table.game_number + 1, now_ms, events)
    elif isinstance(move, Reclaim):
        if not table.seats[move.seat].taken_over:
            raise precondition(Reason.SEAT_NOT_BOT_CONTROLLED, "this seat is already yours")
        table = _set_seat(table, move.seat, replace(table.seats[move.seat], taken_over=False))
        _emit(table, events, SeatReclaimed(move.seat))
        table = replace(table, next_sequence=table.next_sequence + len(events))
        table = _refresh_deadlines(rules, table, table.state, now_ms, {move.seat})
    else:
        return _play(rules, table, move, now_ms, events), events  # _play bumps the version
    return replace(table, version=table.version + 1, resumes=0), events


def bot_move(rules: Rules[Any, Any, Any], table: Table, seat: int) -> Any | None:
    """The move a bot-controlled ``seat`` would make now, or None (deterministic)."""
    slot = table.seats[seat]
    if not slot.bot_controlled or not _in_play(rules, table):
        return None
    strategy = slot.bot or rules.bot_strategies[0]
    seed = rng.derive(table.setup.seed, table.game_number, table.version, seat)
    return rules.bot_action(table.state, seat, strategy, seed)


def pending_bot_seats(rules: Rules[Any, Any, Any], table: Table) -> list[int]:
    """Bot-controlled seats that have a move to make now."""
    if not _in_play(rules, table):
        return []
    return [s for s, slot in enumerate(table.seats)
            if slot.bot_controlled and bot_move(rules, table, s) is not None]


# --- internals ----------------------------------------------------------------------------------


def _abandon(rules: Rules[Any, Any, Any], table: Table, events: list[TableEvent]) -> Table:
    # accepted between two games of the series too (a backend ends its table: EndTable)
    _emit(table, events, GameAbandoned(table.game_number))
    return replace(table, abandoned=True, deadlines=(), version=table.version + 1,
                   next_sequence=table.next_sequence + len(events))


def _resume(table: Table, now_ms: int, events: list[TableEvent]) -> Table:
    # the clocks stood still while nobody could play: a whole turn from now, at least (the
    # version stays: no move was made, a move chosen before still applies). Not bounded by
    # MAX_RESUMES here: a journal written before the bound replays as it was played.
    if not _short_of_a_turn(table, now_ms):
        raise precondition(Reason.NOT_ALLOWED_NOW,
                           "no turn timer has less than a whole turn left")
    due = now_ms + table.turn_time_ms
    deadlines = tuple((seat, max(at, due)) for seat, at in table.deadlines)
    _emit(table, events, TurnTimersResumed(deadlines))
    return replace(table, deadlines=deadlines, next_sequence=table.next_sequence + len(events),
                   resumes=table.resumes + 1)


MAX_RESUMES = 3
"""A turn's clocks stop for this many interruptions at most (docs/rulings.md): a table served
again more often before anyone moves (a server restarting faster than a turn) keeps its
deadlines, so a person who left is timed out at last."""


def resume_due(table: Table, now_ms: int) -> bool:
    """The service should ``Resume`` a table served again: some person awaited has less than a
    whole turn from ``now_ms`` left, and the clocks stopped fewer than ``MAX_RESUMES`` times
    since the last move."""
    return table.resumes < MAX_RESUMES and _short_of_a_turn(table, now_ms)


def _short_of_a_turn(table: Table, now_ms: int) -> bool:
    due = now_ms + table.turn_time_ms
    return any(at < due for _, at in table.deadlines)


def _check_seat(table: Table, seat: int) -> None:
    if not 0 <= seat < len(table.seats):
        raise invalid(Reason.INVALID_ACTION, f"there is no seat {seat}")


def _in_play(rules: Rules[Any, Any, Any], table: Table) -> bool:
    return table.started and not table.game_over(rules)


def _emit(table: Table, events: list[TableEvent], body: Any) -> None:
    events.append(TableEvent(table.next_sequence + len(events), table.game_number, body))


def _set_seat(table: Table, seat: int, slot: SeatSlot) -> Table:
    seats = list(table.seats)
    seats[seat] = slot
    return replace(table, seats=tuple(seats))


def _claim(
    rules: Rules[Any, Any, Any], table: Table, seat: int, now_ms: int, events: list[TableEvent]
) -> Table:
    slot = table.seats[seat]
    if slot.bot is not None:
        raise precondition(Reason.NOT_ALLOWED_NOW, f"seat {seat} is played by a server bot")
    if slot.claimed:
        raise precondition(Reason.NOT_ALLOWED_NOW, f"seat {seat} is already taken")
    table = _set_seat(table, seat, replace(slot, claimed=True))
    _emit(table, events, SeatClaimed(seat))
    if all(s.claimed for s in table.seats):
        table = _start_game(rules, table, 1, now_ms, events)
    else:
        table = replace(table, next_sequence=table.next_sequence + len(events))
    return table


def _replace(
    rules: Rules[Any, Any, Any], table: Table, seat: int, now_ms: int, events: list[TableEvent]
) -> Table:
    if table.seats[seat].bot is not None:
        raise precondition(Reason.NOT_ALLOWED_NOW, f"seat {seat} is played by a server bot")
    table = _set_seat(table, seat, SeatSlot(claimed=True, taken_over=True))
    _emit(table, events, SeatReplaced(seat))
    if not table.started and all(s.claimed for s in table.seats):
        return _start_game(rules, table, 1, now_ms, events)
    table = replace(table, next_sequence=table.next_sequence + len(events))
    return _refresh_deadlines(rules, table, table.state, now_ms, set())


def _start_game(
    rules: Rules[Any, Any, Any], table: Table, number: int, now_ms: int, events: list[TableEvent]
) -> Table:
    setup = replace(table.setup, seed=fairness.game_seed(table.setup, number))
    state, game_events = rules.start(setup)
    table = replace(table, game_number=number, state=state, deadlines=())
    _emit(table, events, GameStarted(number, len(table.seats),
                                     fairness.seed_commitment(table.setup, number)))
    for body in game_events:
        _emit(table, events, body)
    table = replace(table, next_sequence=table.next_sequence + len(events))
    return _refresh_deadlines(rules, table, None, now_ms, set(range(len(table.seats))))


def _play(
    rules: Rules[Any, Any, Any], table: Table, move: Input, now_ms: int,
    events: list[TableEvent],
) -> Table:
    if not table.started:
        raise precondition(Reason.GAME_NOT_STARTED, "the game starts when every seat is taken")
    if table.game_over(rules):
        raise precondition(Reason.GAME_OVER, "this game is over")
    seat = move.seat
    slot = table.seats[seat]
    action: Any
    if isinstance(move, Act):
        if slot.taken_over:
            raise precondition(
                Reason.SEAT_BOT_CONTROLLED,
                "a bot plays this seat since your timer ran out; take the seat back first",
            )
        if slot.bot is not None:
            raise precondition(Reason.SEAT_BOT_CONTROLLED, "a server bot plays this seat")
        action = move.action
    elif isinstance(move, BotMove):
        action = bot_move(rules, table, seat)
        if action is None:
            raise precondition(Reason.NOT_ALLOWED_NOW, "the bot has no move to make")
    elif isinstance(move, Timeout):
        at = table.deadline_of(seat)
        if at is None or now_ms < at:
            raise precondition(Reason.NOT_ALLOWED_NOW, "no turn timer has run out for this seat")
        strategy = rules.bot_strategies[0]
        seed = rng.derive(table.setup.seed, table.game_number, table.version, seat)
        action = rules.bot_action(table.state, seat, strategy, seed)
        if action is None:
            raise precondition(Reason.NOT_ALLOWED_NOW, "this seat has no move to make")
    else:  # pragma: no cover - the Input union is closed
        raise invalid(Reason.INVALID_ACTION, "unknown input")

    previous = table.state
    state, game_events = rules.apply(previous, seat, action)
    if isinstance(move, Timeout):
        takes_over = rules.bot_takes_over_on_timeout
        if takes_over:
            table = _set_seat(table, seat, replace(slot, taken_over=True))
        _emit(table, events, SeatTakenOver(seat, until_reclaimed=takes_over))
    for body in game_events:
        _emit(table, events, body)
    outcome = rules.outcome(state)
    if outcome is not None:
        record = GameRecord(
            number=table.game_number,
            seed=fairness.game_seed(table.setup, table.game_number),
            winners=outcome.winners,
            scores=outcome.scores,
            summary=outcome.summary,
        )
        records = (*table.records, record)
        _emit(table, events, GameEnded(table.game_number, outcome, records))
        return _played(table, state, table.next_sequence + len(events), records, ())
    table = _played(table, state, table.next_sequence + len(events), table.records,
                    table.deadlines)
    return _refresh_deadlines(rules, table, previous, now_ms, {seat})


def _played(table: Table, state: Any, next_sequence: int, records: tuple[GameRecord, ...],
            deadlines: tuple[tuple[int, int], ...]) -> Table:
    """The table after a move: one construction instead of a chain of ``replace`` calls (the
    per-action hot path); the version is bumped here."""
    return Table(table.kind, table.setup, table.turn_time_ms, table.seats, table.game_number,
                 state, records, deadlines, table.version + 1, next_sequence)


def _refresh_deadlines(
    rules: Rules[Any, Any, Any], table: Table, previous: Any, now_ms: int, moved: set[int]
) -> Table:
    """Every person's seat now awaited gets a deadline; a fresh one if it just became due or
    just moved, else it keeps the one it had."""
    if table.turn_time_ms <= 0 or table.state is None or table.game_over(rules):
        return replace(table, deadlines=()) if table.deadlines else table
    before = rules.to_act(previous) if previous is not None else frozenset()
    old = dict(table.deadlines)
    deadlines = []
    for seat in sorted(rules.to_act(table.state)):
        if table.seats[seat].bot_controlled:
            continue
        if seat in old and seat in before and seat not in moved:
            deadlines.append((seat, old[seat]))
        else:
            deadlines.append((seat, now_ms + table.turn_time_ms))
    return replace(table, deadlines=tuple(deadlines))
