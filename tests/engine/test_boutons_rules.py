"""La bataille des boutons: one test per rule and per ruling of RULES.md §3."""

from __future__ import annotations

from typing import Any

import pytest

from tapis_engine.boutons import (
    RULES,
    Bet,
    BetPlaced,
    BettingStopped,
    BlackAceSetAside,
    BoutonsEnded,
    BoutonsOptions,
    BoutonsState,
    ButtonsTaken,
    CardFlipped,
    DrawStarted,
    Flip,
    ReserveToCentre,
    RoundEnded,
)
from tapis_engine.boutons.buttons import total
from tapis_engine.boutons.scoring import product_score, winners
from tapis_engine.boutons.state import (
    ALL_COLOURS,
    BETTING,
    DECK_B,
    DRAWING,
    NO_BUTTONS,
    OVER,
    RESERVE_INDEX,
)
from tapis_engine.cards import Card, parse_card
from tapis_engine.errors import ErrorKind, Reason, RuleError
from tapis_engine.protocol import GameSetup
from tests.support.cards import cards


def stacked(*top: str) -> tuple[Card, ...]:
    """Deck B with ``top`` first (in that order), then the other cards in their usual order."""
    first = cards(*top)
    return first + tuple(card for card in DECK_B if card not in first)


def start(seats: int = 2, seed: int = 7, rounds: int = 6,
          deck: tuple[Card, ...] | None = None) -> tuple[BoutonsState, list[Any]]:
    return RULES.start(GameSetup(seats, seed, BoutonsOptions(rounds=rounds), stacked_deck=deck))


def act(state: BoutonsState, action: Any) -> tuple[BoutonsState, list[Any]]:
    """Apply ``action`` for the seat whose turn it is."""
    assert state.to_move is not None
    return RULES.apply(state, state.to_move, action)


def bet_round(state: BoutonsState) -> tuple[BoutonsState, list[Any]]:
    """Every bettor plays their first legal bet until betting is over."""
    events: list[Any] = []
    while state.phase == BETTING:
        assert state.to_move is not None
        state, new = act(state, RULES.legal_actions(state, state.to_move)[0])
        events += new
    return state, events


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def hand(**counts: int) -> tuple[int, ...]:
    return tuple(counts.get(colour, 0) for colour in ALL_COLOURS)


# --- set-up -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seats", [1, 5])
def test_two_to_four_players(seats: int) -> None:
    with pytest.raises(RuleError) as error:
        start(seats)
    assert error.value.reason == Reason.INVALID_SEAT_COUNT


def test_deck_b_is_31_cards_without_ace_of_diamonds() -> None:
    state, _ = bet_round(start(2)[0])
    assert len(state.deck) == 31
    assert parse_card("AD") not in state.deck
    assert len(set(state.deck)) == 31
    assert all(card.rank >= 7 for card in state.deck)


def test_laid_out_cards_jacks_queens_kings_tens() -> None:
    view = RULES.view(start(4)[0], 0)
    assert [[str(laid.card) for laid in seat] for seat in view.laid_out] == [
        ["JC", "JD", "JH", "JS"], ["QC", "QD", "QH", "QS"],
        ["KC", "KD", "KH", "KS"], ["10C", "10D", "10H", "10S"]]


def test_two_players_lay_out_only_jacks_and_queens() -> None:
    assert len(RULES.view(start(2)[0], None).laid_out) == 2


def test_ruling_deal_colour_by_colour_round_robin_two_players() -> None:
    state, _ = start(2)
    assert state.hands == (hand(red=2, blue=2, green=2, yellow=2),) * 2


def test_ruling_deal_colour_by_colour_round_robin_three_players() -> None:
    state, _ = start(3)
    assert state.hands[0] == hand(red=2, blue=1, green=1, yellow=2, black=1, white=1)
    assert state.hands[1] == hand(red=1, blue=2, green=1, yellow=1, black=2, white=1)
    assert state.hands[2] == hand(red=1, blue=1, green=2, yellow=1, black=1, white=2)


def test_ruling_deal_colour_by_colour_round_robin_four_players() -> None:
    state, _ = start(4)
    assert state.hands == (hand(red=1, blue=1, green=1, yellow=1, black=1, white=1,
                                orange=1, purple=1),) * 4


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_four_buttons_of_each_colour_and_a_reserve(seats: int) -> None:
    state, _ = start(seats, rounds=6)
    per_colour = [sum(h[c] for h in state.hands) for c in range(len(ALL_COLOURS))]
    assert per_colour[: 2 * seats] == [4] * (2 * seats)
    assert sum(per_colour) == 8 * seats
    assert state.reserve + state.centre == 6


def test_ruling_rounds_is_an_option_default_six() -> None:
    assert RULES.default_options().rounds == 6
    with pytest.raises(RuleError) as error:
        start(rounds=0)
    assert error.value.reason == Reason.INVALID_OPTIONS


def test_ruling_stacked_deck_b_validated() -> None:
    for deck in (stacked()[:30], stacked()[:30] + cards("AD"), stacked()[:30] + cards("7C")):
        with pytest.raises(RuleError) as error:
            start(deck=deck)
        assert error.value.reason == Reason.INVALID_STACKED_DECK
        assert error.value.kind == ErrorKind.INVALID


def test_ruling_stacked_deck_used_in_order_every_round() -> None:
    deck = stacked("7H", "8H", "9H")
    state, _ = bet_round(start(deck=deck)[0])
    assert state.deck == deck
    state, _ = act(state, Flip())
    while state.round == 1:
        state, _ = act(state, Flip())
    state, _ = bet_round(state)
    assert state.deck == deck


def draw_orders(state: BoutonsState, rounds: int) -> list[tuple[Card, ...]]:
    """Deck B as each of the next ``rounds`` rounds starts drawing (every bet and flip the
    first legal one)."""
    orders = []
    for _ in range(rounds):
        state, _ = bet_round(state)
        orders.append(state.deck)
        number = state.round
        while state.phase != OVER and state.round == number:
            state, _ = act(state, Flip())
    return orders


def test_ruling_stacked_deck_one_order_per_round() -> None:
    first, second = stacked("7H", "8H"), stacked("AS", "KD", "7C")
    state, _ = start(deck=first + second, rounds=6)
    assert draw_orders(state, 3) == [first, second, first]  # round r: order (r - 1) mod k
    each = [stacked(top) for top in ("7H", "8H", "9H", "10H", "JH", "QH")]
    state, _ = start(deck=tuple(card for order in each for card in order), rounds=6)
    assert draw_orders(state, 6) == each


def test_ruling_stacked_deck_orders_validated() -> None:
    two = stacked() + stacked("8S")
    for deck, rounds in ((two[:-1] + cards("8S"), 6),  # the second order lacks a card
                         (two[:-1], 6),  # not a whole number of orders
                         (two, 1),  # more orders than rounds
                         ((), 6)):
        with pytest.raises(RuleError) as error:
            start(deck=deck, rounds=rounds)
        assert error.value.reason == Reason.INVALID_STACKED_DECK
    assert start(deck=two, rounds=2)[0].stacked == two


# --- betting ------------------------------------------------------------------------------------


def test_first_player_moves_a_reserve_button_to_the_centre() -> None:
    state, events = start(3, rounds=4)
    assert events[0] == ReserveToCentre(round=1, first=0, reserve_left=3, centre=1)
    assert (state.reserve, state.centre) == (3, 1)


def test_ruling_first_player_is_seat_0_then_rotates() -> None:
    state, _ = start(3, rounds=6, deck=stacked("AC", "AS"))
    full = state.hands
    firsts = []
    while state.phase != OVER:
        firsts.append(state.first)
        assert state.to_move == state.first
        state, _ = bet_round(state._replace(hands=full))
        while state.phase == DRAWING:
            state, _ = act(state, Flip())
    assert firsts == [0, 1, 2, 0, 1, 2]


def test_betting_from_first_player_round_the_table_four_each() -> None:
    state, _ = start(3)
    state = state._replace(first=1, to_move=1)
    order = []
    while state.phase != DRAWING:
        assert state.to_move is not None
        order.append(state.to_move)
        state, _ = act(state, RULES.legal_actions(state, state.to_move)[0])
    assert order == [1, 2, 0] * 4
    assert state.bets_placed == 12


def test_bet_moves_one_button_to_own_card() -> None:
    state, _ = start(2)
    after, events = act(state, Bet("blue", parse_card("JH")))
    assert events == [BetPlaced(0, "blue", parse_card("JH"), 1)]
    assert after.hands[0] == hand(red=2, blue=1, green=2, yellow=2)
    assert after.cards[0][2] == hand(blue=1)
    assert after.to_move == 1


def test_bet_only_on_own_laid_out_cards() -> None:
    state, _ = start(2)
    for card in ("QC", "KC", "7C"):
        with pytest.raises(RuleError) as error:
            act(state, Bet("red", parse_card(card)))
        assert error.value.reason == Reason.ILLEGAL_BET
        assert error.value.kind == ErrorKind.PRECONDITION  # one code per reason


def test_bet_only_a_colour_you_hold() -> None:
    state, _ = start(2)
    with pytest.raises(RuleError) as error:
        act(state, Bet("purple", parse_card("JC")))
    assert error.value.reason == Reason.NO_BUTTON_OF_COLOUR
    with pytest.raises(RuleError) as error:
        act(state, Bet("reserve", parse_card("JC")))
    assert error.value.reason == Reason.NO_BUTTON_OF_COLOUR


def test_unknown_colour_is_invalid() -> None:
    with pytest.raises(RuleError) as error:
        act(start(2)[0], Bet("mauve", parse_card("JC")))
    assert error.value.reason == Reason.INVALID_ACTION


def test_uncovered_cards_first() -> None:
    state, _ = start(2)
    state, _ = act(state, Bet("red", parse_card("JC")))
    state, _ = act(state, Bet("red", parse_card("QC")))
    with pytest.raises(RuleError) as error:
        act(state, Bet("blue", parse_card("JC")))
    assert error.value.reason == Reason.ILLEGAL_BET
    assert {a.card for a in RULES.legal_actions(state, 0)} == set(cards("JD", "JH", "JS"))


def test_ruling_covered_from_earlier_rounds_counts_as_covered() -> None:
    state, _ = start(2)
    covered = tuple(hand(green=1) if i < 3 else NO_BUTTONS for i in range(4))
    state = state._replace(cards=(covered, state.cards[1]))
    assert {a.card for a in RULES.legal_actions(state, 0)} == set(cards("JS"))


def test_any_own_card_once_all_are_covered() -> None:
    state, _ = start(2)
    state = state._replace(cards=((hand(green=1),) * 4, state.cards[1]))
    assert {a.card for a in RULES.legal_actions(state, 0)} == set(cards("JC", "JD", "JH", "JS"))
    after, _ = act(state, Bet("red", parse_card("JC")))
    assert after.cards[0][0] == hand(green=1, red=1)


def test_reserve_buttons_won_can_be_bet() -> None:
    state, _ = start(2)
    state = state._replace(hands=(hand(reserve=1), state.hands[1]))
    expected = [Bet("reserve", c) for c in cards("JC", "JD", "JH", "JS")]
    assert list(RULES.legal_actions(state, 0)) == expected
    after, _ = act(state, Bet("reserve", parse_card("JD")))
    assert after.cards[0][1][RESERVE_INDEX] == 1


def test_betting_stops_when_bettor_has_no_buttons() -> None:
    state, _ = start(2)
    state = state._replace(hands=(hand(red=1), state.hands[1]))
    state, _ = act(state, Bet("red", parse_card("JC")))
    state, _ = act(state, Bet("red", parse_card("QC")))
    assert state.phase == DRAWING
    assert state.betting_stopped


def test_betting_stopped_event_and_game_ends_after_that_round() -> None:
    state, _ = start(2, rounds=6, deck=stacked("AC", "AS"))
    state = state._replace(hands=(hand(red=1), state.hands[1]))
    state, _ = act(state, Bet("red", parse_card("JC")))
    state, events = act(state, Bet("red", parse_card("QC")))
    assert BettingStopped(0) in events
    assert of_type(events, DrawStarted) == [DrawStarted(1, 31)]
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    assert RoundEnded(1, "second_black_ace", True) in events
    assert state.phase == OVER and state.end == "no_button_to_bet"
    assert state.reserve == 5


def test_ruling_player_without_buttons_after_a_round_plays_on() -> None:
    state, _ = start(2, rounds=6, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    state = state._replace(hands=(NO_BUTTONS, state.hands[1]),
                           reserve=state.reserve, centre=state.centre)
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    # Round 2: seat 1 is first and bets; seat 0 then has nothing: betting stops.
    assert state.round == 2 and state.phase == "betting" and state.to_move == 1
    state, events = act(state, RULES.legal_actions(state, 1)[0])
    assert BettingStopped(0) in events


def test_first_player_with_no_buttons_stops_betting_at_once() -> None:
    state, _ = start(2, rounds=6, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    state = state._replace(hands=(state.hands[0], NO_BUTTONS))
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    assert BettingStopped(1) in events
    assert state.phase == DRAWING and state.to_move == 0


def test_nobody_flips_while_betting_nor_bets_while_drawing() -> None:
    state, _ = start(2)
    with pytest.raises(RuleError) as error:
        act(state, Flip())
    assert error.value.reason == Reason.NOT_ALLOWED_NOW
    drawing, _ = bet_round(state)
    with pytest.raises(RuleError) as error:
        act(drawing, Bet("red", parse_card("QC")))
    assert error.value.reason == Reason.NOT_ALLOWED_NOW


def test_only_the_seat_due_may_act() -> None:
    state, _ = start(2)
    with pytest.raises(RuleError) as error:
        RULES.apply(state, 1, Bet("red", parse_card("QC")))
    assert error.value.reason == Reason.NOT_YOUR_TURN
    assert RULES.legal_actions(state, 1) == []


def test_illegal_action_changes_nothing() -> None:
    state, _ = start(2)
    before = RULES.encode_state(state)
    with pytest.raises(RuleError):
        act(state, Bet("red", parse_card("QC")))
    assert RULES.encode_state(state) == before


def test_wrong_action_type_is_refused() -> None:
    with pytest.raises(RuleError) as error:
        act(start(2)[0], "flip")
    assert error.value.reason == Reason.WRONG_GAME_KIND


# --- drawing ------------------------------------------------------------------------------------


def test_drawing_starts_with_the_second_player_and_goes_round() -> None:
    state, _ = start(3, deck=stacked("7C", "7D", "7H", "7S"))
    state, events = bet_round(state)
    assert of_type(events, DrawStarted) == [DrawStarted(1, 31)]
    order = []
    for _ in range(4):
        assert state.to_move is not None
        order.append(state.to_move)
        state, _ = act(state, Flip())
    assert order == [1, 2, 0, 1]


def test_every_flip_waits_for_its_seat() -> None:
    state, _ = bet_round(start(2)[0])
    assert RULES.to_act(state) == frozenset({1})
    assert RULES.legal_actions(state, 1) == [Flip()]
    assert RULES.legal_actions(state, 0) == []


def test_twin_takes_the_buttons_on_that_card() -> None:
    state, _ = start(2, deck=stacked("JC"))
    state, _ = bet_round(state)
    on_jc = state.cards[0][0]
    assert any(on_jc)
    before = state.hands[1]
    state, events = act(state, Flip())
    jc = parse_card("JC")
    assert events[:2] == [CardFlipped(1, jc, 30), ButtonsTaken(1, jc, on_jc)]
    assert state.hands[1] == tuple(a + b for a, b in zip(before, on_jc, strict=True))
    assert state.cards[0][0] == NO_BUTTONS


def test_ruling_tens_are_figures_too() -> None:
    state, _ = start(4, deck=stacked("10S"))
    state, _ = bet_round(state)
    on_ten = state.cards[3][3]
    state, events = act(state, Flip())
    assert ButtonsTaken(1, parse_card("10S"), on_ten) in events
    assert state.cards[3][3] == NO_BUTTONS


def test_ruling_twin_of_a_seat_not_at_the_table_does_nothing() -> None:
    state, _ = start(2, deck=stacked("KC", "10H"))
    state, _ = bet_round(state)
    for _ in range(2):
        before = state
        state, events = act(state, Flip())
        assert len(events) == 1
        assert state.hands == before.hands and state.cards == before.cards


def test_ace_of_hearts_takes_the_centre() -> None:
    state, _ = start(2, deck=stacked("AH"))
    state, _ = bet_round(state)
    state = state._replace(centre=3, reserve=state.reserve - 2)
    state, events = act(state, Flip())
    assert ButtonsTaken(1, None, hand(reserve=3)) in events
    assert state.centre == 0 and state.hands[1][RESERVE_INDEX] == 3


def test_black_ace_set_aside_second_ends_the_round() -> None:
    state, _ = start(2, deck=stacked("AC", "7D", "AS"))
    state, _ = bet_round(state)
    state, events = act(state, Flip())
    assert events[-1] == BlackAceSetAside(1, parse_card("AC"), 1)
    assert state.black_aces == cards("AC")
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    assert BlackAceSetAside(1, parse_card("AS"), 2) in events
    assert RoundEnded(1, "second_black_ace", False) in events
    assert state.round == 2 and state.black_aces == ()


def test_other_cards_do_nothing() -> None:
    state, _ = start(2, deck=stacked("8D"))
    state, _ = bet_round(state)
    after, events = act(state, Flip())
    assert events == [CardFlipped(1, parse_card("8D"), 30)]
    assert after.hands == state.hands and after.cards == state.cards


def test_round_ends_when_no_button_is_left() -> None:
    state, _ = start(2, deck=stacked("AH", "JC"))
    state, _ = bet_round(state)
    only_jc = (state.cards[0][0], NO_BUTTONS, NO_BUTTONS, NO_BUTTONS)
    state = state._replace(cards=(only_jc, (NO_BUTTONS,) * 4))
    state, events = act(state, Flip())
    assert state.round == 1
    state, events = act(state, Flip())
    assert RoundEnded(1, "no_buttons_left", False) in events
    assert state.round == 2 and state.first == 1


def test_ruling_buttons_not_taken_stay_for_the_next_round() -> None:
    state, _ = start(2, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    on_cards = state.cards
    state, _ = act(state, Flip())
    state, _ = act(state, Flip())
    assert state.round == 2
    assert state.cards == on_cards
    assert state.centre == 2


def test_ruling_deck_b_whole_and_reshuffled_each_round() -> None:
    state, _ = bet_round(start(2, seed=3)[0])
    first_order = state.deck
    while state.round == 1:
        state, _ = act(state, Flip())
    state, events = bet_round(state)
    assert of_type(events, DrawStarted) == [DrawStarted(0, 31)]
    assert len(state.deck) == 31 and state.deck != first_order


def test_ruling_round_ends_at_once_nobody_flips_after() -> None:
    state, _ = start(3, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    assert isinstance(events[-1], ReserveToCentre)
    assert state.phase == "betting" and state.to_move == 1


# --- the end and the score ----------------------------------------------------------------------


def test_game_ends_after_the_round_the_reserve_became_empty() -> None:
    state, _ = start(2, rounds=2, deck=stacked("AC", "AS"))
    for number in (1, 2):
        assert state.round == number
        state, _ = bet_round(state)
        state, _ = act(state, Flip())
        state, events = act(state, Flip())
    assert state.phase == OVER and state.end == "reserve_empty"
    assert RoundEnded(2, "second_black_ace", True) in events
    assert RULES.to_act(state) == frozenset()


def test_ruling_leftover_buttons_count_for_no_one() -> None:
    state, _ = start(2, rounds=1, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    state, _ = act(state, Flip())
    state, events = act(state, Flip())
    ended = events[-1]
    assert isinstance(ended, BoutonsEnded)
    assert ended.left_on_cards == 8 and ended.left_in_centre == 1
    assert ended.scores == tuple(product_score(h) for h in state.hands)
    outcome = RULES.outcome(state)
    assert outcome is not None and outcome.scores == ended.scores
    assert sum(sum(h) for h in ended.hands) == 16 - 8


def test_score_is_product_of_pile_sizes() -> None:
    assert product_score(hand(red=3, blue=2, green=2, reserve=1)) == 12
    assert product_score(hand(red=3, blue=2, green=2, reserve=1, yellow=0)) == 12
    assert product_score(hand(red=5)) == 5


def test_score_with_no_buttons_is_zero() -> None:
    assert product_score(NO_BUTTONS) == 0


def test_highest_score_wins_and_equal_scores_share() -> None:
    assert winners((12, 4, 12)) == (0, 2)
    assert winners((1, 6)) == (1,)


def test_outcome_shared_win() -> None:
    state, _ = start(2, rounds=1)
    state = state._replace(phase=OVER, to_move=None, end="reserve_empty",
                           hands=(hand(red=2, blue=3), hand(green=6)))
    outcome = RULES.outcome(state)
    assert outcome is not None
    assert outcome.winners == (0, 1) and outcome.scores == (6, 6)
    assert "share" in outcome.summary


def test_actions_after_the_end_are_refused() -> None:
    state, _ = start(2, rounds=1, deck=stacked("AC", "AS"))
    state, _ = bet_round(state)
    state, _ = act(state, Flip())
    state, _ = act(state, Flip())
    with pytest.raises(RuleError) as error:
        RULES.apply(state, 0, Flip())
    assert error.value.reason == Reason.GAME_OVER


def test_buttons_total_is_players_cards_centre_reserve() -> None:
    state, _ = start(4, rounds=5)
    assert total(state) == 32 + 5
