"""Bataille, RULES.md §1: one test per rule and per ruling."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tapis_engine.cards import Card, parse_card, standard_deck
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.war import (
    RULES,
    BatailleAnnounced,
    CardRevealed,
    Reveal,
    ShortBataille,
    TrickWon,
    WarEnded,
    WarOptions,
    WarState,
)
from tests.support.cards import cards


def stacked(seat0: str, seat1: str) -> tuple[Card, ...]:
    """A full 52-card deck whose deal gives seat 0 then seat 1 these top cards."""
    top0, top1 = cards(seat0), cards(seat1)
    rest = [c for c in standard_deck() if c not in top0 + top1]
    d0 = list(top0) + rest[: 26 - len(top0)]
    d1 = list(top1) + rest[26 - len(top0):]
    deck: list[Card] = []
    for a, b in zip(d0, d1, strict=True):
        deck += [a, b]
    return tuple(deck)


def start(deck: tuple[Card, ...] | None = None, first: int | None = 0, seed: int = 7,
          target: int = 50) -> WarState:
    state, _ = RULES.start(GameSetup(2, seed, WarOptions(target), deck, first))
    return state


def play(state: WarState, *seats: int) -> tuple[WarState, list[object]]:
    events: list[object] = []
    for seat in seats:
        state, new = RULES.apply(state, seat, Reveal())
        events += new
    return state, events


def test_deal_one_at_a_time_from_seat_0_first_card_on_top() -> None:
    deck = stacked("AS KS", "2C 3C")
    state = start(deck)
    assert state.decks[0][:2] == cards("AS KS")
    assert state.decks[1][:2] == cards("2C 3C")
    assert len(state.decks[0]) == len(state.decks[1]) == 26
    assert sorted(state.decks[0] + state.decks[1]) == sorted(standard_deck())


def test_first_player_is_drawn_from_the_seed_and_varies() -> None:
    firsts = {start(first=None, seed=seed).first for seed in range(40)}
    assert firsts == {0, 1}
    assert start(first=None, seed=3).first == start(first=None, seed=3).first


def test_first_player_reveals_first_other_cannot() -> None:
    state = start(stacked("AS", "2C"), first=1)
    with pytest.raises(RuleError) as refused:
        RULES.apply(state, 0, Reveal())
    assert refused.value.reason is Reason.NOT_YOUR_TURN
    assert RULES.legal_actions(state, 0) == []
    assert RULES.legal_actions(state, 1) == [Reveal()]


def test_not_your_turn_says_whether_the_awaited_seat_reveals_first_or_second() -> None:
    state = start(stacked("AS KS", "2C 3C"), first=1)
    with pytest.raises(RuleError) as refused:
        RULES.apply(state, 0, Reveal())
    assert refused.value.message == "seat 1 reveals first in this trick"
    state, _ = play(state, 1)
    with pytest.raises(RuleError) as refused:
        RULES.apply(state, 1, Reveal())
    assert refused.value.reason is Reason.NOT_YOUR_TURN
    assert refused.value.message == "seat 0 reveals second in this trick"


def test_higher_rank_takes_the_trick_under_its_deck_in_laid_order() -> None:
    state = start(stacked("5S", "KC"), first=0)
    state, events = play(state, 0, 1)
    assert state.decks[1][-2:] == cards("5S KC")  # first player's card, then the other's
    assert state.points == (0, 1)
    assert (len(state.decks[0]), len(state.decks[1])) == (25, 27)
    won = [e for e in events if isinstance(e, TrickWon)]
    assert won == [TrickWon(1, 2, (0, 1), (25, 27))]
    assert state.to_move == 0  # the same first player leads every trick


def test_bataille_is_announced_and_one_action_lays_face_down_and_face_up() -> None:
    state = start(stacked("9S 2D KH", "9C 3D 4H"), first=0)
    state, events = play(state, 0, 1)
    assert BatailleAnnounced(1) in events
    assert state.batailles == 1
    state, events = play(state, 0)
    revealed = [e for e in events if isinstance(e, CardRevealed)]
    assert revealed[0].card == parse_card("KH") and revealed[0].with_face_down
    assert len(state.decks[0]) == 26 - 3
    state, events = play(state, 1)
    # K beats 4: seat 0 takes 6 cards, in the ruling's order.
    assert state.decks[0][-6:] == cards("9S 9C 2D KH 3D 4H")
    assert state.points == (1, 0)


def test_bataille_again_repeats() -> None:
    state = start(stacked("9S 2D 5H 3S AH", "9C 3D 5C 4S 2H"), first=0)
    state, events = play(state, 0, 1, 0, 1)
    assert [e.count for e in events if isinstance(e, BatailleAnnounced)] == [1, 2]
    state, _ = play(state, 0, 1)
    assert state.points == (1, 0)
    assert state.decks[0][-10:] == cards("9S 9C 2D 5H 3D 5C 3S AH 4S 2H")


def _near_end(deck0: str, deck1: str, first: int = 0) -> WarState:
    return WarState(decks=(cards(deck0), cards(deck1)), first=first, points=(3, 4),
                    target=50, to_move=first)


def test_short_bataille_loses_at_once_and_opponent_takes_everything_no_point() -> None:
    state = _near_end("9S", "9C 2D 3D 4D")
    state, events = play(state, 0, 1)
    assert ShortBataille(0, (0, 5)) in events
    assert state.end == "short_bataille" and state.winner == 1
    assert state.points == (3, 4)  # no point for it
    assert len(state.decks[1]) == 5 and not state.decks[0]
    outcome = RULES.outcome(state)
    assert outcome is not None and outcome.winners == (1,)


def test_short_bataille_on_both_sides_is_a_draw() -> None:
    state = _near_end("9S", "9C")
    state, events = play(state, 0, 1)
    assert ShortBataille(None, (0, 0)) in events
    outcome = RULES.outcome(state)
    assert outcome is not None and outcome.winners == ()
    assert state.end == "draw"


def test_one_point_per_trick_however_many_batailles() -> None:
    state = start(stacked("9S 2D 5H 3S AH", "9C 3D 5C 4S 2H"), first=0)
    state, _ = play(state, 0, 1, 0, 1, 0, 1)
    assert state.points == (1, 0)


def test_game_ends_at_the_points_target_default_50() -> None:
    assert RULES.default_options().target_points == 50
    state = replace(start(stacked("AS", "2C")), points=(49, 0))
    state, events = play(state, 0, 1)
    assert state.end == "target" and state.winner == 0
    assert isinstance(events[-1], WarEnded)
    with pytest.raises(RuleError) as refused:
        RULES.apply(state, 0, Reveal())
    assert refused.value.reason is Reason.GAME_OVER


def test_target_is_an_option() -> None:
    state = start(stacked("AS KS", "2C 3C"), target=2)
    state, _ = play(state, 0, 1, 0, 1)
    assert state.end == "target" and state.points == (2, 0)


def test_game_ends_when_a_player_holds_all_52_cards() -> None:
    others = [str(c) for c in standard_deck() if str(c) not in ("AS", "2H")]
    state = _near_end("AS " + " ".join(others), "2H")
    state, _ = play(state, 0, 1)
    assert len(state.decks[0]) == 52
    assert state.end == "all_cards" and state.winner == 0


def test_view_shows_both_deck_sizes_and_only_the_last_trick_never_face_down_cards() -> None:
    state = start(stacked("5S 9S 2D KH", "KC 9C 3D 4H"), first=0)
    state, _ = play(state, 0, 1)  # trick 1: seat 1 wins
    state, _ = play(state, 0, 1, 0)  # trick 2: bataille, seat 0 laid face down + up
    view = RULES.view(state, None)
    assert view.deck_sizes == (len(state.decks[0]), len(state.decks[1]))
    assert [c.card for c in view.last_trick if c] == list(cards("5S KC"))
    assert view.trick[2] is None  # the face-down card
    assert [c.card for c in view.trick if c] == list(cards("9S 9C KH"))
    state, _ = play(state, 1)
    view = RULES.view(state, 1)
    assert parse_card("5S") not in [c.card for c in view.last_trick if c]  # older: gone


def test_illegal_action_changes_nothing() -> None:
    state = start(stacked("AS", "2C"), first=0)
    before = RULES.encode_state(state)
    with pytest.raises(RuleError):
        RULES.apply(state, 1, Reveal())
    assert RULES.encode_state(state) == before


def test_setup_is_checked() -> None:
    bad = [GameSetup(3, 1, WarOptions()), GameSetup(2, 1, WarOptions(0)),
           GameSetup(2, 1, WarOptions(), standard_deck()[:51]),
           GameSetup(2, 1, WarOptions(), standard_deck(), 2)]
    for setup in bad:
        with pytest.raises(RuleError) as refused:
            RULES.check_setup(setup)
        assert refused.value.kind.value == "invalid"
