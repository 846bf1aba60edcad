"""Who this node counts as alive (``Liveness``), on an injected monotonic clock: a member first
read is alive for a TTL (the takeover waits that long before judging it dead), but only one
whose heartbeat it has read move on is *confirmed* alive, what ``tapis_cluster_members``
counts (a node that died before this one started is never counted)."""

from __future__ import annotations

from tapis_service.cluster.liveness import Liveness

TTL_S = 3.0


class Clock:
    """Seconds the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_member_first_read_is_alive_but_confirmed_only_once_it_beats_again() -> None:
    clock = Clock()
    liveness = Liveness(TTL_S, clock)
    assert liveness.observe("b", 7)  # first read: alive for a TTL
    assert liveness.confirmed({"b"}) == set()
    clock.now += 1.0
    assert liveness.observe("b", 8)  # its heartbeat moved on
    assert liveness.confirmed({"b"}) == {"b"}
    clock.now += TTL_S  # unchanged a TTL on: dead, so not among the alive to confirm
    assert not liveness.observe("b", 8)
    assert liveness.dead() == {"b": 8}


def test_a_member_dead_before_this_node_started_is_never_confirmed() -> None:
    clock = Clock()
    liveness = Liveness(TTL_S, clock)
    for _ in range(4):  # its row stays, its heartbeat never moves
        alive = {node for node in ("dead",) if liveness.observe(node, 41)}
        assert liveness.confirmed(alive) == set()
        clock.now += 1.0
    assert alive == set() and liveness.dead() == {"dead": 41}


def test_a_member_gone_from_the_directory_is_forgotten_and_read_afresh() -> None:
    clock = Clock()
    liveness = Liveness(TTL_S, clock)
    liveness.observe("b", 1)
    liveness.observe("b", 2)
    assert liveness.confirmed({"b"}) == {"b"}
    liveness.keep_only([])  # it left
    assert liveness.observe("b", 9)  # back under the same id: first read again
    assert liveness.confirmed({"b"}) == set()
