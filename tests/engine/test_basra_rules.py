"""Basra, RULES.md §4: one test per rule, ruling and variant."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tapis_engine.basra import RULES, BasraOptions, BasraState, PlayCard
from tapis_engine.basra.scoring import score_deal
from tapis_engine.basra.state import (
    BasraEnded,
    BasraScored,
    Captured,
    DealScored,
    FloorLaid,
    HandsDealt,
    LeftoverSwept,
    TieDeal,
)
from tapis_engine.cards import Card, parse_card, standard_deck
from tapis_engine.errors import ErrorKind, Reason, RuleError
from tapis_engine.protocol import GameSetup
from tests.engine.basra_helpers import deck_for, hand_built, start
from tests.support.cards import cards


def play(state: BasraState, card: str, capture: str | None = None
         ) -> tuple[BasraState, list[Any]]:
    seat = state.to_move
    assert seat is not None
    chosen = None if capture is None else cards(capture)
    return RULES.apply(state, seat, PlayCard(parse_card(card), chosen))


def refused(state: BasraState, seat: int, action: Any, reason: Reason) -> RuleError:
    before = RULES.encode_state(state)
    with pytest.raises(RuleError) as info:
        RULES.apply(state, seat, action)
    assert info.value.reason == reason
    assert RULES.encode_state(state) == before, "a refused action changes nothing"
    return info.value


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# --- players, seats, options ----------------------------------------------------------------


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_two_three_or_four_players(seats: int) -> None:
    state, _ = RULES.start(GameSetup(seats, 3, BasraOptions()))
    assert len(state.hands) == seats
    assert all(len(hand) == 4 for hand in state.hands)


@pytest.mark.parametrize("seats", [1, 5])
def test_other_seat_counts_are_refused(seats: int) -> None:
    with pytest.raises(RuleError) as info:
        RULES.check_setup(GameSetup(seats, 3, BasraOptions()))
    assert info.value.reason == Reason.INVALID_SEAT_COUNT
    assert info.value.kind == ErrorKind.INVALID


def test_fifty_two_cards_no_jokers() -> None:
    state, _ = RULES.start(GameSetup(2, 9, BasraOptions()))
    everything = [c for h in state.hands for c in h] + list(state.floor) + list(state.stock)
    assert sorted(everything) == sorted(standard_deck())


def test_four_players_play_in_fixed_teams() -> None:
    state = hand_built(4, {0: "2H", 1: "3H", 2: "5S 9D", 3: "4H"}, floor="5C QH", to_move=2)
    state, events = play(state, "5S")
    assert of(events, Captured)[0].side == 0
    assert state.captured[0] == cards("5C 5S")
    assert len(state.captured) == 2


# --- the deal -------------------------------------------------------------------------------


def test_first_dealer_is_drawn_from_the_seed() -> None:
    dealers = {RULES.start(GameSetup(3, seed, BasraOptions()))[0].dealer for seed in range(40)}
    assert dealers == {0, 1, 2}
    again = [RULES.start(GameSetup(3, seed, BasraOptions()))[0].dealer for seed in range(5)]
    assert again == [RULES.start(GameSetup(3, seed, BasraOptions()))[0].dealer
                     for seed in range(5)]


def test_stacked_first_fixes_the_first_dealer() -> None:
    for dealer in range(3):
        state, _ = RULES.start(GameSetup(3, 5, BasraOptions(), standard_deck(), dealer))
        assert state.dealer == dealer


def test_hands_are_dealt_one_at_a_time_from_the_seat_after_the_dealer() -> None:
    deck = deck_for(3, 1, {2: "2C 3C 4C 5C", 0: "2D 3D 4D 5D", 1: "2H 3H 4H 5H"})
    assert deck[:3] == cards("2C 2D 2H")  # seat 2 first, the dealer (seat 1) last
    state, events = RULES.start(GameSetup(3, 5, BasraOptions(), deck, 1))
    assert state.hands == (cards("2D 3D 4D 5D"), cards("2H 3H 4H 5H"), cards("2C 3C 4C 5C"))
    assert state.floor == deck[12:16]
    assert state.stock == deck[16:]
    assert isinstance(events[0], HandsDealt) and isinstance(events[1], FloorLaid)


def test_floor_inspection_buries_jacks_and_the_seven_of_diamonds() -> None:
    state, events = start(2, 0, floor="JC 5C 7D 6H", top="JD 9S 8S")
    laid = of(events, FloorLaid)[0]
    assert laid.laid == cards("JC 5C 7D 6H")
    assert laid.buried == cards("JC JD 7D")
    # JC is replaced by JD (buried in turn), then 9S; 7D by 8S.
    assert state.floor == cards("9S 5C 8S 6H") == laid.floor
    # 40 cards in stock: each card went in with floor(40/2) = 20 above it, then the top left.
    assert len(state.stock) == 40
    assert state.stock[17:20] == cards("JC JD 7D")


def test_floor_inspection_keeps_the_floor_when_clean() -> None:
    state, events = start(2, 0, floor="2S 5C 7H 6H")
    assert of(events, FloorLaid)[0].buried == ()
    assert state.floor == cards("2S 5C 7H 6H")


@pytest.mark.parametrize(("seats", "rounds"), [(2, 6), (3, 4), (4, 3)])
def test_hands_of_four_until_the_stock_is_out(seats: int, rounds: int) -> None:
    state, events = RULES.start(GameSetup(seats, 11, BasraOptions()))
    dealt = of(events, HandsDealt)
    while state.deal == 1:
        state, new = RULES.apply(state, state.to_move, RULES.legal_actions(state,
                                                                           state.to_move)[0])
        dealt += [e for e in new if isinstance(e, HandsDealt) and e.deal == 1]
    assert [e.round for e in dealt] == list(range(1, rounds + 1))
    assert all(e.hand_sizes == (4,) * seats for e in dealt)
    assert dealt[-1].stock_size == 0


def test_player_after_the_dealer_plays_first() -> None:
    state, _ = start(3, 2)
    assert state.to_move == 0
    refused(state, 1, PlayCard(state.hands[1][0]), Reason.NOT_YOUR_TURN)


def test_the_deal_passes_to_the_next_seat() -> None:
    state, _ = RULES.start(GameSetup(3, 4, BasraOptions(), standard_deck(), 2))
    while state.deal == 1:
        state, _ = RULES.apply(state, state.to_move, RULES.legal_actions(state,
                                                                         state.to_move)[0])
    assert state.dealer == 0
    assert state.to_move == 1


def test_a_stacked_deck_may_hold_one_deck_per_deal() -> None:
    second = tuple(reversed(standard_deck()))
    deck = deck_for(2, 0, floor="2S 3S 4S 5S") + second
    state, _ = RULES.start(GameSetup(2, 4, BasraOptions(), deck, 0))
    while state.deal == 1:
        state, _ = RULES.apply(state, state.to_move, RULES.legal_actions(state,
                                                                         state.to_move)[0])
    assert state.hands[0] == second[0:8:2]  # dealer is now seat 1: seat 0 is served first


@pytest.mark.parametrize("deck", [standard_deck()[:51], standard_deck()[:51] * 2 + (Card(2, "C"),),
                                  standard_deck()[1:] + standard_deck()[:1] + (Card(2, "C"),)])
def test_a_wrong_stacked_deck_is_refused(deck: tuple[Card, ...]) -> None:
    with pytest.raises(RuleError) as info:
        RULES.check_setup(GameSetup(2, 1, BasraOptions(), deck, 0))
    assert info.value.reason == Reason.INVALID_STACKED_DECK


def test_a_first_dealer_outside_the_table_is_refused() -> None:
    with pytest.raises(RuleError) as info:
        RULES.check_setup(GameSetup(2, 1, BasraOptions(), standard_deck(), 2))
    assert info.value.reason == Reason.INVALID_STACKED_DECK


# --- captures through apply -------------------------------------------------------------------


def test_a_number_card_takes_rank_and_sums_to_the_side_pile() -> None:
    state = hand_built(2, {0: "2H", 1: "7S 9D"}, floor="7C 4C 3D KH")
    state, events = play(state, "7S")
    assert of(events, Captured)[0].taken == cards("3D 4C 7C")
    assert state.captured[1] == cards("3D 4C 7C 7S")
    assert state.floor == cards("KH")
    assert state.last_capturer == 1


def test_capture_is_compulsory_and_complete() -> None:
    state = hand_built(2, {0: "2H", 1: "6S 9D"}, floor="AC 5C 2C 4C 3C 3D")
    refused(state, 1, PlayCard(parse_card("6S"), cards("2C 3C AC")), Reason.ILLEGAL_CAPTURE)
    refused(state, 1, PlayCard(parse_card("6S"), ()), Reason.ILLEGAL_CAPTURE)
    state, events = play(state, "6S", "AC 5C 2C 4C 3C 3D")
    assert len(of(events, Captured)[0].taken) == 6
    assert of(events, BasraScored)


def test_the_player_chooses_among_largest_captures() -> None:
    state = hand_built(2, {0: "2H", 1: "8S 9D"}, floor="7C AC AD")
    assert [a.capture for a in RULES.legal_actions(state, 1) if a.card == parse_card("8S")] \
        == [cards("7C AC"), cards("7C AD")]
    state, _ = play(state, "8S", "7C AD")
    assert state.floor == cards("AC")


def test_without_a_choice_the_service_takes_the_most_points() -> None:
    state = hand_built(2, {0: "2H", 1: "3S 9D"}, floor="2H 2C AS")
    state, events = play(state, "3S")
    assert of(events, Captured)[0].taken == cards("2C AS")
    assert state.floor == cards("2H")


def test_a_card_that_takes_nothing_stays_on_the_floor() -> None:
    state = hand_built(2, {0: "2H", 1: "9S 9D"}, floor="7C AC")
    state, events = play(state, "9S")
    assert not of(events, Captured)
    assert state.floor == cards("7C AC 9S")
    assert state.captured == ((), ())


def test_queen_takes_queens_and_king_takes_kings() -> None:
    state = hand_built(2, {0: "2H 3H", 1: "QS KD"}, floor="QC KH 5C QD")
    state, events = play(state, "QS")
    assert of(events, Captured)[0].taken == cards("QC QD")
    state, _ = play(state, "2H")
    state, events = play(state, "KD")
    assert of(events, Captured)[0].taken == cards("KH")


def test_jack_takes_the_whole_floor_without_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="QC 5D 2S")
    state, events = play(state, "JS")
    assert of(events, Captured)[0].taken == cards("2S 5D QC")
    assert state.floor == ()
    assert not of(events, BasraScored)


def test_jack_on_an_empty_floor_is_laid() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="")
    state, events = play(state, "JS")
    assert state.floor == cards("JS") and not of(events, Captured)


def test_jack_on_a_single_card_is_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="5D")
    state, events = play(state, "JS")
    assert of(events, BasraScored)[0].how == "jack"
    assert state.basras == (0, 1)


def test_seven_of_diamonds_sweep_is_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "7D 9D"}, floor="QC 4S 6H KD")
    state, events = play(state, "7D")
    assert of(events, Captured)[0].taken == cards("4S 6H QC KD")
    assert of(events, BasraScored)[0].how == "seven"


def test_seven_of_diamonds_above_ten_is_an_ordinary_seven() -> None:
    state = hand_built(2, {0: "2H", 1: "7D 9D"}, floor="5C 6H 4S 3C")
    state, events = play(state, "7D")
    assert of(events, Captured)[0].taken == cards("3C 4S")
    assert not of(events, BasraScored)


def test_a_capture_emptying_the_floor_is_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "9S 9D"}, floor="4C 5H")
    state, events = play(state, "9S")
    basra = of(events, BasraScored)[0]
    assert (basra.seat, basra.side, basra.how, basra.basras) == (1, 1, "sum", (0, 1))


def test_a_queen_emptying_the_floor_is_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "QS 9D"}, floor="QC QD")
    _, events = play(state, "QS")
    assert of(events, BasraScored)[0].how == "rank"


def test_a_capture_leaving_cards_is_not_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "9S 9D"}, floor="4C 5H KS")
    _, events = play(state, "9S")
    assert of(events, Captured) and not of(events, BasraScored)


# --- end of a deal ------------------------------------------------------------------------------


def last_play_state(floor: str, last: str, captured: dict[int, str],
                    last_capturer: int | None = 0, scores: tuple[int, ...] = (0, 0),
                    options: BasraOptions | None = None) -> BasraState:
    return hand_built(2, {1: last}, floor=floor, to_move=1, dealer=1, captured=captured,
                      last_capturer=last_capturer, scores=scores, options=options)


def split_rest(used: str, first: int, special0: str = "", special1: str = "",
               ) -> dict[int, str]:
    """Give side 0 ``special0`` plus ``first`` plain cards, side 1 the rest (52 in all)."""
    named = set(cards(used + " " + special0 + " " + special1))
    plain = [c for c in standard_deck() if c not in named]
    pile0 = " ".join([special0, *map(str, plain[:first])]).strip()
    pile1 = " ".join([special1, *map(str, plain[first:])]).strip()
    return {0: pile0, 1: pile1}


def test_the_leftover_floor_goes_to_the_last_capturer_without_basra() -> None:
    piles = split_rest("5C 6C KS", 20)
    state = last_play_state("5C 6C", "KS", piles, last_capturer=0)
    state, events = play(state, "KS")
    swept = of(events, LeftoverSwept)[0]
    assert (swept.seat, swept.side, swept.cards) == (0, 0, cards("5C 6C KS"))
    assert not of(events, BasraScored)
    line0 = of(events, DealScored)[0].lines[0]
    assert line0.cards == 23 and line0.basras == 0


def test_a_capture_on_the_very_last_play_emptying_the_floor_is_a_basra() -> None:
    piles = split_rest("5C 4C 9S", 20)
    state = last_play_state("5C 4C", "9S", piles, last_capturer=0)
    state, events = play(state, "9S")
    assert of(events, BasraScored)[0].seat == 1
    assert not of(events, LeftoverSwept)
    assert of(events, DealScored)[0].lines[1].basras == 1


def test_deal_scoring_values() -> None:
    piles = (cards("10D 2C AS AH JS 3C 4C 5C"), cards("AD AC JH JD JC"))
    lines, totals = score_deal(2, "egyptian", (0, 1), piles, (1, 0), (5, 7))
    a, b = lines
    assert (a.most_cards, a.ten_of_diamonds, a.two_of_clubs, a.aces, a.jacks,
            a.basra_points) == (30, 3, 2, 2, 1, 10)
    assert a.points == 48 and a.total == 53
    assert (b.most_cards, b.aces, b.jacks, b.points, b.total) == (0, 2, 3, 5, 12)
    assert totals == (53, 12)


def test_most_cards_must_be_strictly_the_most() -> None:
    piles = (cards("3C 4C"), cards("3D 4D"))
    lines, _ = score_deal(2, "egyptian", (0, 1), piles, (0, 0), (0, 0))
    assert [line.most_cards for line in lines] == [0, 0]
    piles3 = (cards("3C 4C"), cards("3D 4D"), cards("5D"))
    lines, _ = score_deal(3, "egyptian", (0, 1, 2), piles3, (0, 0, 0), (0, 0, 0))
    assert [line.most_cards for line in lines] == [0, 0, 0]


def test_iraqi_scores_ten_of_diamonds_six_and_basra_five() -> None:
    lines, _ = score_deal(2, "iraqi", (0, 1), (cards("10D"), ()), (2, 0), (0, 0))
    assert (lines[0].ten_of_diamonds, lines[0].basra_points) == (6, 10)


# --- the game's end -----------------------------------------------------------------------------


def test_the_first_side_to_reach_the_target_wins() -> None:
    piles = split_rest("3S", 30)
    state = last_play_state("", "3S", piles, last_capturer=0, scores=(90, 50))
    state, events = play(state, "3S")
    assert state.over and state.winners == (0,)
    ended = of(events, BasraEnded)[0]
    assert ended.winners == (0,) and ended.winning_seats == (0,)
    outcome = RULES.outcome(state)
    assert outcome is not None and outcome.winners == (0,)
    assert outcome.scores == state.scores
    refused(state, 0, PlayCard(parse_card("2C")), Reason.GAME_OVER)


def test_target_151_option() -> None:
    piles = split_rest("3S", 30)
    state = last_play_state("", "3S", piles, scores=(90, 50), options=BasraOptions(target=151))
    state, _ = play(state, "3S")
    assert not state.over and state.deal == 2


def test_several_sides_reach_the_target_the_highest_wins() -> None:
    piles = split_rest("3S", 21, "10D AS AH JS JH", "2C AD AC JD JC")
    state = last_play_state("", "3S", piles, last_capturer=1, scores=(95, 97))
    state, _ = play(state, "3S")
    assert state.scores == (102, 103)
    assert state.over and state.winners == (1,)


def test_a_tie_at_the_target_plays_another_deal() -> None:
    piles = split_rest("3S", 21, "10D AS AH JS JH", "2C AD AC JD JC")
    state = last_play_state("", "3S", piles, last_capturer=1, scores=(95, 96))
    state, events = play(state, "3S")
    assert state.scores == (102, 102)
    assert of(events, TieDeal)[0].sides == (0, 1)
    assert not state.over and state.deal == 2 and state.dealer == 0


def test_three_players_two_tied_play_a_two_player_deal() -> None:
    named = "3S 10D AS AH JS JH 2C AD AC JD JC"
    plain = [c for c in standard_deck() if c not in cards(named)]
    captured = {0: "10D AS AH JS JH " + " ".join(map(str, plain[:3])),
                1: "2C AD AC JD JC " + " ".join(map(str, plain[3:6])),
                2: " ".join(map(str, plain[6:]))}
    state = hand_built(3, {2: "3S"}, to_move=2, dealer=2, captured=captured,
                       last_capturer=2, scores=(95, 96, 10))
    state, events = play(state, "3S")
    assert state.scores == (102, 102, 40)
    tie = of(events, TieDeal)[0]
    assert (tie.sides, tie.seats) == ((0, 1), (0, 1))
    assert state.playing == (0, 1) and state.dealer == 0 and state.to_move == 1
    assert state.hands[2] == () and len(state.stock) == 40
    while not state.over:
        assert state.to_move in (0, 1)
        state, events = RULES.apply(state, state.to_move,
                                    RULES.legal_actions(state, state.to_move)[0])
        for scored in of(events, DealScored):
            assert [line.side for line in scored.lines] == [0, 1]
    assert state.scores[2] == 40
    assert state.winners[0] in (0, 1)


def test_four_players_outcome_repeats_the_team_score() -> None:
    state, _ = RULES.start(GameSetup(4, 2, BasraOptions()))
    while not state.over:
        state, _ = RULES.apply(state, state.to_move, RULES.legal_actions(state,
                                                                         state.to_move)[0])
    outcome = RULES.outcome(state)
    assert outcome is not None
    assert outcome.scores == (state.scores[0], state.scores[1]) * 2
    assert outcome.winners in ((0, 2), (1, 3))


# --- views, redaction, errors ------------------------------------------------------------------


def test_the_view_shows_own_hand_floor_and_counts() -> None:
    state = hand_built(3, {0: "2H 3H", 1: "4S 9D", 2: "5C"}, floor="7C", stock="8C 8D",
                       captured={0: "AS AH"}, scores=(10, 20, 30), to_move=1)
    view = RULES.view(state, 1)
    assert view.hand == cards("4S 9D")
    assert view.floor == cards("7C") and view.stock_size == 2
    assert view.hand_sizes == (2, 2, 1)
    assert view.captured_counts == (2, 0, 0)
    assert view.scores == (10, 20, 30) and view.basras == (0, 0, 0)
    assert view.to_move == 1 and view.dealer == 0 and view.variant == "egyptian"
    spectator = RULES.view(state, None)
    assert spectator.hand is None


def test_dealt_hands_are_redacted_per_seat() -> None:
    _, events = RULES.start(GameSetup(3, 8, BasraOptions()))
    dealt = events[0]
    assert all(hand is not None for hand in dealt.hands)
    mine = RULES.redact(dealt, 1)
    assert mine.hands[1] == dealt.hands[1]
    assert mine.hands[0] is None and mine.hands[2] is None
    assert mine.hand_sizes == (4, 4, 4)
    assert all(hand is None for hand in RULES.redact(dealt, None).hands)


CARD_TOKEN = re.compile(r"\b(?:10|[2-9AJQK])[CDHS]\b")


def test_errors_never_name_a_card_the_player_cannot_see() -> None:
    state = hand_built(2, {0: "2H 3H", 1: "8S 9D"}, floor="7C AC AD", stock="KC KD")
    visible = {str(c) for c in state.hands[1] + state.floor}
    attempts = [(1, PlayCard(parse_card("2H"))), (0, PlayCard(parse_card("2H"))),
                (1, PlayCard(parse_card("8S"), cards("7C"))),
                (1, PlayCard(parse_card("KC")))]
    for seat, action in attempts:
        with pytest.raises(RuleError) as info:
            RULES.apply(state, seat, action)
        named = set(CARD_TOKEN.findall(info.value.message))
        own = visible if seat == 1 else {str(c) for c in state.hands[0] + state.floor}
        assert named <= own | {str(action.card)}, info.value.message


def test_errors_have_reasons() -> None:
    state = hand_built(2, {0: "2H", 1: "8S 9D"}, floor="7C AC AD")
    refused(state, 0, PlayCard(parse_card("2H")), Reason.NOT_YOUR_TURN)
    refused(state, 1, PlayCard(parse_card("2H")), Reason.CARD_NOT_IN_HAND)
    refused(state, 1, PlayCard(parse_card("8S"), cards("7C")), Reason.ILLEGAL_CAPTURE)
    refused(state, 1, "reveal", Reason.WRONG_GAME_KIND)


# --- variants -----------------------------------------------------------------------------------

LEBANESE = BasraOptions(variant="lebanese")


def test_lebanese_basra_only_on_a_lone_card_of_the_same_rank() -> None:
    state = hand_built(2, {0: "2H", 1: "5S 9D"}, floor="5C", options=LEBANESE)
    _, events = play(state, "5S")
    assert of(events, BasraScored)[0].how == "match"


def test_lebanese_sums_never_make_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "9S 9D"}, floor="4C 5H", options=LEBANESE)
    state, events = play(state, "9S")
    assert state.floor == () and not of(events, BasraScored)


def test_lebanese_jack_on_a_lone_jack_counts_but_not_on_another_card() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="JC", options=LEBANESE)
    _, events = play(state, "JS")
    assert of(events, BasraScored)
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="5C", options=LEBANESE)
    _, events = play(state, "JS")
    assert of(events, Captured) and not of(events, BasraScored)


def test_lebanese_has_no_seven_of_diamonds_sweep() -> None:
    state = hand_built(2, {0: "2H", 1: "7D 9D"}, floor="QC 4S", options=LEBANESE)
    state, events = play(state, "7D")
    assert not of(events, Captured)
    assert state.floor == cards("QC 4S 7D")


def test_iraqi_keeps_the_seven_sweep() -> None:
    state = hand_built(2, {0: "2H", 1: "7D 9D"}, floor="QC 4S",
                       options=BasraOptions(variant="iraqi"))
    _, events = play(state, "7D")
    assert of(events, BasraScored)[0].how == "seven"


@pytest.mark.parametrize(("floor", "basra"), [("5C", True), ("5C 6D", True), ("5C 6D 2S", False)])
def test_two_card_jack_basra(floor: str, basra: bool) -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor=floor,
                       options=BasraOptions(two_card_jack_basra=True))
    _, events = play(state, "JS")
    assert bool(of(events, BasraScored)) == basra


def test_egyptian_jack_on_two_cards_is_not_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 9D"}, floor="5C 6D")
    _, events = play(state, "JS")
    assert not of(events, BasraScored)


@pytest.mark.parametrize("options", [
    BasraOptions(variant="lebanese", two_card_jack_basra=True),
    BasraOptions(variant="turkish"),
    BasraOptions(target=120),
])
def test_invalid_options_are_refused(options: BasraOptions) -> None:
    with pytest.raises(RuleError) as info:
        RULES.check_setup(GameSetup(2, 1, options))
    assert info.value.reason == Reason.INVALID_OPTIONS


def test_options_round_trip() -> None:
    options = BasraOptions(variant="iraqi", two_card_jack_basra=True, target=151)
    assert RULES.decode_options(RULES.encode_options(options)) == options
    RULES.check_setup(GameSetup(2, 1, options))


def test_actions_round_trip() -> None:
    for action in (PlayCard(parse_card("8S"), cards("7C AD")), PlayCard(parse_card("JS")),
                   PlayCard(parse_card("2H"), ())):
        assert RULES.decode_action(RULES.encode_action(action)) == action


# --- bots ---------------------------------------------------------------------------------------


def test_random_bot_is_seeded_and_legal() -> None:
    state = hand_built(2, {0: "2H", 1: "8S 9D 3C 6H"}, floor="7C AC AD 2S")
    legal = RULES.legal_actions(state, 1)
    picks = [RULES.bot_action(state, 1, "random", seed) for seed in range(60)]
    assert all(pick in legal for pick in picks)
    assert len(set(picks)) == len(legal)
    assert picks == [RULES.bot_action(state, 1, "random", seed) for seed in range(60)]
    assert RULES.bot_action(state, 0, "random", 1) is None


def test_heuristic_bot_takes_a_basra() -> None:
    state = hand_built(2, {0: "2H", 1: "KS 9D 3C"}, floor="4C 5H")
    assert RULES.bot_action(state, 1, "heuristic", 1) == PlayCard(parse_card("9D"),
                                                                  cards("4C 5H"))


def test_heuristic_bot_keeps_its_jack_for_a_bigger_floor() -> None:
    state = hand_built(2, {0: "2H", 1: "JS 6D"}, floor="4C 9H")
    action = RULES.bot_action(state, 1, "heuristic", 1)
    assert action is not None and action.card == parse_card("6D")


def test_heuristic_bot_does_not_leave_an_easy_basra() -> None:
    # Capturing the 5 with the 5 leaves a lone K; laying the 2 leaves 5+2: the bot prefers taking
    # the 5 and 4 with the 9, which empties the floor.
    state = hand_built(2, {0: "2H 3H 4H 6H", 1: "9S 2D"}, floor="5C 4D")
    action = RULES.bot_action(state, 1, "heuristic", 1)
    assert action == PlayCard(parse_card("9S"), cards("4D 5C"))


def test_bots_only_use_what_their_seat_sees() -> None:
    state, _ = RULES.start(GameSetup(2, 21, BasraOptions()))
    seat = state.to_move
    other = 1 - seat
    hidden = list(state.hands[other] + state.stock)
    swapped = tuple(reversed(hidden))
    altered = state._replace(hands=tuple(swapped[:4] if s == other else state.hands[s]
                                         for s in range(2)), stock=swapped[4:])
    for strategy in RULES.bot_strategies:
        for seed in range(5):
            assert RULES.bot_action(state, seat, strategy, seed) == \
                RULES.bot_action(altered, seat, strategy, seed)
