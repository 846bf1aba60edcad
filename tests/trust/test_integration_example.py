"""clients/examples/backend_integration.py, the example of docs/integration.md, runs against a
server with TLS and API keys: it creates a private table with reserved seats, its players play
with their tickets over TLS (one of them replaced by another player first), and it stores and
acknowledges the game's and the series' results."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tapis.v1 import game_service_pb2 as pb
from tests.trust.door import KEY_A, StartSecured, door

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "examples" / "backend_integration.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("backend_integration", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_integration_example_runs_end_to_end(
        tmp_path: Path, start_secured: StartSecured, capsys: pytest.CaptureFixture[str]) -> None:
    files = door(tmp_path)
    secured = await start_secured(files, allow_stacked_decks=False)
    results = await example().run(secured.target, files.server.ca_bytes(), KEY_A)
    assert [(r.cursor, r.WhichOneof("result")) for r in results] == [
        (1, "game_ended"), (2, "series_ended")]
    assert results[1].series_ended.reason == pb.SERIES_END_REASON_COMPLETED
    assert secured.running.host.clerk.held == set()  # acknowledged: the server may forget it
    printed = capsys.readouterr().out
    assert "tickets for ada, grace" in printed and "series ended" in printed
    assert "seat 1 given to linus; grace's ticket: UNAUTHENTICATED" in printed
    assert set(results[0].player_ids) == {"ada", "linus"}
    assert [dict(r.labels) for r in results] == [{"match": "match-ada-grace"}] * 2
    assert "#2 match-ada-grace series ended" in printed
