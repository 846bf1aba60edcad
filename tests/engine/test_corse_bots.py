"""Bataille Corse bots: reflex, random and sloppy; public information only."""

from __future__ import annotations

from dataclasses import replace

from tapis_engine.corse import RULES, CorseState, Flip, Slap
from tapis_engine.corse.combinations import ALL_COMBINATIONS
from tests.support.cards import cards


def table(decks: list[str], pile: str, turn: int = 0,
          statuses: tuple[str, ...] | None = None) -> CorseState:
    pile_cards = cards(pile)
    return CorseState(
        decks=tuple(cards(d) for d in decks), pile=pile_cards, face_up=len(pile_cards),
        sequence=40, turn=turn, challenger=None, tries=0,
        statuses=statuses or ("in_play",) * len(decks), strikes=(0,) * len(decks), rng=5,
        combinations=frozenset(ALL_COMBINATIONS), flip_cap=10_000)


def test_reflex_flips_when_due_and_otherwise_waits() -> None:
    state = table(["2C 3C", "4D", "5H"], pile="9S KC")
    assert RULES.bot_action(state, 0, "reflex", 1) == Flip()
    assert RULES.bot_action(state, 1, "reflex", 1) is None


def test_reflex_slaps_every_combination_even_when_due() -> None:
    state = table(["2C 3C", "4D", "5H"], pile="9S 7C")
    for seat in (0, 1, 2):
        assert RULES.bot_action(state, seat, "reflex", seat) == Slap(40)


def test_out_seats_and_finished_games_have_no_bot_move() -> None:
    state = table(["2C", "", "5H"], pile="7C", statuses=("in_play", "out", "in_play"))
    assert RULES.bot_action(state, 1, "reflex", 1) is None
    over = replace(state, end="last_in_play", winner=0, turn=None)
    assert RULES.bot_action(over, 0, "reflex", 1) is None


def test_eliminated_seats_slap_combinations_to_come_back() -> None:
    state = table(["2C", "", "5H"], pile="7C", statuses=("in_play", "eliminated", "in_play"))
    assert RULES.bot_action(state, 1, "reflex", 1) == Slap(40)


def test_bots_read_only_public_information() -> None:
    state = table(["2C 3C KH", "4D 9C", "5H"], pile="9S JS")
    shuffled = replace(state, decks=(cards("AH QD 7S"), cards("JK 6C"), cards("2D")), rng=77)
    for strategy in RULES.bot_strategies:
        for seed in range(50):
            for seat in range(3):
                assert (RULES.bot_action(state, seat, strategy, seed)
                        == RULES.bot_action(shuffled, seat, strategy, seed))


def test_sloppy_sometimes_slaps_falsely_and_sometimes_misses() -> None:
    nothing = table(["2C 3C", "4D", "5H"], pile="9S KC")
    seven = table(["2C 3C", "4D", "5H"], pile="9S 7C")
    false_slaps = sum(RULES.bot_action(nothing, 1, "sloppy", s) == Slap(40) for s in range(400))
    misses = sum(RULES.bot_action(seven, 1, "sloppy", s) is None for s in range(400))
    assert 2 <= false_slaps <= 50
    assert 30 <= misses <= 140
    assert RULES.bot_action(nothing, 0, "sloppy", 3) in (Flip(), Slap(40))


def test_random_slaps_a_quarter_of_the_time() -> None:
    state = table(["2C 3C", "4D", "5H"], pile="9S KC")
    slaps = sum(RULES.bot_action(state, 1, "random", s) == Slap(40) for s in range(400))
    assert 60 <= slaps <= 140
    assert RULES.bot_action(table(["2C"], "", 0), 0, "random", 1) == Flip()


def test_bot_moves_are_deterministic_for_a_seed() -> None:
    state = table(["2C 3C", "4D", "5H"], pile="9S KC")
    for strategy in RULES.bot_strategies:
        assert [RULES.bot_action(state, 1, strategy, s) for s in range(30)] == [
            RULES.bot_action(state, 1, strategy, s) for s in range(30)]


def test_unknown_strategy_plays_as_reflex() -> None:
    state = table(["2C 3C", "4D", "5H"], pile="9S 7C")
    assert RULES.bot_action(state, 2, "nonsense", 1) == Slap(40)
