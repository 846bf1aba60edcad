"""Basra, RULES.md §4: 2 to 4 players (teams 0+2 and 1+3 at four), 52 cards, first to 101.

How a deal is dealt (this is also exactly how a stacked deck is used, top card first):

1. The deck is the stacked deck's next 52 cards (``GameSetup.stacked_deck`` may hold 52 cards
   per deal, one full deck each; later deals are shuffled with the game's PRNG) or a shuffle of
   the 52 cards. ``stacked_first`` is the first dealer (else drawn from the PRNG).
2. Hands: four rounds, one card at a time, to the playing seats in seat order starting with the
   seat after the dealer (the dealer is served last in each round).
3. Floor: the next four cards, face up, in that order. Inspection: the floor positions are
   inspected in the order laid; a jack or 7♦ there is buried in the stock with ⌊stock size / 2⌋
   cards above it, and its place is taken by the top card of the stock, which is inspected in
   turn; then the next position.
4. Whenever every playing hand is empty and the stock is not, four more cards each, dealt as in
   step 2 (no floor cards). The seat after the dealer always plays first.

Ties at the target: the tied sides play another deal among themselves (the dealer is the next
playing seat after the last dealer); a side that did not play it keeps its total and cannot win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapis_engine import rng
from tapis_engine.basra import bots
from tapis_engine.basra.captures import SEVEN_OF_DIAMONDS, basra_how, capture_options, hand_options
from tapis_engine.basra.scoring import score_deal, ten_of_diamonds_points
from tapis_engine.basra.state import (
    IRAQI,
    LEBANESE,
    TARGETS,
    VARIANTS,
    BasraEnded,
    BasraOptions,
    BasraScored,
    BasraState,
    BasraView,
    Captured,
    CardPlayed,
    DealScored,
    FloorLaid,
    HandsDealt,
    LeftoverSwept,
    PlayCard,
    TieDeal,
    seats_of_side,
    side_of,
    sides_of,
)
from tapis_engine.cards import (
    JACK,
    Card,
    cards_from_text,
    cards_to_text,
    parse_card,
    same_cards,
    standard_deck,
)
from tapis_engine.errors import Reason, invalid, precondition
from tapis_engine.protocol import JSON, GameSetup, Outcome

HAND_SIZE = 4
FLOOR_SIZE = 4
DECK_SIZE = 52
STATE_VERSION = 1


def _card_text(cards: tuple[Card, ...]) -> str:
    return "+".join(str(card) for card in cards) or "nothing"


def turn_order(playing: tuple[int, ...], dealer: int) -> tuple[int, ...]:
    """The playing seats in play order: from the seat after the dealer, the dealer last."""
    after = [s for s in playing if s > dealer]
    before = [s for s in playing if s <= dealer]
    return (*after, *before)


def deal_hands(stock: tuple[Card, ...], order: tuple[int, ...], seats: int
               ) -> tuple[tuple[tuple[Card, ...], ...], tuple[Card, ...]]:
    """Four cards each, one at a time in ``order``; return (hands per seat, rest of the stock)."""
    k = len(order)
    chunk = stock[:HAND_SIZE * k]
    hands: list[tuple[Card, ...]] = [() for _ in range(seats)]
    for position, seat in enumerate(order):
        hands[seat] = chunk[position::k]
    return tuple(hands), stock[HAND_SIZE * k:]


def lay_floor(stock: tuple[Card, ...]
              ) -> tuple[tuple[Card, ...], tuple[Card, ...], tuple[Card, ...], tuple[Card, ...]]:
    """Lay four cards and inspect them; return (laid, buried, floor, stock)."""
    laid = stock[:FLOOR_SIZE]
    floor = list(laid)
    rest = list(stock[FLOOR_SIZE:])
    buried: list[Card] = []
    position = 0
    while position < len(floor):
        card = floor[position]
        if card.rank == JACK or card == SEVEN_OF_DIAMONDS:
            rest.insert(len(rest) // 2, card)
            buried.append(card)
            floor[position] = rest.pop(0)
        else:
            position += 1
    return laid, tuple(buried), tuple(floor), tuple(rest)


class BasraRules:
    """The rules of Basra."""

    kind = "basra"
    hides_events = True
    min_seats = 2
    max_seats = 4
    bot_takes_over_on_timeout = False
    bot_strategies: tuple[str, ...] = bots.STRATEGIES

    def default_options(self) -> BasraOptions:
        return BasraOptions()

    def check_options(self, options: BasraOptions) -> None:
        """Raise INVALID_OPTIONS for options that cannot be played."""
        if options.variant not in VARIANTS:
            raise invalid(Reason.INVALID_OPTIONS,
                          f"unknown variant {options.variant!r}; one of {', '.join(VARIANTS)}")
        if options.target not in TARGETS:
            raise invalid(Reason.INVALID_OPTIONS, "the target must be 101 or 151")
        if options.two_card_jack_basra and options.variant == LEBANESE:
            raise invalid(Reason.INVALID_OPTIONS,
                          "the two-card jack basra cannot be combined with the Lebanese variant")

    def check_setup(self, setup: GameSetup[BasraOptions]) -> None:
        if not self.min_seats <= setup.seats <= self.max_seats:
            raise invalid(Reason.INVALID_SEAT_COUNT, "Basra is for 2, 3 or 4 players")
        if not isinstance(setup.options, BasraOptions):
            raise invalid(Reason.WRONG_GAME_KIND, "these are not Basra options")
        self.check_options(setup.options)
        deck = setup.stacked_deck
        if deck is not None:
            full = standard_deck()
            chunks = [deck[i:i + DECK_SIZE] for i in range(0, len(deck), DECK_SIZE)]
            if not deck or len(deck) % DECK_SIZE or not all(
                    same_cards(chunk, full) for chunk in chunks):
                raise invalid(Reason.INVALID_STACKED_DECK,
                              "a stacked Basra deck holds the 52 cards, each once, per deal")
        if setup.stacked_first is not None and not 0 <= setup.stacked_first < setup.seats:
            raise invalid(Reason.INVALID_STACKED_DECK, "the first dealer must be one of the seats")

    def start(self, setup: GameSetup[BasraOptions]) -> tuple[BasraState, list[Any]]:
        self.check_setup(setup)
        seats = setup.seats
        state_rng = rng.derive(setup.seed)
        if setup.stacked_first is not None:
            dealer = setup.stacked_first
        else:
            dealer, state_rng = rng.below(state_rng, seats)
        sides = sides_of(seats)
        empty: tuple[tuple[Card, ...], ...] = tuple(() for _ in range(sides))
        state = BasraState(
            seats=seats, options=setup.options, rng=state_rng, deal=0, dealer=dealer,
            playing=tuple(range(seats)), hands=tuple(() for _ in range(seats)), floor=(),
            stock=(), captured=empty, basras=(0,) * sides, scores=(0,) * sides, to_move=None,
            last_capturer=None, stacked=setup.stacked_deck or ())
        events: list[Any] = []
        return self._begin_deal(state, tuple(range(seats)), dealer, events), events

    def _begin_deal(self, state: BasraState, playing: tuple[int, ...], dealer: int,
                    events: list[Any]) -> BasraState:
        state_rng = state.rng
        if state.stacked:
            deck, stacked = state.stacked[:DECK_SIZE], state.stacked[DECK_SIZE:]
        else:
            deck, state_rng = rng.shuffled(state_rng, standard_deck())
            stacked = ()
        order = turn_order(playing, dealer)
        hands, stock = deal_hands(deck, order, state.seats)
        laid, buried, floor, stock = lay_floor(stock)
        deal = state.deal + 1
        sizes = tuple(len(hand) for hand in hands)
        events.append(HandsDealt(deal, dealer, 1, sizes, len(stock), hands))
        events.append(FloorLaid(laid, buried, floor, len(stock)))
        sides = sides_of(state.seats)
        return BasraState(
            seats=state.seats, options=state.options, rng=state_rng, deal=deal, dealer=dealer,
            playing=playing, hands=hands, floor=floor, stock=stock,
            captured=tuple(() for _ in range(sides)), basras=(0,) * sides, scores=state.scores,
            to_move=order[0], last_capturer=None, stacked=stacked)

    def to_act(self, state: BasraState) -> frozenset[int]:
        return frozenset() if state.to_move is None else frozenset((state.to_move,))

    def options_for(self, state: BasraState, card: Card) -> tuple[tuple[Card, ...], ...]:
        """The capture options of ``card`` on the current floor, the default first."""
        variant = state.options.variant
        return capture_options(card, state.floor, variant != LEBANESE,
                               ten_of_diamonds_points(variant))

    def legal_actions(self, state: BasraState, seat: int) -> Sequence[PlayCard]:
        if state.over or state.to_move != seat:
            return []
        variant = state.options.variant
        pairs = hand_options(sorted(state.hands[seat]), state.floor, variant != LEBANESE,
                             ten_of_diamonds_points(variant))
        return [PlayCard(card, option) for card, options in pairs for option in options]

    def apply(self, state: BasraState, seat: int, action: object
              ) -> tuple[BasraState, list[Any]]:
        if not isinstance(action, PlayCard):
            raise invalid(Reason.WRONG_GAME_KIND, "a Basra action plays a card")
        if state.over:
            raise precondition(Reason.GAME_OVER, "this game is over")
        if seat != state.to_move:
            raise precondition(Reason.NOT_YOUR_TURN, f"it is seat {state.to_move}'s turn")
        card = action.card
        hand = state.hands[seat]
        if card not in hand:
            raise precondition(Reason.CARD_NOT_IN_HAND, f"{card} is not in your hand")
        variant = state.options.variant
        options = capture_options(card, state.floor, variant != LEBANESE,
                                  6 if variant == IRAQI else 3)
        if action.capture is None:
            taken = options[0]
        else:
            taken = tuple(sorted(action.capture))
            if taken not in options:
                choices = " or ".join(_card_text(option) for option in options)
                raise precondition(Reason.ILLEGAL_CAPTURE,
                                   f"{card} cannot take {_card_text(taken)}; it takes {choices}")
        return self._play(state, seat, card, taken)

    def _play(self, state: BasraState, seat: int, card: Card, taken: tuple[Card, ...]
              ) -> tuple[BasraState, list[Any]]:
        seats = state.seats
        options = state.options
        hands = list(state.hands)
        remaining_hand = list(hands[seat])
        remaining_hand.remove(card)
        new_hand = hands[seat] = tuple(remaining_hand)
        floor = state.floor
        captured = state.captured
        basras = state.basras
        last_capturer = state.last_capturer
        events: list[Any] = [CardPlayed(seat, card, len(new_hand))]
        if taken:
            side = side_of(seats, seat)
            piles = list(captured)
            piles[side] = piles[side] + taken + (card,)
            captured = tuple(piles)
            remaining = tuple(c for c in floor if c not in taken)
            events.append(Captured(seat, side, card, taken, tuple(map(len, captured))))
            how = basra_how(options, card, floor, remaining)
            if how is not None:
                counts = list(basras)
                counts[side] += 1
                basras = tuple(counts)
                events.append(BasraScored(seat, side, how, basras))
            floor = remaining
            last_capturer = seat
        else:
            floor = (*floor, card)
        playing = state.playing
        stock = state.stock
        to_move: int | None
        if new_hand or any(hands[s] for s in playing):
            to_move = playing[(playing.index(seat) + 1) % len(playing)]
        elif stock:
            order = turn_order(playing, state.dealer)
            dealt, stock = deal_hands(stock, order, seats)
            hands = list(dealt)
            round_number = (DECK_SIZE - FLOOR_SIZE - len(stock)) // (HAND_SIZE * len(order))
            events.append(HandsDealt(state.deal, state.dealer, round_number,
                                     tuple(len(h) for h in dealt), len(stock), dealt))
            to_move = order[0]
        else:
            to_move = None
        # Positional (field order) on the hot path: keywords cost several times more here.
        new = BasraState(seats, options, state.rng, state.deal, state.dealer, playing,
                         tuple(hands), floor, stock, captured, basras, state.scores, to_move,
                         last_capturer, (), False, state.stacked)
        if to_move is None:
            new = self._end_deal(new, events)
        return new, events

    def _end_deal(self, state: BasraState, events: list[Any]) -> BasraState:
        seats = state.seats
        captured = state.captured
        if state.floor:
            last = state.last_capturer
            side = None if last is None else side_of(seats, last)
            if side is not None:
                piles = list(captured)
                piles[side] = piles[side] + state.floor
                captured = tuple(piles)
            events.append(LeftoverSwept(last, side, state.floor, tuple(len(p) for p in captured)))
        playing_sides = tuple(sorted({side_of(seats, s) for s in state.playing}))
        lines, totals = score_deal(seats, state.options.variant, playing_sides, captured,
                                   state.basras, state.scores)
        events.append(DealScored(state.deal, lines, totals))
        reached = [side for side in playing_sides if totals[side] >= state.options.target]
        ended = BasraState(
            seats=seats, options=state.options, rng=state.rng, deal=state.deal,
            dealer=state.dealer, playing=state.playing, hands=state.hands, floor=(), stock=(),
            captured=captured, basras=state.basras, scores=totals, to_move=None,
            last_capturer=state.last_capturer, stacked=state.stacked)
        next_playing = tuple(range(seats))
        if reached:
            top = max(totals[side] for side in reached)
            best = tuple(side for side in reached if totals[side] == top)
            if len(best) == 1:
                winners = best
                winning_seats = seats_of_side(seats, best[0])
                events.append(BasraEnded(winners, winning_seats, totals))
                return BasraState(
                    seats=seats, options=state.options, rng=state.rng, deal=state.deal,
                    dealer=state.dealer, playing=state.playing, hands=state.hands, floor=(),
                    stock=(), captured=captured, basras=state.basras, scores=totals,
                    to_move=None, last_capturer=state.last_capturer, winners=winners, over=True,
                    stacked=state.stacked)
            next_playing = tuple(sorted(s for side in best for s in seats_of_side(seats, side)))
            events.append(TieDeal(best, next_playing))
        dealer = turn_order(next_playing, state.dealer)[0]
        return self._begin_deal(ended, next_playing, dealer, events)

    def outcome(self, state: BasraState) -> Outcome | None:
        if not state.over:
            return None
        seats = state.seats
        scores = tuple(state.scores[side_of(seats, s)] for s in range(seats))
        winners = tuple(sorted(s for side in state.winners for s in seats_of_side(seats, side)))
        names = " and ".join(f"seat {s}" for s in winners)
        totals = "-".join(str(score) for score in state.scores)
        return Outcome(winners, scores, f"{names} win{'s' if len(winners) == 1 else ''} "
                                        f"{totals} after {state.deal} deals")

    def view(self, state: BasraState, seat: int | None) -> BasraView:
        if seat is not None and not 0 <= seat < state.seats:
            raise invalid(Reason.INVALID_ACTION, f"there is no seat {seat}")
        return BasraView(
            seat=seat, hand=None if seat is None else tuple(sorted(state.hands[seat])),
            floor=state.floor, stock_size=len(state.stock),
            hand_sizes=tuple(len(hand) for hand in state.hands),
            captured_counts=tuple(len(pile) for pile in state.captured), basras=state.basras,
            scores=state.scores, dealer=state.dealer, to_move=state.to_move, deal=state.deal,
            playing=state.playing, last_capturer=state.last_capturer,
            variant=state.options.variant, two_card_jack_basra=state.options.two_card_jack_basra,
            target=state.options.target, teams=state.seats == 4, winners=state.winners,
            over=state.over)

    def redact(self, event: Any, seat: int | None) -> Any:
        if isinstance(event, HandsDealt):
            hands = tuple(hand if s == seat else None for s, hand in enumerate(event.hands))
            return HandsDealt(event.deal, event.dealer, event.round, event.hand_sizes,
                              event.stock_size, hands)
        return event  # every other event holds only public cards

    def bot_action(self, state: BasraState, seat: int, strategy: str, seed: int
                   ) -> PlayCard | None:
        if state.over or state.to_move != seat:
            return None
        if strategy == "random":
            # legal_actions(state, seat)[index], without building every action.
            variant = state.options.variant
            pairs = hand_options(sorted(state.hands[seat]), state.floor, variant != LEBANESE,
                                 ten_of_diamonds_points(variant))
            index, _ = rng.below(seed, sum(len(options) for _, options in pairs))
            for card, options in pairs:
                if index < len(options):
                    return PlayCard(card, options[index])
                index -= len(options)
        legal = self.legal_actions(state, seat)
        seen = tuple(card for pile in state.captured for card in pile)
        return bots.heuristic(self.view(state, seat), legal, seen)

    # --- encoding ---

    def encode_state(self, state: BasraState) -> JSON:
        return {
            "version": STATE_VERSION,
            "seats": state.seats,
            "options": self.encode_options(state.options),
            "rng": str(state.rng),
            "deal": state.deal,
            "dealer": state.dealer,
            "playing": list(state.playing),
            "hands": [cards_to_text(hand) for hand in state.hands],
            "floor": cards_to_text(state.floor),
            "stock": cards_to_text(state.stock),
            "captured": [cards_to_text(pile) for pile in state.captured],
            "basras": list(state.basras),
            "scores": list(state.scores),
            "to_move": state.to_move,
            "last_capturer": state.last_capturer,
            "winners": list(state.winners),
            "over": state.over,
            "stacked": cards_to_text(state.stacked),
        }

    def decode_state(self, data: Mapping[str, Any]) -> BasraState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"unknown Basra state version {data.get('version')!r}")
        return BasraState(
            seats=int(data["seats"]), options=self.decode_options(data["options"]),
            rng=int(data["rng"]), deal=int(data["deal"]), dealer=int(data["dealer"]),
            playing=tuple(int(s) for s in data["playing"]),
            hands=tuple(cards_from_text(hand) for hand in data["hands"]),
            floor=cards_from_text(data["floor"]), stock=cards_from_text(data["stock"]),
            captured=tuple(cards_from_text(pile) for pile in data["captured"]),
            basras=tuple(int(b) for b in data["basras"]),
            scores=tuple(int(s) for s in data["scores"]), to_move=data["to_move"],
            last_capturer=data["last_capturer"],
            winners=tuple(int(w) for w in data["winners"]), over=bool(data["over"]),
            stacked=cards_from_text(data["stacked"]))

    def encode_action(self, action: PlayCard) -> JSON:
        return {"type": "play", "card": str(action.card),
                "capture": None if action.capture is None else cards_to_text(action.capture)}

    def decode_action(self, data: Mapping[str, Any]) -> PlayCard:
        if data.get("type") != "play":
            raise ValueError(f"not a Basra action: {data!r}")
        capture = data.get("capture")
        return PlayCard(parse_card(data["card"]),
                        None if capture is None else cards_from_text(list(capture)))

    def encode_options(self, options: BasraOptions) -> JSON:
        return {"variant": options.variant, "two_card_jack_basra": options.two_card_jack_basra,
                "target": options.target}

    def decode_options(self, data: Mapping[str, Any]) -> BasraOptions:
        return BasraOptions(variant=str(data["variant"]),
                            two_card_jack_basra=bool(data["two_card_jack_basra"]),
                            target=int(data["target"]))
