"""Bataille Corse, one test per rule and ruling of RULES.md §2 (hand-built tables)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tapis_engine.cards import Card, deck_with_jokers, parse_card
from tapis_engine.corse import (
    RULES,
    CardFlipped,
    ChallengePassed,
    ChallengeStarted,
    CorseEnded,
    CorseOptions,
    CorseState,
    Dealt,
    Eliminated,
    FalseSlap,
    Flip,
    OutForGood,
    PileWon,
    Reentered,
    Slap,
)
from tapis_engine.corse.combinations import ALL_COMBINATIONS
from tapis_engine.errors import ErrorKind, Reason, RuleError
from tapis_engine.protocol import GameSetup
from tests.support.cards import cards

ALL = frozenset(ALL_COMBINATIONS)


def table(decks: list[str], pile: str = "", *, face_up: int | None = None, turn: int = 0,
          challenger: int | None = None, tries: int = 0, statuses: list[str] | None = None,
          strikes: list[int] | None = None, sequence: int = 100,
          combinations: frozenset[str] = ALL, flip_cap: int = 10_000) -> CorseState:
    """A hand-built table: decks top card first, pile bottom card first (all face up unless
    ``face_up`` says how many of the top ones are)."""
    pile_cards = cards(pile)
    return CorseState(
        decks=tuple(cards(deck) for deck in decks), pile=pile_cards,
        face_up=len(pile_cards) if face_up is None else face_up, sequence=sequence,
        turn=turn, challenger=challenger, tries=tries,
        statuses=tuple(statuses or ["in_play"] * len(decks)),
        strikes=tuple(strikes or [0] * len(decks)), rng=12345, combinations=combinations,
        flip_cap=flip_cap)


def flip(state: CorseState, seat: int | None = None) -> tuple[CorseState, list[Any]]:
    return RULES.apply(state, state.turn if seat is None else seat, Flip())


def slap(state: CorseState, seat: int) -> tuple[CorseState, list[Any]]:
    return RULES.apply(state, seat, Slap(state.sequence))


def refused(state: CorseState, seat: int, action: Any, reason: Reason) -> RuleError:
    before = RULES.encode_state(state)
    with pytest.raises(RuleError) as caught:
        RULES.apply(state, seat, action)
    assert caught.value.reason == reason
    assert RULES.encode_state(state) == before
    return caught.value


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


# --- setup and dealing -------------------------------------------------------------------------


def test_protocol_constants() -> None:
    assert RULES.kind == "bataille-corse"
    assert (RULES.min_seats, RULES.max_seats) == (2, 6)
    assert RULES.bot_takes_over_on_timeout is False
    assert RULES.bot_strategies[:2] == ("reflex", "random")
    assert RULES.default_options() == CorseOptions(ALL, 10_000)


@pytest.mark.parametrize("seats", [2, 3, 4, 5, 6])
def test_stacked_deck_is_dealt_one_at_a_time_from_seat_0(seats: int) -> None:
    deck = deck_with_jokers()
    state, events = RULES.start(GameSetup(seats, 7, RULES.default_options(), deck))
    for seat in range(seats):
        assert state.decks[seat][0] == deck[seat]  # the first card received is the top
        assert state.decks[seat] == deck[seat::seats]
    sizes = [len(d) for d in state.decks]
    assert sum(sizes) == 54 and max(sizes) - min(sizes) <= 1
    assert events == [Dealt(tuple(sizes))]
    assert RULES.to_act(state) == frozenset({0})  # seat 0 flips first


def test_shuffled_deal_depends_on_the_seed_only() -> None:
    a, _ = RULES.start(GameSetup(4, 99, RULES.default_options()))
    b, _ = RULES.start(GameSetup(4, 99, RULES.default_options()))
    c, _ = RULES.start(GameSetup(4, 100, RULES.default_options()))
    assert a == b and a.decks != c.decks
    assert sorted(card for deck in a.decks for card in deck) == sorted(deck_with_jokers())


@pytest.mark.parametrize(("seats", "options", "deck", "reason"), [
    (1, CorseOptions(), None, Reason.INVALID_SEAT_COUNT),
    (7, CorseOptions(), None, Reason.INVALID_SEAT_COUNT),
    (3, CorseOptions(frozenset({"triple"})), None, Reason.INVALID_OPTIONS),
    (3, CorseOptions(flip_cap=0), None, Reason.INVALID_OPTIONS),
    (3, CorseOptions(), deck_with_jokers()[:-1], Reason.INVALID_STACKED_DECK),
    (3, CorseOptions(), (*deck_with_jokers()[:-1], parse_card("2C")),
     Reason.INVALID_STACKED_DECK),
])
def test_bad_setups_are_invalid(seats: int, options: CorseOptions,
                                deck: tuple[Card, ...] | None, reason: Reason) -> None:
    with pytest.raises(RuleError) as caught:
        RULES.check_setup(GameSetup(seats, 1, options, deck))
    assert caught.value.reason == reason and caught.value.kind == ErrorKind.INVALID


# --- flipping --------------------------------------------------------------------------------


def test_flip_puts_the_top_card_face_up_and_passes_the_turn() -> None:
    state = table(["2C 3C", "4D", "5H"], sequence=10)
    after, events = flip(state)
    assert after.pile == cards("2C") and after.face_up == 1
    assert after.decks[0] == cards("3C")
    assert events == [CardFlipped(0, parse_card("2C"), 11, None)]
    assert after.top_sequence == 11 and after.turn == 1
    assert state.decks[0] == cards("2C 3C")  # the input is untouched


def test_the_turn_skips_seats_not_in_play() -> None:
    state = table(["2C 3C", "", "5H", "6H"], statuses=["in_play", "eliminated", "in_play", "out"])
    after, _ = flip(state)
    assert after.turn == 2
    after, _ = flip(after)
    assert after.turn == 0


def test_only_the_seat_due_may_flip() -> None:
    state = table(["2C", "4D", "5H"])
    error = refused(state, 1, Flip(), Reason.NOT_YOUR_TURN)
    assert error.kind == ErrorKind.PRECONDITION


# --- challenges ------------------------------------------------------------------------------


@pytest.mark.parametrize(("honour", "tries"), [("JH", 1), ("QH", 2), ("KH", 3), ("AH", 4),
                                               ("JK", 5)])
def test_challenge_tries_and_the_challenger_takes_the_pile(honour: str, tries: int) -> None:
    state = table([f"{honour} 9S", "2D 3D 4D 6D 8D 9D", "5C"], pile="10C 3S")
    state, events = flip(state)
    assert events[-1] == ChallengeStarted(0, tries, 1)
    assert (state.challenger, state.tries, state.turn) == (0, tries, 1)
    for left in range(tries - 1, 0, -1):
        state, events = flip(state)
        assert (state.turn, state.tries) == (1, left)  # still seat 1's tries
        assert not of_type(events, PileWon)
    state, events = flip(state)
    won = of_type(events, PileWon)
    assert won and won[0].seat == 0 and won[0].reason == "challenge"
    assert won[0].cards == 3 + tries
    # Under the deck, the pile's order kept, bottom card first; the taker flips next.
    answers = cards("2D 3D 4D 6D 8D 9D")[:tries]
    assert state.decks[0] == (*cards("9S 10C 3S"), parse_card(honour), *answers)
    assert state.turn == 0 and state.challenger is None and state.pile == ()


def test_an_honour_in_the_tries_passes_the_challenge_on() -> None:
    state = table(["KH 2S", "2D QD 3D", "5C 6C 7C"])
    state, _ = flip(state)
    state, _ = flip(state)  # 2D: one try used
    state, events = flip(state)  # QD: passes it on
    assert events[-1] == ChallengePassed(1, 0, 2, 2)
    assert (state.challenger, state.tries, state.turn) == (1, 2, 2)
    state, _ = flip(state)
    state, events = flip(state)
    assert of_type(events, PileWon)[0].seat == 1
    assert state.turn == 1


def test_the_last_failed_try_takes_the_pile_at_once_so_a_slap_on_it_is_too_late() -> None:
    state = table(["JH 2S", "7D 3D", "5C"], sequence=0)
    state, _ = flip(state)
    state, events = flip(state)  # 7D: a seven, but the last try
    assert of_type(events, PileWon)[0].reason == "challenge"
    refused(state, 2, Slap(2), Reason.SLAP_TOO_LATE)


# --- slaps -----------------------------------------------------------------------------------


def test_first_slap_on_a_combination_takes_the_pile_and_flips_next() -> None:
    state = table(["2C", "3D", "4H 5H"], pile="9S 8H KC KD", face_up=2, turn=1)
    after, events = slap(state, 2)
    assert events == [PileWon(2, "double", 4, (1, 1, 6))]
    assert after.decks[2] == cards("4H 5H 9S 8H KC KD")
    assert after.turn == 2 and after.pile == () and after.top_sequence is None


def test_a_slap_ends_the_challenge_in_progress() -> None:
    state = table(["2C", "3D 4D", "4H"], pile="QS 7H", challenger=0, tries=1, turn=1)
    after, events = slap(state, 1)
    assert of_type(events, PileWon)[0].reason == "seven"
    assert after.challenger is None and after.tries == 0 and after.turn == 1


def test_a_slap_naming_an_older_card_is_too_late_and_changes_nothing() -> None:
    state = table(["2C 3C", "7D", "5H"], sequence=0)
    state, _ = flip(state)
    old = state.sequence
    state, _ = flip(state)  # 7D: a seven shows now
    error = refused(state, 2, Slap(old), Reason.SLAP_TOO_LATE)
    assert error.kind == ErrorKind.PRECONDITION
    refused(state, 2, Slap(old + 5), Reason.SLAP_TOO_LATE)


def test_two_slaps_on_the_same_combination_first_wins_second_is_too_late() -> None:
    state = table(["2C", "3D", "4H", "5S"], pile="7C")
    seen = state.sequence
    after, _ = RULES.apply(state, 1, Slap(seen))
    assert after.decks[1] == cards("3D 7C")
    refused(after, 3, Slap(seen), Reason.SLAP_TOO_LATE)


def test_a_slap_on_an_empty_pile_is_too_late_for_the_card_just_taken() -> None:
    state = table(["2C", "3D"], sequence=4)
    refused(state, 1, Slap(4), Reason.SLAP_TOO_LATE)


def test_a_slap_on_an_empty_pile_is_not_allowed_now() -> None:
    for state in (table(["2C", "3D"], sequence=4), table(["2C", "3D"])):
        error = refused(state, 1, Slap(state.sequence + 1), Reason.NOT_ALLOWED_NOW)
        assert error.kind == ErrorKind.PRECONDITION
        assert error.message == "the pile is empty: there is nothing to slap"


def test_a_slap_must_name_the_card_it_slaps() -> None:
    for state in (table(["2C", "3D"], pile="7C 7D", face_up=2), table(["2C", "3D"])):
        error = refused(state, 1, Slap(0), Reason.INVALID_ACTION)
        assert error.kind == ErrorKind.INVALID
        assert error.message == "name the card you slap (pile_sequence)"


def test_any_seat_may_slap_at_any_time() -> None:
    state = table(["2C", "3D", "4H"], pile="6C 7C", turn=0)
    for seat in (0, 1, 2):
        after, _ = slap(state, seat)
        assert after.decks[seat][-2:] == cards("6C 7C")


def test_false_slap_puts_three_cards_face_down_at_the_bottom_one_at_a_time() -> None:
    state = table(["2C", "3D 4D 5D 6D", "4H"], pile="9S KC", face_up=2)
    after, events = slap(state, 1)
    assert events == [FalseSlap(1, 3, 0, 5)]  # a count, never the cards
    assert after.pile == cards("5D 4D 3D 9S KC")  # 3D went first to the bottom
    assert after.face_up == 2 and after.decks[1] == cards("6D")
    assert after.top_sequence == state.top_sequence  # the same top card


def test_false_slap_with_fewer_than_three_cards_pays_all() -> None:
    state = table(["2C 3C", "3D", "4H"], pile="9S", turn=0)
    after, events = slap(state, 1)
    assert events[0] == FalseSlap(1, 1, 0, 2)
    assert after.decks[1] == () and after.statuses[1] == "in_play"


def test_face_down_penalty_cards_never_make_a_combination() -> None:
    state = table(["2C", "5S KS 9S", "4H"], sequence=0)
    state, _ = flip(state)  # 2C face up
    state, _ = slap(state, 1)  # false: 5S, KS, 9S under the pile
    assert state.pile == cards("9S KS 5S 2C") and state.face_up == 1
    state, events = slap(state, 2)  # 5S face down under 2C: no suite, no ten
    assert isinstance(events[0], FalseSlap)


def test_combinations_only_count_cards_since_the_pile_was_last_taken() -> None:
    state = table(["7H 2C", "KS", "4D"], pile="", sequence=0)
    # The pile is empty: 7H is a seven on its own, but K after a taken pile is no double.
    state, _ = flip(state)
    state, _ = slap(state, 2)  # takes 7H, flips next
    state, _ = flip(state)  # 4D alone on the pile
    assert state.face_up_cards() == cards("4D")


def test_switched_off_combination_slap_is_false() -> None:
    state = table(["2C", "3D 4D 5D", "4H"], pile="9S KC KD",
                  combinations=ALL - {"double"})
    _, events = slap(state, 1)
    assert isinstance(events[0], FalseSlap)


# --- out of cards --------------------------------------------------------------------------


def test_a_player_without_cards_is_eliminated_when_the_turn_reaches_them() -> None:
    state = table(["2C 3C", "", "5H"])
    after, events = flip(state)
    assert Eliminated(1) in events
    assert after.statuses[1] == "eliminated" and after.turn == 2


def test_a_cardless_player_owing_tries_draws_from_the_nearest_following_deck() -> None:
    state = table(["JH 2S", "", "", "4D 5D 6D"], statuses=["in_play", "in_play", "in_play",
                                                        "in_play"])
    state, _ = flip(state)  # J: seat 1 owes one try and holds nothing
    assert state.turn == 1 and state.statuses[1] == "in_play"
    after, events = flip(state)
    drawn = of_type(events, CardFlipped)[0]
    assert drawn.seat == 1 and drawn.drawn_from == 3  # seat 2 holds nothing either
    assert drawn.card in cards("4D 5D 6D")
    assert len(after.decks[3]) == 2 and drawn.card not in after.decks[3]
    # No honour drawn in the only try: seat 1 is out and the challenger takes the pile.
    assert Eliminated(1) in events and of_type(events, PileWon)[0].seat == 0
    assert after.statuses[1] == "eliminated" and after.turn == 0


def test_the_draw_is_random_from_the_state_prng() -> None:
    state = table(["JH 2S", "", "2D 3D 4D 5D 6D 8D 9D 10D"])
    state, _ = flip(state)
    seen = set()
    for rng_state in range(40):
        _, events = flip(replace(state, rng=rng_state))
        seen.add(of_type(events, CardFlipped)[0].card)
    assert len(seen) > 3  # not always the top card
    a, events_a = flip(state)
    b, events_b = flip(state)
    assert a == b and events_a == events_b


def test_running_out_part_way_through_the_tries_draws_the_rest() -> None:
    state = table(["AH 2S", "3C", "QD QS QH QC"])  # A: 4 tries; seat 1 has 1 card
    state, _ = flip(state)
    state, events = flip(state)  # 3C, the last card of seat 1
    assert state.turn == 1 and state.tries == 3 and state.statuses[1] == "in_play"
    state, events = flip(state)  # drawn from seat 2: all queens
    drawn = of_type(events, CardFlipped)[0]
    assert drawn.drawn_from == 2 and drawn.card.rank == 12
    assert of_type(events, ChallengePassed)[0].challenger == 1
    # Seat 1 stays in play with no cards, until its next turn to flip.
    assert state.statuses[1] == "in_play" and state.decks[1] == ()
    assert state.turn == 2


def test_a_drawer_who_passes_stays_in_play_and_a_drawer_who_fails_is_out() -> None:
    state = table(["KH 2C", "", "QD", "5S 6S 7S"])
    state, _ = flip(state)  # K: seat 1 owes 3 tries with no cards
    state, events = flip(state)  # draws the only card of seat 2, QD: passes it on
    assert of_type(events, CardFlipped)[0] == CardFlipped(1, parse_card("QD"), 102, 2)
    assert state.statuses[1] == "in_play" and state.challenger == 1
    # Seat 2 now owes 2 tries with no cards: it draws from seat 3 (5S 6S 7S): fails twice.
    state, _ = flip(state)
    state, events = flip(state)
    assert Eliminated(2) in events and of_type(events, PileWon)[0].seat == 1
    assert state.turn == 1 and state.decks[1][:2] == cards("KH QD")
    assert len(state.decks[1]) == 4 and len(state.decks[3]) == 1


def test_a_cardless_seat_still_in_play_is_eliminated_when_its_turn_comes() -> None:
    state = table(["2C 3C", "", "5D 6D"])  # seat 1: in play, no cards (after a draw)
    after, events = flip(state)
    assert events[-1] == Eliminated(1) and after.turn == 2


def test_owing_tries_when_nobody_else_holds_cards_eliminates_at_once() -> None:
    state = table(["QH", "", "", "2C"], turn=0,
                  statuses=["in_play", "in_play", "eliminated", "in_play"])
    # Seat 3 holds 2C, so seat 1 may still draw: take that away with a false slap by seat 3.
    state, _ = flip(state)  # Q: seat 1 owes 2 tries
    assert state.turn == 1
    state, events = RULES.apply(state, 3, Slap(state.sequence))  # seat 3 pays its 2C
    assert Eliminated(1) in events
    won = of_type(events, PileWon)[0]
    assert won.seat == 0 and won.reason == "challenge"
    assert state.turn == 0


def test_a_false_slap_emptying_the_deck_of_the_seat_due_eliminates_it() -> None:
    state = table(["2C", "3D 4D", "4H"], pile="9S", turn=1)
    after, events = slap(state, 1)
    assert events[0] == FalseSlap(1, 2, 0, 3)
    assert Eliminated(1) in events and after.turn == 2


# --- elimination, re-entry, out for good ------------------------------------------------------


def test_an_eliminated_player_slapping_a_combination_first_is_back_in_play() -> None:
    state = table(["2C", "", "4H"], pile="6S 7S", turn=0,
                  statuses=["in_play", "eliminated", "in_play"], strikes=[0, 2, 0])
    after, events = slap(state, 1)
    assert events[0] == PileWon(1, "suite", 2, (1, 2, 1))
    assert events[1] == Reentered(1)
    assert after.statuses[1] == "in_play" and after.turn == 1
    assert after.strikes[1] == 2  # strikes never reset


def test_three_false_slaps_while_eliminated_is_out_for_good_and_costs_no_cards() -> None:
    state = table(["2C 3C 4C", "", "4H"], pile="9S KC", face_up=2,
                  statuses=["in_play", "eliminated", "in_play"])
    for strike in (1, 2):
        state, events = slap(state, 1)
        assert events == [FalseSlap(1, 0, strike, 2)]
        assert state.pile == cards("9S KC") and state.statuses[1] == "eliminated"
    state, events = slap(state, 1)
    assert events == [FalseSlap(1, 0, 3, 2), OutForGood(1)]
    assert state.statuses[1] == "out"
    refused(state, 1, Slap(state.sequence), Reason.SEAT_OUT)
    assert RULES.legal_actions(state, 1) == []


def test_false_slaps_in_play_give_no_strike() -> None:
    state = table(["2C 3C 4C 5C", "6D", "4H"], pile="9S")
    after, _ = slap(state, 0)
    assert after.strikes == (0, 0, 0)


def test_strikes_count_across_eliminations() -> None:
    state = table(["2C", "", "4H 5H"], pile="9S", turn=2,
                  statuses=["in_play", "eliminated", "in_play"], strikes=[0, 2, 0])
    state, events = slap(state, 1)
    assert OutForGood(1) in events


def test_the_last_player_in_play_takes_the_pile_and_wins() -> None:
    state = table(["2C 3C", ""], pile="9S 8H", face_up=1)
    after, events = flip(state)
    assert Eliminated(1) in events
    assert PileWon(0, "last_in_play", 3, (4, 0)) in events
    assert events[-1] == CorseEnded(0, "last_in_play", (4, 0))
    assert after.decks[0] == cards("3C 9S 8H 2C")
    assert RULES.to_act(after) == frozenset()
    outcome = RULES.outcome(after)
    assert outcome is not None and outcome.winners == (0,) and outcome.scores == (4, 0)
    refused(after, 0, Flip(), Reason.GAME_OVER)


def test_eliminated_and_out_seats_may_still_see_the_pile_but_only_slap_if_not_out() -> None:
    state = table(["2C", "", "", "4H"], pile="9S", turn=0,
                  statuses=["in_play", "eliminated", "out", "in_play"])
    assert RULES.legal_actions(state, 0) == [Flip(), Slap(state.sequence)]
    assert RULES.legal_actions(state, 1) == [Slap(state.sequence)]
    assert RULES.legal_actions(state, 2) == []
    assert RULES.legal_actions(state, 3) == [Slap(state.sequence)]
    assert RULES.legal_actions(table(["2C", "3C"]), 1) == []


# --- the flip cap ------------------------------------------------------------------------------


def test_the_flip_cap_ends_the_game_most_cards_wins() -> None:
    state = table(["2C 3C 4C", "5D"], sequence=0, flip_cap=1)
    after, events = flip(state)
    assert events[-1] == CorseEnded(0, "flip_cap", (2, 1))
    outcome = RULES.outcome(after)
    assert outcome is not None and outcome.winners == (0,) and outcome.scores == (2, 1)
    refused(after, 1, Slap(after.sequence), Reason.GAME_OVER)  # no slap after the cap


def test_the_flip_cap_with_equal_most_cards_is_a_draw() -> None:
    state = table(["2C 3C 4C", "5D 6D"], sequence=0, flip_cap=1)
    after, _ = flip(state)
    outcome = RULES.outcome(after)
    assert outcome is not None and outcome.winners == () and outcome.scores == (2, 2)


def test_the_capping_flips_consequences_happen_first() -> None:
    state = table(["9C 9D", "2D 3D 4D"], pile="JS", challenger=0, tries=1, turn=1,
                  sequence=4, flip_cap=5)
    _after, events = flip(state)  # the last try fails: seat 0 takes the pile, then the cap
    assert [type(e) for e in events] == [CardFlipped, PileWon, CorseEnded]
    assert events[-1] == CorseEnded(0, "flip_cap", (4, 2))


def test_draws_count_as_flips_toward_the_cap() -> None:
    state = table(["2S", "", "4D 5D"], pile="QS", challenger=0, tries=2, turn=1,
                  sequence=9, flip_cap=10)
    after, events = flip(state)
    assert of_type(events, CardFlipped)[0].drawn_from == 2
    assert after.end == "flip_cap"


# --- refusals and encoding ---------------------------------------------------------------------


def test_malformed_actions_are_invalid() -> None:
    state = table(["2C", "3D"], pile="7S")
    assert refused(state, 5, Flip(), Reason.INVALID_ACTION).kind == ErrorKind.INVALID
    assert refused(state, 1, Slap(-1), Reason.INVALID_ACTION).kind == ErrorKind.INVALID
    assert refused(state, 0, "reveal", Reason.WRONG_GAME_KIND).kind == ErrorKind.INVALID


def test_error_messages_never_name_a_hidden_card() -> None:
    state = table(["KH QH", "JD AD"], pile="7S")
    for seat, action in ((1, Flip()), (1, Slap(3)), (0, Slap(99))):
        with pytest.raises(RuleError) as caught:
            RULES.apply(state, seat, action)
        for card in ("KH", "QH", "JD", "AD"):
            assert card not in caught.value.message


def test_view_shows_public_facts_only() -> None:
    state = table(["2C 3C", "5S 6S", "9D"], pile="4S 8H KC", face_up=2, challenger=0,
                  tries=3, turn=1, statuses=["in_play", "in_play", "eliminated"],
                  strikes=[0, 0, 1], sequence=12)
    view = RULES.view(state, 1)
    assert view.pile_top == cards("8H KC")  # 4S is face down
    assert view.pile_size == 3 and view.top_sequence == 12
    assert view.deck_sizes == (2, 2, 1)
    assert (view.turn, view.challenger, view.tries_left, view.owes) == (1, 0, 3, 1)
    assert view.statuses == ("in_play", "in_play", "eliminated") and view.strikes == (0, 0, 1)
    assert RULES.view(state, None) == view
    assert "4S" not in repr(view) and "2C" not in repr(view)


def test_state_action_and_options_round_trip() -> None:
    state = table(["2C 3C", "5S JK", ""], pile="4S 8H KC", face_up=2, challenger=0, tries=3,
                  turn=1, statuses=["in_play", "in_play", "out"], strikes=[0, 0, 3],
                  combinations=frozenset({"seven", "ten"}), flip_cap=77)
    data = json.loads(json.dumps(RULES.encode_state(state)))
    assert RULES.decode_state(data) == state
    for action in (Flip(), Slap(0), Slap(2**40)):
        assert RULES.decode_action(json.loads(json.dumps(RULES.encode_action(action)))) == action
    options = CorseOptions(frozenset({"big_mac"}), 5)
    assert RULES.decode_options(RULES.encode_options(options)) == options
    with pytest.raises(ValueError):
        RULES.decode_action({"type": "reveal"})
