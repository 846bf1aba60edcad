"""`tapis-bot`'s options checked before any call, as `tapis play` checks its own: selfplay's
``--players`` against the chosen game's own seat counts (its ``ClientGame.seats``), and
``--strategy`` loaded (a function of an importable module) before a seat is taken."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import bot, games
from tapis_clients.game import ClientGame
from tests.support.calls import person_seats
from tests.support.server import ServerFactory


class NoConnection:
    """Stands for ``bot.Connection``: any connection made is recorded (none may be)."""

    made: list[str] = []

    def __init__(self, target: str | None, **kwargs: Any) -> None:
        NoConnection.made.append(str(target))
        raise AssertionError(f"a connection to {target} was made")


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    NoConnection.made = []
    monkeypatch.setattr(bot, "Connection", NoConnection)
    return NoConnection.made


@pytest.mark.parametrize("game", games.GAMES, ids=lambda game: game.commands[0])
def test_selfplay_takes_every_seat_count_of_the_game(game: ClientGame) -> None:
    """Each count the game seats; not given (or 0, the contract's "the fewest"): the fewest."""
    low, high = game.seats
    for command in game.commands:
        for count in range(low, high + 1):
            args = bot.parse_args(["selfplay", "--kind", command, "--players", str(count)])
            assert args.players == count
        assert bot.parse_args(["selfplay", "--kind", command]).players == low
        assert bot.parse_args(["selfplay", "--kind", command, "--players", "0"]).players == low


@pytest.mark.parametrize(("argv", "said"), [
    (["selfplay", "--kind", "war", "--players", "3"],
     "--players 3: Bataille is for exactly 2 players"),
    (["selfplay", "--kind", "bataille", "--players", "6"],
     "--players 6: Bataille is for exactly 2 players"),
    (["selfplay", "--kind", "basra", "--players", "5"], "--players 5: Basra is for 2 to 4 players"),
    (["selfplay", "--kind", "boutons", "--players", "6"],
     "--players 6: La bataille des boutons is for 2 to 4 players"),
    (["selfplay", "--kind", "bataille-corse", "--players", "1"],
     "--players 1: Bataille Corse is for 2 to 6 players"),
    (["--target", "127.0.0.1:1", "selfplay", "--players", "4"],
     "--players 4: Bataille is for exactly 2 players"),
    (["selfplay", "--strategy", "no_colon"],
     "--strategy: a strategy is module:function, not 'no_colon'"),
    (["selfplay", "--strategy", "tapis_no_such_module:choose"],
     "--strategy: cannot import tapis_no_such_module: No module named 'tapis_no_such_module'"),
    (["--strategy", "tapis_clients.strategies:missing", "play", "--game", "g"],
     "--strategy: tapis_clients.strategies has no function 'missing'"),
])
def test_options_the_game_refuses_are_one_line_before_any_call(
        argv: list[str], said: str, no_connection: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """`tapis-bot` itself: the subcommand's usage line and one error line naming the option
    (``tapis-bot selfplay: error: ...``), exit status 2, and no connection made."""
    with pytest.raises(SystemExit) as stopped:
        bot.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    command = f"tapis-bot {next(arg for arg in argv if arg in ('play', 'selfplay'))}"
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"usage: {command} [-h]"), err
    assert lines[-1] == f"{command}: error: {said}", err
    assert no_connection == []


async def test_an_unknown_strategy_takes_no_seat(make_server: ServerFactory) -> None:
    """`tapis-bot play --strategy` of a module that is not there, in a process of its own as
    people run it: one line, exit status 2, and the seat it would have played is still free."""
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2),
        request_id=uuid.uuid4().hex))
    game_id = created.game.game_id
    env = {name: value for name, value in os.environ.items() if name != "TAPIS_TARGET"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapis_clients.bot", "play", "--game", game_id, "--target",
        f"127.0.0.1:{h.running.port}", "--strategy", "tapis_no_such_module:choose",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    _out, raw = await asyncio.wait_for(process.communicate(), 60)  # patience, not a condition
    err = raw.decode()
    assert process.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "tapis-bot play: error: --strategy: cannot import tapis_no_such_module: "
        "No module named 'tapis_no_such_module'"), err
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert [seat.taken for seat in view.seats] == [False, False]
