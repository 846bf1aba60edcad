"""`tapis-bot`'s options checked before any call, as `tapis play` checks its own: selfplay's
``--players`` against the chosen game's own seat counts (its ``ClientGame.seats``)."""

from __future__ import annotations

from typing import Any

import pytest

from tapis_clients import bot, games
from tapis_clients.game import ClientGame


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

