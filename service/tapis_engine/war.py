"""Bataille (War), RULES.md §1: two players, 52 cards, first to the points target.

Every move is forced (reveal the top card; in a bataille, lay one card face down and one face
up), yet each waits for its seat, the trick's first player always first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from tapis_engine import rng
from tapis_engine.cards import Card, cards_from_text, cards_to_text, same_cards, standard_deck
from tapis_engine.descriptor import GameDescriptor
from tapis_engine.errors import Reason, invalid, precondition
from tapis_engine.frozen import fast_init
from tapis_engine.protocol import JSON, GameSetup, Outcome

DEFAULT_TARGET = 50


@dataclass(frozen=True, slots=True)
class WarOptions:
    """``target_points``: the game ends when a player has scored this many tricks."""

    target_points: int = DEFAULT_TARGET


@dataclass(frozen=True, slots=True)
class Reveal:
    """Reveal the top card (in a bataille: one card face down, then one face up)."""


@dataclass(frozen=True, slots=True)
class Laid:
    """A card laid in a trick. A face-down card's identity is never shown to anyone."""

    seat: int
    card: Card
    face_up: bool

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(self, seat: int, card: Card, face_up: bool) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "card", card)
        object.__setattr__(self, "face_up", face_up)


fast_init(Laid)


@dataclass(frozen=True, slots=True)
class WarState:
    decks: tuple[tuple[Card, ...], tuple[Card, ...]]
    """Each seat's deck, top card first (hidden from everyone)."""
    first: int
    points: tuple[int, int]
    target: int
    to_move: int | None
    trick: tuple[Laid, ...] = ()
    batailles: int = 0
    last_trick: tuple[Laid, ...] = ()
    last_winner: int | None = None
    winner: int | None = None
    end: str | None = None
    """Why the game ended: "target", "all_cards", "short_bataille" or "draw"; None in play."""

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, decks: tuple[tuple[Card, ...], tuple[Card, ...]], first: int,
        points: tuple[int, int], target: int, to_move: int | None, trick: tuple[Laid, ...] = (),
        batailles: int = 0, last_trick: tuple[Laid, ...] = (), last_winner: int | None = None,
        winner: int | None = None, end: str | None = None
    ) -> None:
        object.__setattr__(self, "decks", decks)
        object.__setattr__(self, "first", first)
        object.__setattr__(self, "points", points)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "to_move", to_move)
        object.__setattr__(self, "trick", trick)
        object.__setattr__(self, "batailles", batailles)
        object.__setattr__(self, "last_trick", last_trick)
        object.__setattr__(self, "last_winner", last_winner)
        object.__setattr__(self, "winner", winner)
        object.__setattr__(self, "end", end)


fast_init(WarState)


# --- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dealt:
    deck_sizes: tuple[int, int]
    first: int


@dataclass(frozen=True, slots=True)
class CardRevealed:
    """``seat`` revealed ``card``; in a bataille it first laid one card face down."""

    seat: int
    card: Card
    with_face_down: bool
    deck_sizes: tuple[int, int]

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, seat: int, card: Card, with_face_down: bool, deck_sizes: tuple[int, int]
    ) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "card", card)
        object.__setattr__(self, "with_face_down", with_face_down)
        object.__setattr__(self, "deck_sizes", deck_sizes)


fast_init(CardRevealed)


@dataclass(frozen=True, slots=True)
class BatailleAnnounced:
    """Equal ranks: "Bataille!" (``count`` is 1 for the first of the trick, 2 for the next...)."""

    count: int


@dataclass(frozen=True, slots=True)
class TrickWon:
    seat: int
    cards: int
    points: tuple[int, int]
    deck_sizes: tuple[int, int]

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, seat: int, cards: int, points: tuple[int, int], deck_sizes: tuple[int, int]
    ) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "cards", cards)
        object.__setattr__(self, "points", points)
        object.__setattr__(self, "deck_sizes", deck_sizes)


fast_init(TrickWon)


@dataclass(frozen=True, slots=True)
class ShortBataille:
    """A player could not lay both cards of a bataille: ``loser`` (None: neither could)."""

    loser: int | None
    deck_sizes: tuple[int, int]


@dataclass(frozen=True, slots=True)
class WarEnded:
    winner: int | None
    reason: str
    points: tuple[int, int]
    deck_sizes: tuple[int, int]


# --- view -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WarView:
    deck_sizes: tuple[int, int]
    points: tuple[int, int]
    target: int
    first: int
    to_move: int | None
    trick: tuple[Laid | None, ...]
    """The trick in progress; face-down cards are None."""
    last_trick: tuple[Laid | None, ...]
    last_winner: int | None
    batailles: int
    winner: int | None
    end: str | None


def _public(laid: tuple[Laid, ...]) -> tuple[Laid | None, ...]:
    return tuple(card if card.face_up else None for card in laid)


def _sizes(decks: tuple[tuple[Card, ...], tuple[Card, ...]]) -> tuple[int, int]:
    return (len(decks[0]), len(decks[1]))


_NOBODY: Final[frozenset[int]] = frozenset()
_ONE_SEAT: Final = (frozenset((0,)), frozenset((1,)))
"""``to_act``'s answers, built once (asked several times per action)."""


class WarRules:
    """The rules of Bataille."""

    kind = "war"
    hides_events = False
    min_seats = 2
    max_seats = 2
    bot_takes_over_on_timeout = True
    bot_strategies: tuple[str, ...] = ("basic",)

    def default_options(self) -> WarOptions:
        return WarOptions()

    def check_setup(self, setup: GameSetup[WarOptions]) -> None:
        if setup.seats != 2:
            raise invalid(Reason.INVALID_SEAT_COUNT, "Bataille is for exactly 2 players")
        if not 1 <= setup.options.target_points <= 10_000:
            raise invalid(Reason.INVALID_OPTIONS, "target_points must be between 1 and 10000")
        if setup.stacked_deck is not None and not same_cards(setup.stacked_deck, standard_deck()):
            raise invalid(Reason.INVALID_STACKED_DECK,
                          "a stacked Bataille deck must hold the 52 cards, each once")
        if setup.stacked_first is not None and setup.stacked_first not in (0, 1):
            raise invalid(Reason.INVALID_STACKED_DECK, "the first player must be seat 0 or 1")

    def start(self, setup: GameSetup[WarOptions]) -> tuple[WarState, list[Any]]:
        state = rng.derive(setup.seed)
        if setup.stacked_deck is not None:
            deck = setup.stacked_deck
        else:
            deck, state = rng.shuffled(state, standard_deck())
        if setup.stacked_first is not None:
            first = setup.stacked_first
        else:
            first, state = rng.below(state, 2)
        decks = (deck[0::2], deck[1::2])
        game = WarState(decks=decks, first=first, points=(0, 0),
                        target=setup.options.target_points, to_move=first)
        return game, [Dealt(_sizes(decks), first)]

    def to_act(self, state: WarState) -> frozenset[int]:
        return _NOBODY if state.to_move is None else _ONE_SEAT[state.to_move]

    def legal_actions(self, state: WarState, seat: int) -> Sequence[Reveal]:
        return [Reveal()] if state.to_move == seat else []

    def apply(self, state: WarState, seat: int, action: object) -> tuple[WarState, list[Any]]:
        if not isinstance(action, Reveal):
            raise invalid(Reason.WRONG_GAME_KIND, "Bataille only knows the reveal action")
        if state.end is not None:
            raise precondition(Reason.GAME_OVER, "this game is over")
        if seat != state.to_move:
            order = "first" if state.to_move == state.first else "second"
            raise precondition(Reason.NOT_YOUR_TURN,
                               f"seat {state.to_move} reveals {order} in this trick")
        deck = state.decks[seat]
        in_bataille = state.batailles > 0
        if in_bataille:
            up = Laid(seat, deck[1], True)
            trick = (*state.trick, Laid(seat, deck[0], False), up)
            rest = deck[2:]
        else:
            up = Laid(seat, deck[0], True)
            trick = (*state.trick, up)
            rest = deck[1:]
        decks = (rest, state.decks[1]) if seat == 0 else (state.decks[0], rest)
        events: list[Any] = [CardRevealed(seat, up.card, in_bataille,
                                          (len(decks[0]), len(decks[1])))]
        # States are built field by field here: dataclasses.replace is the hot path's cost.
        if seat == state.first:
            return WarState(decks, state.first, state.points, state.target, 1 - seat, trick,
                            state.batailles, state.last_trick, state.last_winner), events
        return self._settle(state, decks, trick, up.card, events)

    def _settle(self, state: WarState, decks: tuple[tuple[Card, ...], tuple[Card, ...]],
                trick: tuple[Laid, ...], other_card: Card,
                events: list[Any]) -> tuple[WarState, list[Any]]:
        """Both have laid: compare the face-up cards (the first player's was laid just before
        the other player's one or two cards)."""
        first = state.first
        first_card = trick[-3 if state.batailles else -2].card
        if first_card.rank != other_card.rank:
            winner = first if first_card.rank > other_card.rank else 1 - first
            won = tuple(c.card for c in trick)
            decks = (decks[0] + won, decks[1]) if winner == 0 else (decks[0], decks[1] + won)
            points = (state.points[0] + 1, state.points[1]) if winner == 0 \
                else (state.points[0], state.points[1] + 1)
            events.append(TrickWon(winner, len(won), points, (len(decks[0]), len(decks[1]))))
            state = WarState(decks, first, points, state.target, first, (), 0, trick, winner)
            if points[winner] >= state.target:
                return self._end(state, winner, "target", events)
            if not decks[1 - winner]:
                return self._end(state, winner, "all_cards", events)
            return state, events
        # Bataille!
        count = state.batailles + 1
        events.append(BatailleAnnounced(count))
        short = [seat for seat in (0, 1) if len(decks[seat]) < 2]
        if len(short) == 2:
            events.append(ShortBataille(None, _sizes(decks)))
            state = WarState(decks, first, state.points, state.target, None, trick, count,
                             state.last_trick, state.last_winner)
            return self._end(state, None, "draw", events)
        if short:
            loser = short[0]
            winner = 1 - loser
            taken = tuple(c.card for c in trick) + decks[loser]
            held: list[tuple[Card, ...]] = [(), ()]
            held[winner] = decks[winner] + taken
            decks = (held[0], held[1])
            events.append(ShortBataille(loser, _sizes(decks)))
            state = WarState(decks, first, state.points, state.target, None, (), count, trick,
                             winner)
            return self._end(state, winner, "short_bataille", events)
        return WarState(decks, first, state.points, state.target, first, trick, count,
                        state.last_trick, state.last_winner), events

    def _end(self, state: WarState, winner: int | None, reason: str,
             events: list[Any]) -> tuple[WarState, list[Any]]:
        state = replace(state, winner=winner, end=reason, to_move=None)
        events.append(WarEnded(winner, reason, state.points, _sizes(state.decks)))
        return state, events

    def outcome(self, state: WarState) -> Outcome | None:
        if state.end is None:
            return None
        winners = () if state.winner is None else (state.winner,)
        sizes = _sizes(state.decks)
        if state.winner is None:
            summary = "draw: neither player could lay a bataille"
        else:
            how = {"target": f"reached {state.target} points",
                   "all_cards": "holds all 52 cards",
                   "short_bataille": "opponent could not lay a bataille"}[state.end]
            summary = f"seat {state.winner} wins: {how}"
        summary += f" (points {state.points[0]}-{state.points[1]}, decks {sizes[0]}-{sizes[1]})"
        return Outcome(winners, state.points, summary)

    def view(self, state: WarState, seat: int | None) -> WarView:
        return WarView(
            deck_sizes=_sizes(state.decks),
            points=state.points,
            target=state.target,
            first=state.first,
            to_move=state.to_move,
            trick=_public(state.trick),
            last_trick=_public(state.last_trick),
            last_winner=state.last_winner,
            batailles=state.batailles,
            winner=state.winner,
            end=state.end,
        )

    def redact(self, event: Any, seat: int | None) -> Any:
        return event  # War events never carry a hidden card

    def bot_action(self, state: WarState, seat: int, strategy: str, seed: int) -> Reveal | None:
        return Reveal() if state.to_move == seat else None

    # --- encoding ---

    def encode_state(self, state: WarState) -> JSON:
        def laid(cards: tuple[Laid, ...]) -> list[list[Any]]:
            return [[c.seat, str(c.card), c.face_up] for c in cards]

        return {
            "decks": [cards_to_text(d) for d in state.decks],
            "first": state.first,
            "points": list(state.points),
            "target": state.target,
            "to_move": state.to_move,
            "trick": laid(state.trick),
            "batailles": state.batailles,
            "last_trick": laid(state.last_trick),
            "last_winner": state.last_winner,
            "winner": state.winner,
            "end": state.end,
        }

    def decode_state(self, data: Mapping[str, Any]) -> WarState:
        def laid(rows: list[list[Any]]) -> tuple[Laid, ...]:
            return tuple(Laid(s, cards_from_text([c])[0], up) for s, c, up in rows)

        d0, d1 = (cards_from_text(d) for d in data["decks"])
        p0, p1 = data["points"]
        return WarState(
            decks=(d0, d1), first=data["first"], points=(p0, p1), target=data["target"],
            to_move=data["to_move"], trick=laid(data["trick"]), batailles=data["batailles"],
            last_trick=laid(data["last_trick"]), last_winner=data["last_winner"],
            winner=data["winner"], end=data["end"],
        )

    def encode_action(self, action: Reveal) -> JSON:
        return {"type": "reveal"}

    def decode_action(self, data: Mapping[str, Any]) -> Reveal:
        if data.get("type") != "reveal":
            raise ValueError(f"not a Bataille action: {data!r}")
        return Reveal()

    def encode_options(self, options: WarOptions) -> JSON:
        return {"target_points": options.target_points}

    def decode_options(self, data: Mapping[str, Any]) -> WarOptions:
        return WarOptions(target_points=int(data["target_points"]))


RULES: WarRules = WarRules()
GAME: GameDescriptor = GameDescriptor(
    rules=RULES, title="Bataille", max_stacked_cards=len(standard_deck()),
    short_options=WarOptions(target_points=40), routine_action=Reveal())
