"""The seat tokens a server knows: revoking a seat and forgetting a table touch that table's
tokens only (they are indexed by table: neither looks at every token of the server); a
connection's remembered verification answers as the registry does."""

from __future__ import annotations

import functools
import random

import grpc
import pytest

from tapis_engine import table as tbl
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import rules_for
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.door.caller import Remembered
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.session import Session
from tapis_service.tables.tokens import SeatTokens, token_hash


@functools.cache
def at(game_id: str) -> Session:
    """A War table ``game_id``, not started (``seat_of`` reads its id)."""
    rules = rules_for("war")
    assert rules is not None
    setup = GameSetup(seats=2, seed=5, options=rules.default_options(), stacked_deck=None,
                      stacked_first=None, salt="salt", seed_chosen=True)
    table, _ = tbl.new_table(rules, setup, [None, None], 0, 0)
    return Session(game_id=game_id, rules=rules, adapter=ADAPTERS["war"], table=table,
                   created_ms=0, names=["", ""])


def reason(tokens: SeatTokens, game_id: str, token: str) -> str:
    with pytest.raises(ServiceError) as refused:
        tokens.seat_of(at(game_id), token)
    return refused.value.reason


def test_revoking_a_seat_revokes_its_tokens_and_no_other() -> None:
    tokens = SeatTokens(b"k" * 32)
    for game_id in ("a", "b"):
        for seat, token in enumerate((f"{game_id}0", f"{game_id}1")):
            tokens.add(token_hash(token), game_id, seat)
    tokens.add(token_hash("a0-again"), "a", 0)  # a second token of the same seat

    revoked = tokens.revoke("a", 0)

    assert revoked == sorted([token_hash("a0"), token_hash("a0-again")])
    assert reason(tokens, "a", "a0") == reason(tokens, "a", "a0-again") == "TOKEN_REVOKED"
    assert tokens.seat_of(at("a"), "a1") == 1
    assert (tokens.seat_of(at("b"), "b0"), tokens.seat_of(at("b"), "b1")) == (0, 1)
    assert tokens.revoke("a", 0) == []  # nothing left to revoke


def test_forgetting_a_table_forgets_its_tokens_revoked_ones_too_and_no_other() -> None:
    tokens = SeatTokens(b"k" * 32)
    tokens.add(token_hash("a0"), "a", 0)
    tokens.add(token_hash("b0"), "b", 0)
    tokens.revoke("a", 0)
    tokens.add(token_hash("a0-new"), "a", 0)

    tokens.forget("a")

    assert reason(tokens, "a", "a0") == "INVALID_TOKEN"  # no longer known as revoked either
    assert reason(tokens, "a", "a0-new") == "INVALID_TOKEN"
    assert tokens.seat_of(at("b"), "b0") == 0
    tokens.forget("a")  # forgetting twice is harmless
    assert tokens.seat_of(at("b"), "b0") == 0


def test_a_revoked_tokens_refusal_says_which_token_it_was() -> None:
    """A seat's token (ReplaceSeat) and the table's former spectator token
    (RotateSpectatorToken) are both TOKEN_REVOKED, each named for what it was."""
    tokens = SeatTokens(b"k" * 32)
    tokens.add(token_hash("a0"), "a", 0)
    tokens.revoke("a", 0)
    tokens.add_revoked(token_hash("watch-a"), "a", spectator=True)
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    assert answer(tokens, "a", "a0") == (unauthenticated, "TOKEN_REVOKED",
                                         "this seat token was revoked by the table's backend")
    assert answer(tokens, "a", "watch-a") == (
        unauthenticated, "TOKEN_REVOKED", "this spectator token was revoked by the table's "
        "backend")
    tokens.forget("a")
    assert reason(tokens, "a", "watch-a") == "INVALID_TOKEN"


def answer(tokens: SeatTokens, game_id: str, token: str,
           remembered: Remembered | None = None) -> object:
    """What ``seat_of`` answers: the seat, or the refusal's status, reason and message."""
    try:
        return tokens.seat_of(at(game_id), token, remembered)
    except ServiceError as error:
        return (error.code, error.reason, error.message)


def test_a_remembered_verification_answers_as_the_registry_through_every_change() -> None:
    """A connection's remembered verification (one per token it sends, kept across calls)
    answers every call as the registry itself does, through seeded random adds, revocations,
    replacements, forgotten tables and a new key: valid, revoked, replaced, unknown and
    another table's tokens alike, and a revoked token is refused on its very next call."""
    rng = random.Random(35)
    tokens = SeatTokens(b"k" * 32)
    names = [f"t{n}" for n in range(8)]
    games = ["a", "b", "c"]
    memories = {(name, game_id): Remembered(name) for name in names for game_id in games}
    kinds: set[object] = set()
    for step in range(3000):
        change = rng.random()
        game_id, seat, name = rng.choice(games), rng.randrange(2), rng.choice(names)
        if change < 0.06:
            tokens.add(token_hash(name), game_id, seat)
        elif change < 0.08:
            tokens.revoke(game_id, seat)
        elif change < 0.09:
            tokens.add_revoked(token_hash(name), game_id)
        elif change < 0.095:
            tokens.forget(game_id)
        elif change < 0.097:
            tokens.key = bytes([step % 256]) * 32
        else:
            plain = answer(tokens, game_id, name)
            assert answer(tokens, game_id, name, memories[name, game_id]) == plain, step
            kinds.add(plain if isinstance(plain, int) else plain[1])  # type: ignore[index]
    assert kinds == {0, 1, "INVALID_TOKEN", "TOKEN_REVOKED", "TOKEN_FOR_ANOTHER_GAME"}


def test_a_revoked_token_is_refused_on_its_next_call_and_a_remembered_one_costs_no_lookup(
        ) -> None:
    tokens = SeatTokens(b"k" * 32)
    tokens.add(token_hash("a0"), "a", 0)
    remembered = Remembered("a0")
    assert tokens.seat_of(at("a"), "a0", remembered) == 0
    tokens._seats.clear()  # a remembered verification is answered without the registry
    assert tokens.seat_of(at("a"), "a0", remembered) == 0
    tokens.add(token_hash("a0"), "a", 0)
    tokens.revoke("a", 0)
    assert answer(tokens, "a", "a0", remembered)[1] == "TOKEN_REVOKED"  # type: ignore[index]


def test_a_verification_remembered_at_one_registry_is_not_another_s() -> None:
    """Two servers in one process (a connection's memory reaching the wrong one would answer
    for it): generations never repeat across registries."""
    first, second = SeatTokens(b"k" * 32), SeatTokens(b"k" * 32)
    first.add(token_hash("a0"), "a", 0)
    second.add(token_hash("a0"), "a", 1)
    remembered = Remembered("a0")
    assert first.seat_of(at("a"), "a0", remembered) == 0
    assert second.seat_of(at("a"), "a0", remembered) == 1
