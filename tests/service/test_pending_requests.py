"""The key a retry finds an input being committed by (``session.PendingRequest``): hashed
without a Python call (its kind's hash is C's), each kind and request id a key of its own."""

from __future__ import annotations

from tapis_service.tables.session import PendingRequest, RequestKind


def test_a_request_kind_is_hashed_by_cs_own_hash() -> None:
    """``Enum.__hash__`` is a Python function, run twice per durable input otherwise."""
    assert RequestKind.__hash__ is object.__hash__
    for kind in RequestKind:
        assert hash(kind) == object.__hash__(kind)


def test_pending_requests_are_keys_of_their_own() -> None:
    """The same request finds its entry; another kind, id, seat or scope does not."""
    keys = [PendingRequest(kind, request_id, seat, scope)
            for kind in RequestKind for request_id in ("a", "b")
            for seat in (None, 0, 1) for scope in ("", "s")]
    pending = {key: number for number, key in enumerate(keys)}
    assert len(pending) == len(keys)
    for number, key in enumerate(keys):
        again = PendingRequest(RequestKind(key.kind.value), key.request_id, key.seat, key.scope)
        assert pending[again] == number
