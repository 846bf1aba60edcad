"""Every number the clients take is checked against its range (its field's in the contract, else
a bound the docs give) before any call: argparse's one line naming the option and the range,
exit status 2, never a traceback from the protobuf runtime."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest

from tapis_clients import bot, cli, i18n, options
from tapis_engine.registry import GAMES


def every_action(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The parser's options and positionals, and those of each subcommand."""
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from every_action(sub)


@pytest.mark.parametrize("build", [cli.build_parser, bot.build_parser], ids=["tapis", "bot"])
def test_every_number_of_both_clients_is_bounded(
        build: Callable[[], argparse.ArgumentParser]) -> None:
    typed = [a for a in every_action(build()) if a.type is not None]
    assert len(typed) >= 8
    unbounded = [a.dest for a in typed if not hasattr(a.type, "bounds")]
    assert unbounded == []


def test_the_most_players_is_the_largest_table_of_any_game() -> None:
    assert max(rules.max_seats for rules in GAMES.values()) == options.MAX_PLAYERS


U32 = "(from 0 to 4294967295)"
U64 = "(from 0 to 18446744073709551615)"


@pytest.mark.parametrize(("main", "argv", "said"), [
    (cli.parse_args, ["play", "war", "--turn-time-ms", "-5"], f"--turn-time-ms: -5 is out of "
                                                               f"range {U32}"),
    (cli.parse_args, ["play", "war", "--turn-time-ms", "99999999999"], f"--turn-time-ms: "
                                                                       f"99999999999 is out of "
                                                                       f"range {U32}"),
    (cli.parse_args, ["play", "war", "--points", "-1"], f"--points: -1 is out of range {U32}"),
    (cli.parse_args, ["create", "war", "--seed", "-1"], f"--seed: -1 is out of range {U64}"),
    (cli.parse_args, ["play", "--seed", str(2**64)], "--seed: 18446744073709551616 is out of"),
    (cli.parse_args, ["play", "--bot-speed", "-1"], "--bot-speed: -1 is out of range (from 0 "
                                                    "to 60)"),
    (cli.parse_args, ["play", "--bot-speed", "nan"], "--bot-speed: nan is out of range"),
    (cli.parse_args, ["play", "--players", "7"], "--players: 7 is out of range (from 0 to 6)"),
    (cli.parse_args, ["create", "--people", "-2"], "--people: -2 is out of range (from 0 to 6)"),
    (cli.parse_args, ["join", "g", "--seat", "-1"], f"--seat: -1 is out of range {U32}"),
    (cli.parse_args, ["replace-seat", "g", "4294967296"], f"SEAT: 4294967296 is out of range "
                                                          f"{U32}"),
    (cli.parse_args, ["list", "--page-size", "1001"], "--page-size: 1001 is out of range (from "
                                                      "0 to 1000)"),
    (cli.parse_args, ["list", "--limit", "-1"], "--limit: -1 is out of range (at least 0)"),
    (cli.parse_args, ["play", "--points", "ten"], "--points: invalid int value: 'ten'"),
    (bot.parse_args, ["--reaction-ms", "-1", "play", "--game", "g"], f"--reaction-ms: -1 is out "
                                                                     f"of range {U32}"),
    (bot.parse_args, ["selfplay", "--mistake-rate", "1.5"], "--mistake-rate: 1.5 is out of "
                                                            "range (from 0 to 1)"),
    (bot.parse_args, ["play", "--game", "g", "--seat", "-1"], f"--seat: -1 is out of range "
                                                              f"{U32}"),
    (bot.parse_args, ["play", "--game", "g", "--seed", "-1"], f"--seed: -1 is out of range "
                                                              f"{U64}"),
    (bot.parse_args, ["selfplay", "--games", "0"], "--games: 0 is out of range (from 1 to "
                                                   "1000000)"),
    (bot.parse_args, ["selfplay", "--players", "7"], "--players: 7 is out of range (from 0 to "
                                                     "6)"),
    (bot.parse_args, ["selfplay", "--concurrency", "0"], "--concurrency: 0 is out of range"),
    (bot.parse_args, ["selfplay", "--seed", "-1"], f"--seed: -1 is out of range {U64}"),
    (bot.parse_args, ["selfplay", "--progress-every", "-1"], "--progress-every: -1 is out of "
                                                             "range"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_a_number_out_of_range_is_one_line_naming_the_option_and_the_range(
        main: Callable[[list[str]], argparse.Namespace], argv: list[str], said: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("tapis", "tapis-bot")) and ": error: argument " in last, err
    assert said in last, err


def test_the_largest_values_make_a_request_the_contract_takes() -> None:
    """The upper bounds are the fields' own: a request built from them is sent, not refused by
    the protobuf runtime (War's points to win and each game's seats are its rules' own, at most
    10,000 and 2 to 6 for Bataille Corse: test_game_options.py)."""
    args = cli.parse_args(["play", "war", "--turn-time-ms", "4294967295", "--points",
                           "10000", "--seed", str(2**64 - 1), "--bot-speed", "60",
                           "--players", "2"])
    request = cli.create_request(args, 1)
    assert (request.turn_time_limit_ms, request.war.target_points, request.seed,
            request.bot_reaction_ms, request.seats) == (2**32 - 1, 10_000, 2**64 - 1,
                                                        60_000, 2)
    args = cli.parse_args(["create", "bataille-corse", "--players", str(options.MAX_PLAYERS),
                           "--people", str(options.MAX_PLAYERS)])
    assert cli.create_request(args, args.people).seats == options.MAX_PLAYERS


def test_the_range_is_said_in_french(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["--lang", "fr", "play", "--turn-time-ms", "-5"])
    i18n.use("en")
    assert "-5 est hors limites (de 0 à 4294967295)" in capsys.readouterr().err


def test_selfplay_seeds_stay_in_the_contracts_range() -> None:
    args = bot.parse_args(["selfplay", "--seed", str(2**64 - 1), "--games", "3"])
    seeds = [bot.game_seed(args.seed, index) for index in range(args.games)]
    assert all(0 <= seed <= options.UINT64_MAX for seed in seeds) and len(set(seeds)) == 3
    assert bot.game_seed(1, 2) == 1_000_005  # small seeds as before
