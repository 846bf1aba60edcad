"""The seat tokens a server knows: revoking a seat and forgetting a table touch that table's
tokens only (they are indexed by table: neither looks at every token of the server)."""

from __future__ import annotations

import pytest

from tapis_service.errors import ServiceError
from tapis_service.session import Session
from tapis_service.tokens import SeatTokens, token_hash


class _At:
    """What ``seat_of`` reads of a session: its table's id."""

    def __init__(self, game_id: str) -> None:
        self.game_id = game_id


def at(game_id: str) -> Session:
    return _At(game_id)  # type: ignore[return-value]


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
