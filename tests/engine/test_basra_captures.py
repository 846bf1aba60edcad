"""Basra capture search (RULES.md §4), proved against a brute-force reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tapis_engine.basra.captures import (
    SEVEN_OF_DIAMONDS,
    capture_options,
    capture_points,
    hand_options,
    number_value,
)
from tapis_engine.cards import JACK, KING, QUEEN, Card, parse_card, standard_deck
from tests.support.cards import cards

DECK = standard_deck()


def options(card: str, floor: str, seven_sweeps: bool = True) -> set[tuple[Card, ...]]:
    return set(capture_options(parse_card(card), cards(floor), seven_sweeps))


def reference(card: Card, floor: tuple[Card, ...]) -> set[tuple[Card, ...]]:
    """Every largest set of floor cards that splits into groups summing to the card's value."""
    value = number_value(card)
    n = len(floor)
    values = [number_value(c) for c in floor]
    # Sum of each subset, or -1 when it holds a face card (faces are in no group).
    sums = [0] * (1 << n)
    for mask in range(1, 1 << n):
        low = (mask & -mask).bit_length() - 1
        rest = sums[mask & (mask - 1)]
        sums[mask] = -1 if rest < 0 or values[low] == 0 else rest + values[low]
    memo: dict[int, bool] = {0: True}

    def splits(mask: int) -> bool:
        """Whether ``mask`` splits into groups of sum ``value`` (the lowest card's group first)."""
        if mask not in memo:
            low = mask & -mask
            rest = mask ^ low
            sub = rest
            result = False
            while True:
                if sums[sub | low] == value and splits(mask ^ (sub | low)):
                    result = True
                    break
                if sub == 0:
                    break
                sub = (sub - 1) & rest
            memo[mask] = result
        return memo[mask]

    best: set[tuple[Card, ...]] = {()}
    best_size = 0
    for mask in range(1, 1 << n):
        size = mask.bit_count()
        if size < best_size or sums[mask] <= 0 or sums[mask] % value or not splits(mask):
            continue
        taken = tuple(sorted(floor[i] for i in range(n) if mask >> i & 1))
        if size > best_size:
            best, best_size = {taken}, size
        else:
            best.add(taken)
    return best


NUMBER_CARDS = [c for c in DECK if number_value(c) > 0 and c != SEVEN_OF_DIAMONDS]
SMALL_CARDS = [c for c in DECK if 0 < number_value(c) <= 5]


@st.composite
def card_and_floor(draw: st.DrawFn, pool: list[Card], max_floor: int = 9
                   ) -> tuple[Card, tuple[Card, ...]]:
    played = draw(st.sampled_from(NUMBER_CARDS))
    rest = [c for c in pool if c != played]
    floor = draw(st.lists(st.sampled_from(rest), unique=True, max_size=max_floor))
    return played, tuple(floor)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(card_and_floor(DECK, max_floor=9))
def test_capture_search_matches_brute_force(case: tuple[Card, tuple[Card, ...]]) -> None:
    played, floor = case
    assert set(capture_options(played, floor, False)) == reference(played, floor)


@settings(max_examples=250, derandomize=True, deadline=None)
@given(card_and_floor(SMALL_CARDS + NUMBER_CARDS[:12], max_floor=10))
def test_capture_search_matches_brute_force_on_dense_small_floors(
        case: tuple[Card, tuple[Card, ...]]) -> None:
    played, floor = case
    assert set(capture_options(played, floor, False)) == reference(played, floor)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.sampled_from(DECK), st.lists(st.sampled_from(DECK), unique=True, max_size=10),
       st.booleans())
def test_a_capture_only_takes_floor_cards(played: Card, floor: list[Card], sweeps: bool) -> None:
    if played in floor:
        floor.remove(played)
    found = capture_options(played, tuple(floor), sweeps)
    assert found, "there is always at least one option (possibly taking nothing)"
    for option in found:
        assert set(option) <= set(floor)
        assert len(set(option)) == len(option)
        assert list(option) == sorted(option)
    # Every option of a card has the same size: captures are complete.
    assert len({len(option) for option in found}) == 1


def test_six_on_a_5_2_4_3_3_takes_all_six() -> None:
    assert options("6S", "AC 5C 2C 4C 3C 3D") == {cards("2C 3C 3D 4C 5C AC")}


def test_ten_on_a_9_2_8_3_7_5_5_takes_all_eight() -> None:
    assert options("10S", "AC 9C 2C 8C 3C 7C 5C 5D") == {tuple(sorted(cards(
        "AC 9C 2C 8C 3C 7C 5C 5D")))}


def test_rank_and_sum_together() -> None:
    """A 7 takes a single 7 and a 4+3 in the same play."""
    assert options("7S", "7C 4C 3D 2H") == {cards("3D 4C 7C")}


def test_several_largest_captures_are_all_options() -> None:
    assert options("8S", "7C AC AD") == {cards("7C AC"), cards("7C AD")}


def test_default_is_the_most_points_then_card_order() -> None:
    # 3 on [2♣, 2♥, A♠]: 2♣+A♠ (3 points) beats 2♥+A♠ (1 point).
    found = capture_options(parse_card("3S"), cards("2H 2C AS"), True)
    assert found[0] == cards("2C AS")
    assert set(found) == {cards("2C AS"), cards("2H AS")}
    # Equal points: the first in card order (clubs before diamonds).
    assert capture_options(parse_card("8S"), cards("7C AD AC"), True)[0] == cards("7C AC")


def test_a_number_card_never_takes_faces() -> None:
    assert options("5S", "QC KD JH") == {()}


def test_ace_counts_one_and_takes_aces() -> None:
    assert options("AS", "AC 2D") == {cards("AC")}
    assert options("3S", "AC 2D") == {cards("2D AC")}


def test_queen_takes_every_queen_only() -> None:
    assert options("QS", "QC QD KH 5C") == {cards("QC QD")}


def test_king_takes_every_king_only() -> None:
    assert options("KS", "QC KD KH 5C") == {cards("KD KH")}


def test_jack_takes_the_whole_floor() -> None:
    assert options("JS", "QC 5D 2H") == {tuple(sorted(cards("QC 5D 2H")))}


def test_jack_on_empty_floor_takes_nothing() -> None:
    assert options("JS", "") == {()}


def test_seven_of_diamonds_sweeps_a_floor_summing_to_ten_or_less() -> None:
    assert options("7D", "QC 5D 5H") == {cards("5D 5H QC")}
    assert options("7D", "KC") == {cards("KC")}


def test_seven_of_diamonds_is_an_ordinary_seven_above_ten() -> None:
    assert options("7D", "5D 5H 4C 3S") == {cards("3S 4C")}


def test_seven_of_diamonds_on_empty_floor_takes_nothing() -> None:
    assert options("7D", "") == {()}


def test_no_seven_sweep_when_the_variant_has_none() -> None:
    assert options("7D", "QC 5D 5H", seven_sweeps=False) == {()}


def test_hand_options_equal_per_card_options() -> None:
    floor = cards("AC 2D 5H 7C QS")
    hand = cards("3C 7D JS QH 8C")
    for card, found in hand_options(hand, floor, True):
        assert found == capture_options(card, floor, True)


def test_capture_points() -> None:
    assert capture_points(cards("10D 2C AS JH 5C"), 3) == 3 + 2 + 1 + 1
    assert capture_points(cards("10D"), 6) == 6


def test_faces_have_no_value() -> None:
    assert [number_value(Card(rank, "S")) for rank in (JACK, QUEEN, KING)] == [0, 0, 0]


def test_the_reference_itself_on_the_rules_examples() -> None:
    assert reference(parse_card("6S"), cards("AC 5C 2C 4C 3C 3D")) == {
        cards("2C 3C 3D 4C 5C AC")}
    assert reference(parse_card("8S"), cards("7C AC AD")) == {cards("7C AC"), cards("7C AD")}
    assert reference(parse_card("5S"), cards("QC 5D")) == {cards("5D")}
    assert reference(parse_card("5S"), cards("QC KD")) == {()}
