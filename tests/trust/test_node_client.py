"""The TypeScript client package (clients/tapis-client-ts, @tapis/client) and its Node example,
against a real server with TLS and a key: `make ts-client` installs (npm ci), builds and
unit-tests the package; the example creates private tables with reserved seats and labels,
plays them with player apps holding only their tickets, and follows its results into a file
with acknowledgement, while the server is killed (SIGKILL) once mid-series and started again,
and then the example itself, which a second run resumes. Every result ends in the file exactly
once, with the table's labels."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tapis_service.door.tls import channel_credentials
from tests.support.process import ServerProcess, wait_serving
from tests.trust.door import KEY_A, Door, door

pytestmark = pytest.mark.slow  # npm, node and server processes

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "tapis-client-ts"
TABLES, GAMES = 3, 3


class TlsServer(ServerProcess):
    """A server process behind its door (TLS and the keys file), awaited over TLS."""

    def __init__(self, data_dir: Path, files: Door) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(data_dir, "--tls-cert", str(files.server.cert), "--tls-key",
                         str(files.server.key), "--api-keys-file", str(files.keys))
        self.ca = files.server.ca_bytes()

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        await wait_serving(self.target, process=self.process,
                           credentials=channel_credentials(self.ca))


async def make_ts_client() -> None:
    make = shutil.which("make")
    assert make is not None
    build = await asyncio.create_subprocess_exec(
        make, "-s", "ts-client", cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(build.communicate(), timeout=300)
    assert build.returncode == 0, output.decode(errors="replace")[-4000:]


async def stored(stream: asyncio.StreamReader, after: int, seen: list[str]) -> int:
    """Reads the example's lines until it says it stored a record past cursor ``after``."""
    while True:
        raw = await asyncio.wait_for(stream.readline(), timeout=60)
        assert raw, "the example ended early:\n" + "".join(seen)
        line = raw.decode()
        seen.append(line)
        if line.startswith("stored #") and int(line.split()[1][1:]) > after:
            return int(line.split()[1][1:])


async def test_the_node_example_rides_out_a_server_kill_and_its_own(tmp_path: Path) -> None:
    await make_ts_client()
    files = door(tmp_path)
    key = tmp_path / "backend.key"
    key.write_text(KEY_A + "\n", encoding="utf-8")
    results = tmp_path / "results.jsonl"
    server = TlsServer(tmp_path / "data", files)
    await server.start()
    node = shutil.which("node")
    assert node is not None
    command = (node, str(PACKAGE / "dist" / "examples" / "backend.js"), f"localhost:{server.port}",
               "--ca", str(files.server.ca), "--api-key-file", str(key), "--results", str(results),
               "--tables", str(TABLES), "--games", str(GAMES), "--target-points", "3")
    first = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert first.stdout is not None
    seen: list[str] = []
    again: asyncio.subprocess.Process | None = None
    try:
        await stored(first.stdout, 0, seen)  # the first game of a series
        server.kill()
        assert first.returncode is None  # mid-series: the example was still at work
        before_restart = len(results.read_text().splitlines())
        await server.start()
        # the example goes on against the server started again (a record the server had not
        # sent before its death), then is killed itself, that record stored (written and
        # synced) and maybe not yet acknowledged
        await stored(first.stdout, before_restart, seen)
        first.kill()
        await first.wait()
        again = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        rest, _ = await asyncio.wait_for(again.communicate(), timeout=60)
    finally:
        for process in (first, again):
            if process is not None and process.returncode is None:
                process.kill()
        server.stop()
    printed = "".join(seen) + rest.decode()
    assert again.returncode == 0, printed
    assert "resuming: the tables of" in printed
    assert f"done: {TABLES * (GAMES + 1)} results" in printed

    matches = {line.split()[1]: line.split()[2].rstrip(":")
               for line in printed.splitlines() if line.startswith("table ")}
    assert sorted(matches.values()) == [f"match-{i}" for i in range(1, TABLES + 1)]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [int(r["cursor"]) for r in records] == list(range(1, TABLES * (GAMES + 1) + 1))
    games: dict[str, list[int]] = defaultdict(list)
    series: dict[str, list[str]] = defaultdict(list)
    for record in records:
        game_id = record["gameId"]
        assert record["labels"] == {"match": matches[game_id], "site": "node-example"}
        number = matches[game_id].split("-")[1]
        assert record["playerIds"] == [f"p{number}a", f"p{number}b"]
        if "gameEnded" in record:
            games[game_id].append(record["gameEnded"]["gameNumber"])
        else:
            series[game_id].append(record["seriesEnded"]["reason"])
    assert games == {game_id: list(range(1, GAMES + 1)) for game_id in matches}
    assert series == {game_id: ["SERIES_END_REASON_COMPLETED"] for game_id in matches}
