"""The ``Caller`` value: immutable, and changed only into a new value; a gRPC call's, read from
its headers (once per connection and headers, and not decoded twice within a call)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tapis_service.door import door
from tapis_service.door.caller import Caller, deadline_in
from tapis_service.door.door import caller_of, looked_up, read_caller
from tapis_service.door.proxies import TrustedProxies


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


class _Context:
    """A gRPC call's context as ``caller_of`` reads it: its headers, peer and time left."""

    def __init__(self, metadata: tuple[tuple[str, str | bytes], ...], remaining: float | None,
                 peer: str = "ipv4:127.0.0.1:5000") -> None:
        self.metadata = metadata
        self.remaining = remaining
        self.client = peer

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self.metadata

    def peer(self) -> str:
        return self.client

    def time_remaining(self) -> float | None:
        return self.remaining


@pytest.mark.parametrize(("metadata", "token", "bad", "key"), [
    ((), None, False, None),
    ((("authorization", "Bearer abc"),), "abc", False, None),
    ((("authorization", "bearer  abc "),), "abc", False, None),
    ((("authorization", b"Bearer abc"),), "abc", False, None),
    ((("authorization", "Basic abc"),), None, True, None),
    ((("authorization", "Bearer "),), None, True, None),
    ((("authorization", "Bearer a"), ("authorization", "Bearer b")), "a", False, None),
    ((("authorization", "Basic a"), ("authorization", "Bearer b")), None, True, None),
    ((("x-api-key", "k1"), ("x-api-key", "k2"), ("authorization", "Bearer t")), "t", False,
     "k1"),
    # an empty value is no value (``caller.credential``): as the WebSocket's empty fields
    ((("x-api-key", ""),), None, False, None),
    ((("x-api-key", b""), ("x-api-key", "k2")), None, False, "k2"),
    ((("x-api-key", " "),), None, False, " "),
    ((("authorization", ""),), None, False, None),
    ((("authorization", ""), ("authorization", "Bearer b")), "b", False, None),
])
def test_a_grpc_call_s_caller_is_read_from_its_headers(
        metadata: tuple[tuple[str, str | bytes], ...], token: str | None, bad: bool,
        key: str | None) -> None:
    caller = caller_of(_Context(metadata, None))
    assert (caller.seat_token, caller.bad_authorization, caller.api_key) == (token, bad, key)
    assert (caller.peer, caller.deadline, caller.forwarded, caller.traceparent) == \
        ("ipv4:127.0.0.1:5000", None, False, None)
    assert caller_of(_Context(metadata, None)) == caller == read_caller(_Context(metadata, None))


@pytest.mark.parametrize("key", ["", " ", "k1"])
@pytest.mark.parametrize("token", ["", "t1"])
def test_both_doors_read_the_same_credentials_alike(token: str, key: str) -> None:
    """A WebSocket frame's ``seat_token`` and ``api_key`` make the caller gRPC's headers
    carrying them make (``authorization: Bearer <token>``, or an empty ``authorization``, and
    ``x-api-key``): empty ones, none."""
    headers = (("authorization", f"Bearer {token}" if token else ""), ("x-api-key", key))
    over_grpc = read_caller(_Context(headers, None))
    over_socket = door.socket_caller(token, key, "ipv4:127.0.0.1:5000")
    assert (over_socket.seat_token, over_socket.api_key, over_socket.bad_authorization) == \
        (over_grpc.seat_token, over_grpc.api_key, over_grpc.bad_authorization) == \
        (token or None, key or None, False)


def test_a_connection_s_headers_are_read_once_and_its_token_remembered_there() -> None:
    """``caller_of`` reads a connection's headers once (what the plain reading gives, behind
    trusted proxies too) and keeps one ``Remembered`` per connection and credentials."""
    headers = (("authorization", "Bearer abc"), ("x-forwarded-for", "198.51.100.7"))
    proxies = TrustedProxies.parse("127.0.0.1")
    for behind in (None, proxies):
        first = caller_of(_Context(headers, 2.0), behind)
        again = caller_of(_Context(headers, 1.0), behind)
        assert first == read_caller(_Context(headers, 2.0), behind)._replace(
            deadline=first.deadline)
        assert again.deadline is not None and first.deadline is not None \
            and again.deadline < first.deadline  # each call's own deadline
        assert again.peer == first.peer == ("ipv4:127.0.0.1:5000" if behind is None
                                            else "ipv4:198.51.100.7:5000")
        assert first.remembered is not None and again.remembered is first.remembered
    other = caller_of(_Context(headers, None, peer="ipv4:127.0.0.1:5001"), proxies)
    assert other.remembered is not None
    assert other.remembered is not caller_of(_Context(headers, None), proxies).remembered
    assert caller_of(_Context((), None)).remembered is None  # no token, nothing to remember


def test_a_grpc_call_s_deadline_and_its_client_behind_a_trusted_proxy() -> None:
    before = time.monotonic()
    context = _Context((("x-forwarded-for", "198.51.100.7"),), 2.0)
    caller = caller_of(context)
    assert caller.deadline is not None and before + 2.0 <= caller.deadline <= \
        time.monotonic() + 2.0
    assert caller.peer == "ipv4:127.0.0.1:5000"  # no trusted proxy: the connection's peer
    behind = caller_of(context, TrustedProxies.parse("127.0.0.1"))
    assert behind.peer == "ipv4:198.51.100.7:5000"


class _Undecoded(_Context):
    """A context whose headers grpc has not decoded again: reading them is a failure."""

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        raise AssertionError("the headers were decoded a second time")


async def test_a_call_s_caller_takes_the_headers_its_handler_was_looked_up_with() -> None:
    """In the task that looked the handler up (as grpc.aio serves a call), ``caller_of`` reads
    the headers handed to ``looked_up`` (the same ``Caller`` as the plain reading); in any
    other task, one started from it included, the context's own."""
    mine = (("authorization", "Bearer mine"), ("x-api-key", "k"))
    theirs = (("authorization", "Bearer theirs"),)
    assert door._task() is asyncio.current_task() is not None
    looked_up(mine)
    caller = caller_of(_Undecoded(mine, None))
    assert caller == read_caller(_Context(mine, None))._replace(remembered=caller.remembered)
    assert caller.seat_token == "mine" and caller.api_key == "k"

    async def another_call() -> str | None:  # inherits this task's headers: not its own
        return caller_of(_Context(theirs, None)).seat_token

    assert await asyncio.create_task(another_call()) == "theirs"
    assert door._task() is asyncio.current_task()
    looked_up([("authorization", "Bearer listed")])  # not grpc.aio's tuple: not kept
    assert caller_of(_Undecoded(mine, None)).seat_token == "mine"
    looked_up(theirs)  # the task's next lookup (never two in one grpc.aio call's task)
    assert caller_of(_Undecoded(theirs, None)).seat_token == "theirs"
