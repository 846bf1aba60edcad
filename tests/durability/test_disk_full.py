"""A real full disk: the data directory on a small tmpfs, filled up during play.

Clients see UNAVAILABLE / STORE_UNAVAILABLE (never UNKNOWN, never OK for what is not on disk);
after space is freed the same server, and a restarted one, hold every acknowledged action and
nothing else. Needs to mount a tmpfs (root in a sandbox that allows it); elsewhere it is skipped
and the injected-fault tests (test_faults.py) cover the same code path.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.stores.sqlite_store import FILE_NAME
from tests.support.calls import auth, reason_of
from tests.support.driver import Game, start_game
from tests.support.process import ServerProcess, channel

pytestmark = pytest.mark.slow  # server processes started, killed, restarted

RETRY_FOR_S = 30.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and a sandbox that allows it): "
                    f"{mounted.stderr.decode().strip()}; test_faults.py injects the same fault")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: close() has nothing to flush
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


class Player:
    """Plays one game with request ids, keeping what was acknowledged and what was refused."""

    def __init__(self, stub: pb_grpc.GameServiceStub, game: Game, seed: int) -> None:
        self.stub = stub
        self.game = game
        self.rng = random.Random(seed)
        self.acked: dict[str, tuple[int, int]] = {}
        """request id -> (seat, the version its answer gave)."""
        self.refused: list[tuple[int, pb.SubmitActionRequest]] = []

    async def step(self) -> None:
        view = (await self.stub.GetGame(pb.GetGameRequest(game_id=self.game.game_id))).game
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            return
        seat = view.awaiting_seats[0]
        request = pb.SubmitActionRequest(
            game_id=self.game.game_id, action=pb.Action(war={"reveal": {}}),
            request_id=f"{self.game.game_id}-{len(self.acked) + len(self.refused)}")
        await self.send(seat, request)

    async def send(self, seat: int, request: pb.SubmitActionRequest) -> bool:
        try:
            answer = await self.stub.SubmitAction(request, metadata=auth(self.game.tokens[seat]))
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            assert reason_of(error) == "STORE_UNAVAILABLE", error
            self.refused.append((seat, request))
            return False
        self.acked[request.request_id] = (seat, answer.version)
        return True

    async def retry_refused(self) -> None:
        """The same requests again (same ids) until each is applied, once."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RETRY_FOR_S
        while self.refused:
            seat, request = self.refused.pop(0)
            if not await self.send(seat, request):
                assert loop.time() < give_up, "the store never came back"
                self.refused.pop()
                self.refused.insert(0, (seat, request))
                await asyncio.sleep(0.05)


async def health(target: str) -> int:
    async with channel(target) as probe:
        answer = await health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest())
        return answer.status


async def test_a_full_disk_refuses_writes_and_loses_nothing_acknowledged(
        small_disk: Path) -> None:
    (small_disk / "data").mkdir()
    server = ServerProcess(small_disk / "data", "--snapshot-every", "5")
    server.log = small_disk.parent / "server.log"  # the server's own log is not on that disk
    try:
        await server.start()
        async with channel(server.target) as grpc_channel:
            stub = pb_grpc.GameServiceStub(grpc_channel)
            players = [Player(stub, await start_game(stub, "war", seed=s,
                                                     war={"target_points": 10_000}), s)
                       for s in range(3)]
            for _ in range(10):
                for player in players:
                    await player.step()
            filler = fill(small_disk)
            for _ in range(400):
                for player in players:
                    await player.step()
                if any(p.refused for p in players):
                    break
            assert any(p.refused for p in players), "the full disk refused no write"
            assert await health(server.target) == health_pb2.HealthCheckResponse.NOT_SERVING
            filler.unlink()
            for player in players:
                await player.retry_refused()
            for _ in range(5):
                for player in players:
                    await player.step()
            assert await health(server.target) == health_pb2.HealthCheckResponse.SERVING
            await check_every_ack(stub, players)
        server.kill()
        await server.start()
        async with channel(server.target) as grpc_channel:
            await check_every_ack(pb_grpc.GameServiceStub(grpc_channel), players)
    finally:
        server.stop()
    stored = sqlite3.connect(server.data_dir / FILE_NAME)
    try:
        for player in players:
            rows = stored.execute("SELECT idx FROM journal WHERE game_id = ? ORDER BY idx",
                                  (player.game.game_id,)).fetchall()
            # Two claims, then exactly the acknowledged actions: nothing more, no hole.
            assert [r[0] for r in rows] == list(range(1, 2 + len(player.acked) + 1))
    finally:
        stored.close()


async def check_every_ack(stub: pb_grpc.GameServiceStub, players: list[Player]) -> None:
    """Every acknowledged request, sent again, gets its first answer (it is in the journal)."""
    for player in players:
        view = (await stub.GetGame(pb.GetGameRequest(game_id=player.game.game_id))).game
        assert view.version == 2 + len(player.acked)  # two claims, then the acks
        for request_id, (seat, version) in player.acked.items():
            answer = await stub.SubmitAction(
                pb.SubmitActionRequest(game_id=player.game.game_id,
                                       action=pb.Action(war={"reveal": {}}),
                                       request_id=request_id),
                metadata=auth(player.game.tokens[seat]))
            assert answer.version == version, request_id
        assert (await stub.GetGame(pb.GetGameRequest(game_id=player.game.game_id))
                ).game.version == view.version, "a retry was applied twice"
