"""Cluster fixtures: nodes over a fresh database in the run's embedded PostgreSQL. A failed
test's report carries the end of every node's log (the logs live in the test's own temporary
directory, gone with a CI machine)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path

import pytest

from tests.cluster.harness import Node, StartNodes

LOG_TAIL_LINES = 40
"""Last lines of each node's log a failed test's report shows..."""
LOG_WARNINGS = 80
"""...after its last warnings and errors (from anywhere in the log)."""


@pytest.fixture
def cluster_url(database_url: str) -> str:
    """The cluster's database: a fresh, empty one per test (``tests.support.postgres``)."""
    return database_url


@pytest.fixture
async def start_nodes(cluster_url: str, tmp_path: Path,
                      request: pytest.FixtureRequest) -> AsyncIterator[StartNodes]:
    """``await start_nodes(n)``: n more running nodes; every one is killed at the end."""
    started: list[Node] = []
    request.node.stash[STARTED] = started

    async def start(count: int) -> list[Node]:
        nodes = [Node(cluster_url, tmp_path) for _ in range(count)]
        started.extend(nodes)  # before starting them: one that fails leaves none running
        for node in nodes:
            await node.start()
        return nodes

    yield start
    for node in started:
        node.stop()


STARTED = pytest.StashKey[list[Node]]()


def log_tails(nodes: list[Node]) -> str:
    """Each node's last warnings and errors, then its last lines (one log per port: a
    restart appends to it)."""
    parts = []
    for log in dict.fromkeys(node.log for node in nodes):
        text = log.read_text(errors="replace").splitlines() if log.exists() else []
        warned = [line for line in text
                  if '"level":"warning"' in line or '"level":"error"' in line
                  or not line.startswith("{")]
        parts.append(f"--- {log.name}: last {min(LOG_WARNINGS, len(warned))} of "
                     f"{len(warned)} warnings, errors and other lines")
        parts.extend(warned[-LOG_WARNINGS:])
        parts.append(f"--- {log.name}: last {min(LOG_TAIL_LINES, len(text))} of "
                     f"{len(text)} lines")
        parts.extend(text[-LOG_TAIL_LINES:])
    return "\n".join(parts)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """A failed test's report gets a section with the end of each node's log."""
    report = yield
    nodes = item.stash.get(STARTED, None)
    if nodes and isinstance(report, pytest.TestReport) and report.failed:
        report.sections.append(("node logs", log_tails(nodes)))
    return report
