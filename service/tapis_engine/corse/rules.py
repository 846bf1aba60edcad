"""Bataille Corse, RULES.md §2: 2 to 6 players, 54 cards, challenges, slaps, elimination.

``apply`` validates first, then plays the action on a scratch copy (``_Play``) and freezes it
into a new state: the input state is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapis_engine import rng
from tapis_engine.cards import JACK, cards_from_text, cards_to_text, deck_with_jokers
from tapis_engine.corse import bots
from tapis_engine.corse.combinations import ALL_COMBINATIONS, find_combination
from tapis_engine.corse.state import (
    CHALLENGE,
    DEFAULT_FLIP_CAP,
    ELIMINATED,
    FLIP_CAP,
    IN_PLAY,
    LAST_IN_PLAY,
    MAX_FLIP_CAP,
    OUT,
    PENALTY_CARDS,
    STRIKES_OUT,
    CardFlipped,
    ChallengePassed,
    ChallengeStarted,
    CorseAction,
    CorseEnded,
    CorseOptions,
    CorseState,
    CorseView,
    Dealt,
    Eliminated,
    FalseSlap,
    Flip,
    OutForGood,
    PileWon,
    Reentered,
    Slap,
)
from tapis_engine.errors import Reason, invalid, precondition
from tapis_engine.protocol import JSON, GameSetup, Outcome

TRIES = {11: 1, 12: 2, 13: 3, 14: 4, 15: 5}
"""Challenge tries given by J, Q, K, A, Joker."""

_STATUSES = (IN_PLAY, ELIMINATED, OUT)


class _Play:
    """A mutable scratch copy of a state, for applying one validated action."""

    __slots__ = ("challenger", "decks", "end", "events", "face_up", "flip_cap", "pile", "rng",
                 "sequence", "statuses", "statuses_changed", "strikes", "tries", "turn",
                 "winner")

    def __init__(self, state: CorseState) -> None:
        self.decks = list(state.decks)
        self.pile = state.pile
        self.face_up = state.face_up
        self.sequence = state.sequence
        self.turn = state.turn
        self.challenger = state.challenger
        self.tries = state.tries
        self.statuses = state.statuses
        self.statuses_changed = False
        self.strikes = state.strikes
        self.rng = state.rng
        self.flip_cap = state.flip_cap
        self.winner: int | None = None
        self.end: str | None = None
        self.events: list[Any] = []

    def freeze(self, state: CorseState) -> CorseState:
        return CorseState(
            decks=tuple(self.decks), pile=self.pile, face_up=self.face_up,
            sequence=self.sequence, turn=self.turn, challenger=self.challenger,
            tries=self.tries, statuses=self.statuses, strikes=self.strikes,
            rng=self.rng, combinations=state.combinations, flip_cap=state.flip_cap,
            winner=self.winner, end=self.end,
        )

    # --- helpers ---

    def sizes(self) -> tuple[int, ...]:
        return tuple(len(deck) for deck in self.decks)

    def next_in_play(self, seat: int) -> int | None:
        """The nearest following seat in play (not ``seat`` itself), or None."""
        count = len(self.statuses)
        for step in range(1, count):
            other = (seat + step) % count
            if self.statuses[other] == IN_PLAY:
                return other
        return None

    def next_holder(self, seat: int) -> int | None:
        """The nearest following seat in play that holds cards (not ``seat``), or None."""
        count = len(self.statuses)
        for step in range(1, count):
            other = (seat + step) % count
            if self.statuses[other] == IN_PLAY and self.decks[other]:
                return other
        return None

    def take_pile(self, seat: int, reason: str) -> None:
        """``seat`` puts the pile under its deck, order kept (bottom card first)."""
        cards = len(self.pile)
        self.decks[seat] = self.decks[seat] + self.pile
        self.pile = ()
        self.face_up = 0
        self.challenger = None
        self.tries = 0
        self.events.append(PileWon(seat, reason, cards, self.sizes()))

    def set_status(self, seat: int, status: str) -> None:
        statuses = list(self.statuses)
        statuses[seat] = status
        self.statuses = tuple(statuses)
        self.statuses_changed = True

    def eliminate(self, seat: int) -> None:
        self.set_status(seat, ELIMINATED)
        self.events.append(Eliminated(seat))

    # --- actions ---

    def flip(self, seat: int) -> None:
        deck = self.decks[seat]
        drawn_from: int | None = None
        if deck:
            card = deck[0]
            self.decks[seat] = deck[1:]
        else:
            # Cardless and owing tries: ``settle`` guarantees someone else holds cards.
            source = self.next_holder(seat)
            assert source is not None
            other = self.decks[source]
            index, self.rng = rng.below(self.rng, len(other))
            card = other[index]
            self.decks[source] = other[:index] + other[index + 1:]
            drawn_from = source
        self.pile = (*self.pile, card)
        self.face_up += 1
        self.sequence += 1
        self.events.append(CardFlipped(seat, card, self.sequence, drawn_from))
        if card.rank >= JACK:
            previous = self.challenger
            self.challenger = seat
            self.tries = TRIES[card.rank]
            owes = self.next_in_play(seat)
            self.turn = owes
            if previous is None:
                self.events.append(ChallengeStarted(seat, self.tries, owes))
            else:
                self.events.append(ChallengePassed(seat, previous, self.tries, owes))
        elif self.challenger is not None:
            self.tries -= 1
            if self.tries == 0:
                challenger = self.challenger
                if drawn_from is not None:
                    self.eliminate(seat)
                self.take_pile(challenger, CHALLENGE)
                self.turn = challenger
        else:
            self.turn = self.next_in_play(seat)
        self.settle()

    def slap(self, seat: int, combination: str | None) -> None:
        if combination is not None:
            self.take_pile(seat, combination)
            if self.statuses[seat] == ELIMINATED:
                self.set_status(seat, IN_PLAY)
                self.events.append(Reentered(seat))
            self.turn = seat
        elif self.statuses[seat] == ELIMINATED:
            strikes = list(self.strikes)
            strikes[seat] += 1
            self.strikes = tuple(strikes)
            self.events.append(FalseSlap(seat, 0, strikes[seat], len(self.pile)))
            if strikes[seat] >= STRIKES_OUT:
                self.set_status(seat, OUT)
                self.events.append(OutForGood(seat))
        else:
            deck = self.decks[seat]
            paid = deck[:PENALTY_CARDS]
            self.decks[seat] = deck[len(paid):]
            # One at a time from the top of the deck, each to the very bottom of the pile.
            self.pile = tuple(reversed(paid)) + self.pile
            self.events.append(FalseSlap(seat, len(paid), self.strikes[seat], len(self.pile)))
        self.settle()

    def settle(self) -> None:
        """Eliminate whoever must flip with nothing to flip; end the game when it is over."""
        while True:
            # A live state always has two seats in play: count only after a change.
            if self.statuses_changed:
                in_play = [s for s, status in enumerate(self.statuses) if status == IN_PLAY]
                if len(in_play) <= 1:
                    self.finish_last(in_play[0] if in_play else None)
                    return
            seat = self.turn
            assert seat is not None
            if self.decks[seat]:
                break
            if self.challenger is not None:
                if self.next_holder(seat) is not None:
                    break  # they draw each owed try from the next deck
                challenger = self.challenger
                self.eliminate(seat)
                self.take_pile(challenger, CHALLENGE)
                self.turn = challenger
                continue
            self.eliminate(seat)
            self.turn = self.next_in_play(seat)
        if self.sequence >= self.flip_cap:
            self.finish_cap()

    def finish_last(self, seat: int | None) -> None:
        if seat is not None and self.pile:
            self.take_pile(seat, LAST_IN_PLAY)
        self.conclude(seat, LAST_IN_PLAY)

    def finish_cap(self) -> None:
        sizes = self.sizes()
        most = max(sizes)
        leaders = [s for s, size in enumerate(sizes) if size == most]
        self.conclude(leaders[0] if len(leaders) == 1 else None, FLIP_CAP)

    def conclude(self, winner: int | None, reason: str) -> None:
        self.winner = winner
        self.end = reason
        self.turn = None
        self.challenger = None
        self.tries = 0
        self.events.append(CorseEnded(winner, reason, self.sizes()))


def _plain_flip(state: CorseState, seat: int) -> tuple[CorseState, list[Any]] | None:
    """The common flip, played directly: a number card from a deck that keeps cards, the
    turn passing to a seat that holds cards (or staying with one still owing tries), the
    cap not reached. None for anything else (``_Play`` handles it); same result either way."""
    deck = state.decks[seat]
    if len(deck) < 2 or deck[0].rank >= JACK or state.sequence + 1 >= state.flip_cap:
        return None
    tries = state.tries
    if state.challenger is not None:
        if tries < 2:
            return None
        turn = seat
        tries -= 1
    else:
        count = len(state.statuses)
        turn = (seat + 1) % count
        while state.statuses[turn] != IN_PLAY:
            turn = (turn + 1) % count
        if turn == seat or not state.decks[turn]:
            return None
    card = deck[0]
    decks = list(state.decks)
    decks[seat] = deck[1:]
    sequence = state.sequence + 1
    after = CorseState(
        decks=tuple(decks), pile=(*state.pile, card), face_up=state.face_up + 1,
        sequence=sequence, turn=turn, challenger=state.challenger, tries=tries,
        statuses=state.statuses, strikes=state.strikes, rng=state.rng,
        combinations=state.combinations, flip_cap=state.flip_cap)
    return after, [CardFlipped(seat, card, sequence, None)]


class CorseRules:
    """The rules of Bataille Corse."""

    kind = "bataille-corse"
    hides_events = False
    min_seats = 2
    max_seats = 6
    bot_takes_over_on_timeout = False
    bot_strategies = bots.STRATEGIES

    def default_options(self) -> CorseOptions:
        return CorseOptions()

    def check_setup(self, setup: GameSetup[CorseOptions]) -> None:
        if not self.min_seats <= setup.seats <= self.max_seats:
            raise invalid(Reason.INVALID_SEAT_COUNT, "Bataille Corse is for 2 to 6 players")
        options = setup.options
        if not isinstance(options, CorseOptions):
            raise invalid(Reason.INVALID_OPTIONS, "not Bataille Corse options")
        unknown = set(options.combinations) - set(ALL_COMBINATIONS)
        if unknown:
            raise invalid(Reason.INVALID_OPTIONS,
                          f"unknown combinations {sorted(unknown)}; known: {ALL_COMBINATIONS}")
        if not 1 <= options.flip_cap <= MAX_FLIP_CAP:
            raise invalid(Reason.INVALID_OPTIONS, f"flip_cap must be between 1 and {MAX_FLIP_CAP}")
        deck = setup.stacked_deck
        if deck is not None and sorted(deck) != sorted(deck_with_jokers()):
            raise invalid(Reason.INVALID_STACKED_DECK,
                          "a stacked Bataille Corse deck must hold the 52 cards and 2 jokers")

    def start(self, setup: GameSetup[CorseOptions]) -> tuple[CorseState, list[Any]]:
        self.check_setup(setup)
        state = rng.derive(setup.seed)
        if setup.stacked_deck is not None:
            deck = tuple(setup.stacked_deck)
        else:
            deck, state = rng.shuffled(state, deck_with_jokers())
        seats = setup.seats
        decks = tuple(deck[seat::seats] for seat in range(seats))
        game = CorseState(
            decks=decks, pile=(), face_up=0, sequence=0, turn=0, challenger=None, tries=0,
            statuses=(IN_PLAY,) * seats, strikes=(0,) * seats, rng=state,
            combinations=frozenset(setup.options.combinations),
            flip_cap=setup.options.flip_cap,
        )
        return game, [Dealt(tuple(len(d) for d in decks))]

    def to_act(self, state: CorseState) -> frozenset[int]:
        return frozenset() if state.turn is None else frozenset((state.turn,))

    def legal_actions(self, state: CorseState, seat: int) -> Sequence[CorseAction]:
        if state.end is not None or not 0 <= seat < len(state.decks):
            return []
        actions: list[CorseAction] = []
        if state.turn == seat:
            actions.append(Flip())
        if state.face_up and state.statuses[seat] != OUT:
            actions.append(Slap(state.sequence))
        return actions

    def apply(self, state: CorseState, seat: int,
              action: object) -> tuple[CorseState, list[Any]]:
        if not isinstance(action, (Flip, Slap)):
            raise invalid(Reason.WRONG_GAME_KIND, "Bataille Corse knows only flip and slap")
        if state.end is not None:
            raise precondition(Reason.GAME_OVER, "this game is over")
        if not 0 <= seat < len(state.decks):
            raise invalid(Reason.INVALID_ACTION, f"there is no seat {seat}")
        if isinstance(action, Flip):
            if seat != state.turn:
                raise precondition(Reason.NOT_YOUR_TURN, f"seat {state.turn} flips now")
            fast = _plain_flip(state, seat)
            if fast is not None:
                return fast
            play = _Play(state)
            play.flip(seat)
        else:
            if state.statuses[seat] == OUT:
                raise precondition(Reason.SEAT_OUT, f"seat {seat} is out for good")
            if not isinstance(action.pile_sequence, int) or action.pile_sequence < 0:
                raise invalid(Reason.INVALID_ACTION, "a slap names the pile's top card sequence")
            if action.pile_sequence == 0:  # cards are numbered from 1: none was named
                raise invalid(Reason.INVALID_ACTION, "name the card you slap (pile_sequence)")
            if not state.pile and action.pile_sequence > state.sequence:
                # (a card that was on top and went with a won pile is a race lost: too late)
                raise precondition(Reason.NOT_ALLOWED_NOW,
                                   "the pile is empty: there is nothing to slap")
            if action.pile_sequence != state.top_sequence:
                raise precondition(Reason.SLAP_TOO_LATE,
                                   f"too late: card {action.pile_sequence} is no longer on top")
            play = _Play(state)
            play.slap(seat, find_combination(state.face_up_cards(), state.combinations))
        return play.freeze(state), play.events

    def outcome(self, state: CorseState) -> Outcome | None:
        if state.end is None:
            return None
        scores = tuple(len(deck) for deck in state.decks)
        winners = () if state.winner is None else (state.winner,)
        if state.end == LAST_IN_PLAY:
            summary = f"seat {state.winner} wins: last player in play, holds all the cards"
        elif state.winner is None:
            summary = f"draw at the cap of {state.flip_cap} flips: equal most cards"
        else:
            summary = (f"seat {state.winner} wins at the cap of {state.flip_cap} flips "
                       f"with the most cards ({scores[state.winner]})")
        return Outcome(winners, scores, summary)

    def view(self, state: CorseState, seat: int | None) -> CorseView:
        return CorseView(
            pile_top=state.face_up_cards(),
            pile_size=len(state.pile),
            top_sequence=state.top_sequence,
            deck_sizes=tuple(len(deck) for deck in state.decks),
            turn=state.turn,
            challenger=state.challenger,
            tries_left=state.tries,
            owes=state.turn if state.challenger is not None else None,
            statuses=state.statuses,
            strikes=state.strikes,
            flips=state.sequence,
            flip_cap=state.flip_cap,
            combinations=tuple(c for c in ALL_COMBINATIONS if c in state.combinations),
            winner=state.winner,
            end=state.end,
        )

    def redact(self, event: Any, seat: int | None) -> Any:
        # Only face-up cards ever appear in events (penalty cards are a count), so every
        # event is public as it is.
        return event

    def bot_action(self, state: CorseState, seat: int, strategy: str,
                   seed: int) -> CorseAction | None:
        return bots.bot_action(state, seat, strategy, seed)

    # --- encoding ---

    def encode_state(self, state: CorseState) -> JSON:
        return {
            "version": 1,
            "decks": [cards_to_text(deck) for deck in state.decks],
            "pile": cards_to_text(state.pile),
            "face_up": state.face_up,
            "sequence": state.sequence,
            "turn": state.turn,
            "challenger": state.challenger,
            "tries": state.tries,
            "statuses": list(state.statuses),
            "strikes": list(state.strikes),
            "rng": state.rng,
            "options": self.encode_options(CorseOptions(state.combinations, state.flip_cap)),
            "winner": state.winner,
            "end": state.end,
        }

    def decode_state(self, data: Mapping[str, Any]) -> CorseState:
        if data.get("version") != 1:
            raise ValueError(f"unknown Bataille Corse state version {data.get('version')!r}")
        options = self.decode_options(data["options"])
        statuses = tuple(str(s) for s in data["statuses"])
        if any(s not in _STATUSES for s in statuses):
            raise ValueError(f"bad seat statuses {statuses!r}")
        return CorseState(
            decks=tuple(cards_from_text(deck) for deck in data["decks"]),
            pile=cards_from_text(data["pile"]),
            face_up=int(data["face_up"]),
            sequence=int(data["sequence"]),
            turn=data["turn"],
            challenger=data["challenger"],
            tries=int(data["tries"]),
            statuses=statuses,
            strikes=tuple(int(s) for s in data["strikes"]),
            rng=int(data["rng"]),
            combinations=options.combinations,
            flip_cap=options.flip_cap,
            winner=data["winner"],
            end=data["end"],
        )

    def encode_action(self, action: CorseAction) -> JSON:
        if isinstance(action, Flip):
            return {"type": "flip"}
        return {"type": "slap", "pile_sequence": action.pile_sequence}

    def decode_action(self, data: Mapping[str, Any]) -> CorseAction:
        kind = data.get("type")
        if kind == "flip":
            return Flip()
        if kind == "slap":
            return Slap(int(data["pile_sequence"]))
        raise ValueError(f"not a Bataille Corse action: {data!r}")

    def encode_options(self, options: CorseOptions) -> JSON:
        return {
            "combinations": [c for c in ALL_COMBINATIONS if c in options.combinations],
            "flip_cap": options.flip_cap,
        }

    def decode_options(self, data: Mapping[str, Any]) -> CorseOptions:
        return CorseOptions(
            combinations=frozenset(str(c) for c in data.get("combinations", ALL_COMBINATIONS)),
            flip_cap=int(data.get("flip_cap", DEFAULT_FLIP_CAP)),
        )

