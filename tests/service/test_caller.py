"""The ``Caller`` value: immutable, and changed only into a new value."""

from __future__ import annotations

import pytest

from tapis_service.caller import Caller, deadline_in


def test_a_caller_is_an_immutable_value_changed_into_a_new_one() -> None:
    caller = Caller(seat_token="t", api_key="k", peer="ipv4:10.0.0.1:5", deadline=deadline_in(5),
                    traceparent="00-" + "ab" * 16 + "-00f067aa0ba902b7-01")
    with pytest.raises(AttributeError):
        caller.seat_token = "other"  # type: ignore[misc]
    relayed = caller.relayed()
    assert relayed.forwarded and not caller.forwarded
    assert relayed._replace(forwarded=False) == caller
    anonymous = caller.anonymous()
    assert (anonymous.seat_token, anonymous.api_key, anonymous.bad_authorization) == \
        (None, None, False)
    assert (anonymous.peer, anonymous.deadline, anonymous.traceparent) == \
        (caller.peer, caller.deadline, caller.traceparent)
    assert Caller().time_remaining() is None and caller.time_remaining() is not None
    assert hash(caller) == hash(caller._replace())
