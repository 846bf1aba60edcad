"""The six Bataille Corse slap combinations (RULES.md §2), edge cases included."""

from __future__ import annotations

import pytest

from tapis_engine.corse.combinations import ALL_COMBINATIONS, find_combination, matches
from tests.support.cards import cards

ALL = frozenset(ALL_COMBINATIONS)


@pytest.mark.parametrize(("pile", "name"), [
    ("KH KS", "double"),
    ("JK JK", "double"),
    ("2C 2D", "double"),
    ("QH 10C QS", "sandwich"),
    ("JK 4C JK", "sandwich"),
    ("10H 5C 4D 10S", "big_mac"),
    ("9H 10C", "suite"),
    ("10C 9H", "suite"),
    ("AH JK", "suite"),
    ("JK AH", "suite"),
    ("KD AS", "suite"),
    ("10H JC", "suite"),
    ("3C 7D", "ten"),
    ("AH 9C", "ten"),
    ("9C AH", "ten"),
    ("4D 6S", "ten"),
    ("7D", "seven"),
    ("3C 8H 7D", "seven"),
])
def test_each_combination_shows(pile: str, name: str) -> None:
    assert matches(name, cards(pile))
    assert find_combination(cards(pile), frozenset({name})) == name


@pytest.mark.parametrize(("pile", "name"), [
    ("KH", "double"),
    ("KH QS", "double"),
    ("QH QS 10C", "double"),  # the newest card is always part of it
    ("QH QS", "sandwich"),
    ("QH 10C JS", "sandwich"),
    ("10H 5C 10S 4D", "big_mac"),  # the newest card must be one end
    ("10H 5C 4D", "big_mac"),
    ("AH 2C", "suite"),  # no wrap from A to 2
    ("2C AH", "suite"),
    ("JK 2C", "suite"),
    ("9H JC", "suite"),
    ("9H 9C", "suite"),
    ("JK 10C", "ten"),  # jokers and faces have no value
    ("KH 10C", "ten"),
    ("JH 10C", "ten"),
    ("5C 4D", "ten"),
    ("AH AS", "ten"),  # A counts 1, not 11
    ("7D 3C", "seven"),  # only the top card counts
    ("3C", "ten"),
    ("", "seven"),
])
def test_combination_does_not_show(pile: str, name: str) -> None:
    assert not matches(name, cards(pile))


def test_ace_counts_one_in_the_ten_and_not_eleven() -> None:
    assert not matches("ten", cards("AH 10C"))  # 1 + 10 = 11
    assert matches("ten", cards("AH 9C"))


def test_a_then_joker_is_a_suite_but_ace_then_two_is_not() -> None:
    assert find_combination(cards("AH JK"), ALL) == "suite"
    assert find_combination(cards("AH 2C"), ALL) is None


def test_two_jokers_are_a_double() -> None:
    assert find_combination(cards("JK JK"), ALL) == "double"


def test_switched_off_combinations_never_show() -> None:
    assert find_combination(cards("KH KS"), ALL - {"double"}) is None
    assert find_combination(cards("3C 7D"), ALL - {"seven"}) == "ten"
    assert find_combination(cards("3C 7D"), ALL - {"seven", "ten"}) is None
    assert find_combination(cards("7D"), frozenset()) is None


def test_the_first_in_canonical_order_is_reported() -> None:
    # 5 5: a double and a ten; 6 7: a suite and a seven.
    assert find_combination(cards("5C 5D"), ALL) == "double"
    assert find_combination(cards("6C 7D"), ALL) == "suite"
    assert find_combination(cards("5C 5D"), ALL - {"double"}) == "ten"


def test_nothing_shows_on_an_empty_pile() -> None:
    assert find_combination([], ALL) is None


def test_unknown_combination_name_is_an_error() -> None:
    with pytest.raises(ValueError):
        matches("triple", cards("KH KS"))
