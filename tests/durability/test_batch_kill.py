"""A server on SQLite killed between a batch's writes and its COMMIT (the fsync): every action
answered OK is there after the restart, and none of the batch's actions, never answered, is
half-applied (issue 35.3). The writer is stopped at that point by its own failpoint
(tests/support/paused_commit.py), so the kill lands there every time, not by timing luck."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.stores.sqlite_store import FILE_NAME
from tests.support.calls import auth
from tests.support.driver import Ack, Game, all_events, play, start_game
from tests.support.process import ServerProcess, channel

pytestmark = pytest.mark.slow  # server processes started, killed, restarted

TABLES = 6
ACTIONS_BEFORE = 4
PAUSE_WITHIN_S = 20.0
SCRIPT = Path(__file__).resolve().parent.parent / "support" / "paused_commit.py"


class PausableServer(ServerProcess):
    """A server whose writer stops before a batch's COMMIT once ``arm`` is written."""

    def command(self) -> list[str]:
        plain = super().command()
        assert plain[1:3] == ["-m", "tapis_service.process.main"]
        return [sys.executable, str(SCRIPT), str(self.control), *plain[3:], "--store", "sqlite"]

    @property
    def control(self) -> Path:
        return self.data_dir / "control"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PausableServer]:
    process = PausableServer(tmp_path, "--snapshot-every", "1000")
    process.control.mkdir()
    yield process
    process.stop()


async def one_action(stub: pb_grpc.GameServiceStub, game: Game, seed: int) -> None:
    """One more action; the server may go away before its answer (it is then unanswered)."""
    try:
        await play(stub, game, random.Random(seed), 1)
    except grpc.aio.AioRpcError as error:
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


async def until_exists(path: Path) -> None:
    """Wait for the paused server's failpoint to write ``path`` (bounded)."""
    async with asyncio.timeout(PAUSE_WITHIN_S):
        while not path.exists():
            await asyncio.sleep(0.01)


async def test_a_kill_before_a_batch_commits_keeps_every_answered_action(
        server: PausableServer) -> None:
    await kill_before_a_batch_commits(server)


async def test_a_kill_with_inputs_folded_and_in_the_inbox_keeps_every_answered_action(
        server: PausableServer) -> None:
    """The same, the journal's inbox folded into the tree once before the kill (every
    ``FOLD_AT`` inputs): the answered inputs are in both parts of the killed file, and all
    there after the restart (folded at open)."""
    (server.control / "fold_at").write_text(f"{FOLD_AT}\n")
    await kill_before_a_batch_commits(server, killed=both_parts_hold_inputs)


FOLD_AT = 20
"""Between the inputs before the batch that is held (two claims and ``ACTIONS_BEFORE`` per
table: 36) and half of them: one fold before the kill, some inputs left in the inbox."""


def both_parts_hold_inputs(data_dir: Path) -> None:
    stored = sqlite3.connect(data_dir / FILE_NAME)  # reads the killed server's committed WAL
    try:
        for part in ("journal_folded", "journal_inbox"):
            assert stored.execute(f"SELECT COUNT(*) FROM {part}").fetchone()[0] > 0, part
    finally:
        stored.close()


async def kill_before_a_batch_commits(
        server: PausableServer, killed: Callable[[Path], None] | None = None) -> None:
    """Kill ``server`` before a batch's COMMIT (``killed`` then reads its data directory), and
    find every answered action after the restart."""
    await server.start()
    grpc_channel = channel(server.target)
    stub = pb_grpc.GameServiceStub(grpc_channel)
    rng = random.Random(35)
    games = [await start_game(stub, "war", seed=300 + i) for i in range(TABLES)]
    for game in games:
        await play(stub, game, rng, ACTIONS_BEFORE)

    # One action, whose batch (the first to reach its COMMIT once armed) is held; then one
    # action per other table, queued behind it; the held batch commits, and the next one
    # carries the others and stops before its COMMIT. (Sent in that order, the split of the
    # writes into batches is the same whatever the timing.)
    (server.control / "arm").write_text(f"{TABLES - 1}\n")
    answered = {game.game_id: len(game.acks) for game in games}
    sent = [asyncio.ensure_future(one_action(stub, games[0], 40))]
    await until_exists(server.control / "holding")
    sent += [asyncio.ensure_future(one_action(stub, game, 40 + i))
             for i, game in enumerate(games) if i > 0]
    paused = server.control / "paused"
    await until_exists(paused)
    stopped = paused.read_text().split()  # the tables of the stopped batch's inputs
    server.kill()
    await asyncio.gather(*sent)
    await grpc_channel.close()
    unanswered = [game for game in games if len(game.acks) == answered[game.game_id]]
    assert len(stopped) >= 2, "the stopped batch carried one input: no group commit"
    assert set(stopped) <= {game.game_id for game in unanswered}  # never answered
    if killed is not None:
        killed(server.data_dir)

    (server.control / "arm").unlink()
    await server.start()
    async with channel(server.target) as grpc_channel:
        stub = pb_grpc.GameServiceStub(grpc_channel)
        for game in games:
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))).game
            # every answered action is there, and nothing of the uncommitted batch
            assert view.version == game.acks[-1].version, game.game_id
            events = await all_events(stub, game.game_id, 0, view.last_sequence)
            assert [e.sequence for e in events] == list(range(1, view.last_sequence + 1))
            for ack in game.acks[-2:]:  # answered: a retry answers the same version
                again = await stub.SubmitAction(ack.request, metadata=auth(game.tokens[ack.seat]))
                assert again.version == ack.version
        for game in unanswered:  # never applied: the same action is accepted now, once
            await play(stub, game, random.Random(7), 1)
            latest: Ack = game.acks[-1]
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))).game
            assert view.version == latest.version == game.acks[-2].version + 1
