"""The rules of La bataille des boutons (RULES.md §3) behind the ``Rules`` protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapis_engine import rng
from tapis_engine.boutons import bots
from tapis_engine.boutons.buttons import add, deal, empty_cards, on_cards, with_count
from tapis_engine.boutons.scoring import product_score, winners
from tapis_engine.boutons.state import (
    ACE_OF_HEARTS,
    ALL_COLOURS,
    BETS_PER_PLAYER,
    BETTING,
    BLACK_ACES,
    COLOUR_INDEX,
    DECK_B,
    DRAWING,
    MAX_ROUNDS,
    NO_BUTTON_TO_BET,
    NO_BUTTONS,
    NO_BUTTONS_LEFT,
    OVER,
    OWNER_OF_RANK,
    RESERVE_EMPTY,
    RESERVE_INDEX,
    SECOND_BLACK_ACE,
    SUIT_INDEX,
    Bet,
    BetPlaced,
    BettingStopped,
    BlackAceSetAside,
    BoutonsEnded,
    BoutonsOptions,
    BoutonsState,
    BoutonsView,
    ButtonsTaken,
    CardFlipped,
    Counts,
    DrawStarted,
    Flip,
    LaidOutCard,
    ReserveToCentre,
    RoundEnded,
    laid_out_cards,
)
from tapis_engine.cards import Card, cards_from_text, cards_to_text, parse_card, same_cards
from tapis_engine.errors import Reason, invalid, precondition
from tapis_engine.protocol import JSON, GameSetup, Outcome

Action = Bet | Flip
FLIP = Flip()
_BETS = {(colour, card): Bet(colour, card)
         for colour in ALL_COLOURS for seat in range(4) for card in laid_out_cards(seat)}
_LEGAL_BETS: dict[tuple[int, Counts, tuple[bool, ...]], tuple[Bet, ...]] = {}
"""Memo of the legal bets by seat, hand and covered cards (pure, so safe to share)."""
_LEGAL_BETS_CACHE = 100_000
ENCODING_VERSION = 1


def stacked_orders(deck: tuple[Card, ...]) -> list[tuple[Card, ...]]:
    """A stacked deck cut into its orders of deck B: round r uses order (r - 1) mod k."""
    size = len(DECK_B)
    return [deck[i:i + size] for i in range(0, len(deck), size)]


class BoutonsRules:
    """The rules of La bataille des boutons."""

    kind = "boutons"
    hides_events = False
    min_seats = 2
    max_seats = 4
    bot_takes_over_on_timeout = False
    bot_strategies: tuple[str, ...] = ("heuristic", "random")

    def default_options(self) -> BoutonsOptions:
        return BoutonsOptions()

    def check_setup(self, setup: GameSetup[BoutonsOptions]) -> None:
        if not self.min_seats <= setup.seats <= self.max_seats:
            raise invalid(Reason.INVALID_SEAT_COUNT, "Boutons is for 2 to 4 players")
        if not 1 <= setup.options.rounds <= MAX_ROUNDS:
            raise invalid(Reason.INVALID_OPTIONS, f"rounds must be between 1 and {MAX_ROUNDS}")
        deck = setup.stacked_deck
        if deck is not None and (
                not deck or len(deck) % len(DECK_B)
                or len(deck) > len(DECK_B) * setup.options.rounds
                or not all(same_cards(order, DECK_B) for order in stacked_orders(deck))):
            raise invalid(Reason.INVALID_STACKED_DECK,
                          "a stacked deck B holds the 31 cards from 7 to ace without the ace of "
                          "diamonds, each once, per round (one order, or one for each of up to "
                          "every round)")
        if setup.stacked_first not in (None, 0):
            raise invalid(Reason.INVALID_STACKED_DECK, "seat 0 is always the first player")

    def start(self, setup: GameSetup[BoutonsOptions]) -> tuple[BoutonsState, list[Any]]:
        self.check_setup(setup)
        state = BoutonsState(
            seats=setup.seats, rounds=setup.options.rounds, round=0, first=0, phase=BETTING,
            to_move=None, hands=deal(setup.seats), cards=empty_cards(setup.seats), centre=0,
            reserve=setup.options.rounds, bets_placed=0, deck=(), black_aces=(),
            last_flip=None, betting_stopped=False, rng=rng.derive(setup.seed),
            stacked=setup.stacked_deck)
        events: list[Any] = []
        return self._begin_round(state, 1, 0, events), events

    # --- flow -----------------------------------------------------------------------------

    def _begin_round(self, state: BoutonsState, number: int, first: int,
                     events: list[Any]) -> BoutonsState:
        """The first player moves a reserve button to the centre; betting starts with them."""
        state = state._replace(round=number, first=first, phase=BETTING, reserve=state.reserve - 1,
                        centre=state.centre + 1, bets_placed=0, deck=(), black_aces=(),
                        last_flip=None)
        events.append(ReserveToCentre(number, first, state.reserve, state.centre))
        return self._next_bettor(state, events)

    def _next_bettor(self, state: BoutonsState, events: list[Any]) -> BoutonsState:
        if state.bets_placed == BETS_PER_PLAYER * state.seats:
            return self._start_draw(state, events)
        seat = (state.first + state.bets_placed) % state.seats
        if not any(state.hands[seat]):
            events.append(BettingStopped(seat))
            return self._start_draw(state._replace(betting_stopped=True), events)
        return state._replace(to_move=seat)

    def _start_draw(self, state: BoutonsState, events: list[Any]) -> BoutonsState:
        """Deck B, whole again, is shuffled (or stacked); the second player flips first."""
        seed = state.rng
        if state.stacked is not None:
            orders = stacked_orders(state.stacked)
            deck = orders[(state.round - 1) % len(orders)]
        else:
            deck, seed = rng.shuffled(seed, DECK_B)
        seat = (state.first + 1) % state.seats
        events.append(DrawStarted(seat, len(deck)))
        return state._replace(phase=DRAWING, deck=deck, rng=seed, to_move=seat)

    def _end_round(self, state: BoutonsState, reason: str, events: list[Any]) -> BoutonsState:
        game_over = state.reserve == 0 or state.betting_stopped
        events.append(RoundEnded(state.round, reason, game_over))
        if not game_over:
            return self._begin_round(state, state.round + 1, (state.first + 1) % state.seats,
                                     events)
        end = NO_BUTTON_TO_BET if state.betting_stopped else RESERVE_EMPTY
        scores = tuple(product_score(hand) for hand in state.hands)
        state = state._replace(phase=OVER, to_move=None, end=end)
        events.append(BoutonsEnded(end, state.hands, scores, winners(scores), on_cards(state),
                                   state.centre))
        return state

    # --- the protocol ---------------------------------------------------------------------

    def to_act(self, state: BoutonsState) -> frozenset[int]:
        return frozenset() if state.to_move is None else frozenset((state.to_move,))

    def legal_actions(self, state: BoutonsState, seat: int) -> Sequence[Action]:
        """Bets card by card (suit order), colour by colour; or the one flip."""
        if state.to_move != seat:
            return []
        if state.phase == DRAWING:
            return [FLIP]
        hand = state.hands[seat]
        covered = tuple(any(card) for card in state.cards[seat])
        key = (seat, hand, covered)
        bets = _LEGAL_BETS.get(key)
        if bets is None:
            allowed = [i for i in range(4) if not covered[i]] or range(4)
            cards = laid_out_cards(seat)
            bets = tuple(_BETS[colour, cards[i]] for i in allowed
                         for colour_index, colour in enumerate(ALL_COLOURS) if hand[colour_index])
            if len(_LEGAL_BETS) < _LEGAL_BETS_CACHE:
                _LEGAL_BETS[key] = bets
        return bets

    def apply(self, state: BoutonsState, seat: int,
              action: object) -> tuple[BoutonsState, list[Any]]:
        if not isinstance(action, (Bet, Flip)):
            raise invalid(Reason.WRONG_GAME_KIND, "La bataille des boutons knows bet and flip")
        if state.phase == OVER:
            raise precondition(Reason.GAME_OVER, "this game is over")
        if seat != state.to_move:
            raise precondition(Reason.NOT_YOUR_TURN, f"it is seat {state.to_move}'s turn")
        events: list[Any] = []
        if isinstance(action, Flip):
            if state.phase != DRAWING:
                raise precondition(Reason.NOT_ALLOWED_NOW, "nobody flips while betting")
            return self._flip(state, seat, events), events
        if state.phase != BETTING:
            raise precondition(Reason.NOT_ALLOWED_NOW, "betting is over: flip the top card")
        return self._bet(state, seat, action, events), events

    def _bet(self, state: BoutonsState, seat: int, bet: Bet, events: list[Any]) -> BoutonsState:
        colour = COLOUR_INDEX.get(bet.colour)
        if colour is None:
            raise invalid(Reason.INVALID_ACTION, f"no such button colour: {bet.colour!r}")
        card = bet.card
        if card.rank != laid_out_cards(seat)[0].rank or card.suit not in SUIT_INDEX:
            raise precondition(Reason.ILLEGAL_BET, "bet on one of your own laid-out cards")
        if not state.hands[seat][colour]:
            raise precondition(Reason.NO_BUTTON_OF_COLOUR, f"you have no {bet.colour} button")
        mine = state.cards[seat]
        suit = SUIT_INDEX[card.suit]
        if any(mine[suit]) and not all(any(c) for c in mine):
            raise precondition(Reason.ILLEGAL_BET,
                               "bet on a card with no button on it while you have one")
        hands = list(state.hands)
        hands[seat] = with_count(hands[seat], colour, -1)
        cards = list(state.cards)
        seat_cards = list(mine)
        seat_cards[suit] = with_count(seat_cards[suit], colour, 1)
        cards[seat] = tuple(seat_cards)
        placed = state.bets_placed + 1
        events.append(BetPlaced(seat, bet.colour, card, placed))
        after = (seat + 1) % state.seats
        if placed < BETS_PER_PLAYER * state.seats and any(hands[after]):
            return state._replace(hands=tuple(hands), cards=tuple(cards), bets_placed=placed,
                                  to_move=after)
        state = state._replace(hands=tuple(hands), cards=tuple(cards), bets_placed=placed)
        return self._next_bettor(state, events)

    def _flip(self, state: BoutonsState, seat: int, events: list[Any]) -> BoutonsState:
        card = state.deck[0]
        deck = state.deck[1:]
        events.append(CardFlipped(seat, card, len(deck)))
        owner = OWNER_OF_RANK.get(card.rank)
        if owner is not None and owner < state.seats:
            taken = state.cards[owner][SUIT_INDEX[card.suit]]
            if any(taken):
                hands = list(state.hands)
                hands[seat] = add(hands[seat], taken)
                cards = list(state.cards)
                seat_cards = list(cards[owner])
                seat_cards[SUIT_INDEX[card.suit]] = NO_BUTTONS
                cards[owner] = tuple(seat_cards)
                events.append(ButtonsTaken(seat, card, taken))
                state = state._replace(hands=tuple(hands), cards=tuple(cards))
        elif card == ACE_OF_HEARTS:
            if state.centre:
                taken = with_count(NO_BUTTONS, RESERVE_INDEX, state.centre)
                hands = list(state.hands)
                hands[seat] = add(hands[seat], taken)
                events.append(ButtonsTaken(seat, None, taken))
                state = state._replace(hands=tuple(hands), centre=0)
        elif card in BLACK_ACES:
            aces = (*state.black_aces, card)
            events.append(BlackAceSetAside(seat, card, len(aces)))
            state = state._replace(black_aces=aces)
            if len(aces) == len(BLACK_ACES):
                return self._end_round(state._replace(deck=deck, last_flip=card),
                                       SECOND_BLACK_ACE, events)
        state = state._replace(deck=deck, last_flip=card, to_move=(seat + 1) % state.seats)
        if len(events) > 1 and not state.centre and not on_cards(state):
            return self._end_round(state, NO_BUTTONS_LEFT, events)
        return state

    def outcome(self, state: BoutonsState) -> Outcome | None:
        if state.phase != OVER:
            return None
        scores = tuple(product_score(hand) for hand in state.hands)
        best = winners(scores)
        who = ", ".join(f"seat {s}" for s in best)
        why = ("the reserve is empty" if state.end == RESERVE_EMPTY
               else "a player had no button left to bet")
        shared = " share the win" if len(best) > 1 else " wins"
        summary = (f"{who}{shared} with {scores[best[0]]} points after round {state.round} "
                   f"({why}; scores {'-'.join(map(str, scores))})")
        return Outcome(best, scores, summary)

    def view(self, state: BoutonsState, seat: int | None) -> BoutonsView:
        scores = tuple(product_score(hand) for hand in state.hands)
        return BoutonsView(
            seats=state.seats, round=state.round, rounds=state.rounds, first=state.first,
            phase=state.phase, to_move=state.to_move,
            laid_out=tuple(
                tuple(LaidOutCard(card, buttons)
                      for card, buttons in zip(laid_out_cards(s), state.cards[s], strict=True))
                for s in range(state.seats)),
            hands=state.hands, centre=state.centre, reserve=state.reserve,
            black_aces=state.black_aces, deck_left=len(state.deck),
            bets_placed=state.bets_placed, last_flip=state.last_flip,
            betting_stopped=state.betting_stopped, scores=scores,
            winners=winners(scores) if state.phase == OVER else (), end=state.end)

    def redact(self, event: Any, seat: int | None) -> Any:
        return event  # no event carries a card still hidden in deck B

    def bot_action(self, state: BoutonsState, seat: int, strategy: str,
                   seed: int) -> Action | None:
        actions = self.legal_actions(state, seat)
        if not actions:
            return None
        if strategy == "random":
            return bots.random_action(actions, seed)
        return bots.heuristic_action(self.view(state, seat), seat, actions)

    # --- encoding -------------------------------------------------------------------------

    def encode_state(self, state: BoutonsState) -> JSON:
        return {
            "version": ENCODING_VERSION,
            "seats": state.seats, "rounds": state.rounds, "round": state.round,
            "first": state.first, "phase": state.phase, "to_move": state.to_move,
            "hands": [list(hand) for hand in state.hands],
            "cards": [[list(card) for card in seat_cards] for seat_cards in state.cards],
            "centre": state.centre, "reserve": state.reserve, "bets_placed": state.bets_placed,
            "deck": cards_to_text(state.deck), "black_aces": cards_to_text(state.black_aces),
            "last_flip": None if state.last_flip is None else str(state.last_flip),
            "betting_stopped": state.betting_stopped, "rng": str(state.rng),
            "stacked": None if state.stacked is None else cards_to_text(state.stacked),
            "end": state.end,
        }

    def decode_state(self, data: Mapping[str, Any]) -> BoutonsState:
        if data.get("version") != ENCODING_VERSION:
            raise ValueError(f"unknown Boutons state encoding: {data.get('version')!r}")
        return BoutonsState(
            seats=data["seats"], rounds=data["rounds"], round=data["round"],
            first=data["first"], phase=data["phase"], to_move=data["to_move"],
            hands=tuple(tuple(hand) for hand in data["hands"]),
            cards=tuple(tuple(tuple(card) for card in seat_cards)
                        for seat_cards in data["cards"]),
            centre=data["centre"], reserve=data["reserve"], bets_placed=data["bets_placed"],
            deck=cards_from_text(data["deck"]), black_aces=cards_from_text(data["black_aces"]),
            last_flip=None if data["last_flip"] is None else parse_card(data["last_flip"]),
            betting_stopped=data["betting_stopped"], rng=int(data["rng"]),
            stacked=None if data["stacked"] is None else cards_from_text(data["stacked"]),
            end=data["end"])

    def encode_action(self, action: Action) -> JSON:
        if isinstance(action, Flip):
            return {"type": "flip"}
        return {"type": "bet", "colour": action.colour, "card": str(action.card)}

    def decode_action(self, data: Mapping[str, Any]) -> Action:
        kind = data.get("type")
        if kind == "flip":
            return FLIP
        if kind == "bet":
            return Bet(str(data["colour"]), parse_card(str(data["card"])))
        raise ValueError(f"not a Boutons action: {data!r}")

    def encode_options(self, options: BoutonsOptions) -> JSON:
        return {"rounds": options.rounds}

    def decode_options(self, data: Mapping[str, Any]) -> BoutonsOptions:
        return BoutonsOptions(rounds=int(data.get("rounds", BoutonsOptions().rounds)))

