"""``make bench-peers`` waits for a quiet host before each table count (``peers.settle``): on an
injected load and clock, never on the machine's."""

from __future__ import annotations

from tapis_bench import peers


class Host:
    """A host whose one-minute load falls by ``per_poll`` at each poll; a clock moved by the
    waits alone."""

    def __init__(self, load: float, per_poll: float) -> None:
        self.current, self.per_poll, self.clock, self.slept = load, per_poll, 0.0, 0.0

    def load(self) -> float:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.clock += seconds
        self.slept += seconds
        self.current -= self.per_poll

    def now(self) -> float:
        return self.clock


def test_a_quiet_host_is_not_waited_for() -> None:
    host = Host(0.4, 0.1)
    assert peers.settle(90, host.load, host.sleep, host.now) == 0.4
    assert host.slept == 0


def test_a_busy_host_is_waited_for_until_it_is_quiet() -> None:
    host = Host(2.2, 0.5)  # 2.2, 1.7, 1.2, 0.7
    assert peers.settle(90, host.load, host.sleep, host.now, poll_s=5) < peers.QUIET_LOAD
    assert host.slept == 15


def test_the_wait_is_bounded_and_says_the_load_it_ends_with() -> None:
    host = Host(3.0, 0.01)
    assert peers.settle(12, host.load, host.sleep, host.now, poll_s=5) > peers.QUIET_LOAD
    assert host.slept == 12
    assert peers.settle(0, host.load, host.sleep, host.now) > peers.QUIET_LOAD
    assert host.slept == 12
