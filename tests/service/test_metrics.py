"""The per-action counter: plain integers, exported as a Prometheus counter."""

from __future__ import annotations

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from tapis_service.door import logcontext
from tapis_service.observe import metrics
from tapis_service.process.main import configure_logging


def test_a_loop_counter_is_exported_as_a_counter() -> None:
    registry = CollectorRegistry()
    counter = metrics.LoopCounter("t_moves", "Moves", ["kind", "source"], registry=registry)
    assert registry.get_sample_value("t_moves_total", {"kind": "war", "source": "person"}) \
        is None
    counter.inc("war", "person")
    counter.inc("war", "person")
    counter.inc("basra", "server")
    assert counter.value("war", "person") == 2
    assert registry.get_sample_value("t_moves_total", {"kind": "war", "source": "person"}) == 2
    assert registry.get_sample_value("t_moves_total",
                                     {"kind": "basra", "source": "server"}) == 1
    text = generate_latest(registry).decode()
    assert "# TYPE t_moves_total counter" in text


def test_per_action_lines_follow_the_configured_level() -> None:
    try:
        configure_logging("warning")
        assert not logcontext.per_action_lines
        configure_logging("info")
        assert logcontext.per_action_lines
    finally:
        structlog.reset_defaults()
        logcontext.per_action_lines = True
