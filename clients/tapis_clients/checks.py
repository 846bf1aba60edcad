"""The checks of a game's own options made before any call, in words (None: nothing wrong), for
the parser of the subcommand to say as argparse says its own errors (one line, exit status 2):
`tapis play` and `tapis create`'s options and seats, `tapis-bot`'s strategy and selfplay's
seats. The counts are each game's ``ClientGame.seats``; no other count is held here."""

from __future__ import annotations

import argparse

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games, strategies
from tapis_clients.game import ClientGame
from tapis_clients.i18n import _


def seats_asked(args: argparse.Namespace, game: ClientGame, people: int) -> int:
    """The seats of the table asked for: ``--players`` (not given: the fewest the game seats),
    or more when there are more people."""
    return max(args.players or game.seats[0], people)


def seat_count_problem(game: ClientGame, option: str, count: int) -> str | None:
    """``option``'s ``count`` of seats, when ``game``'s rules seat other counts, in words
    naming the option; None: the game seats that many."""
    low, high = game.seats
    if low <= count <= high:
        return None
    if low == high:
        return _("{option} {count}: {game} is for exactly {seats} players").format(
            option=option, count=count, game=game.title, seats=low)
    return _("{option} {count}: {game} is for {low} to {high} players").format(
        option=option, count=count, game=game.title, low=low, high=high)


def game_options_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the games' own options of ``play`` or ``create`` (one of another
    game, ``--points`` for a game without a target, seats the game does not take, a combination
    the rules refuse, ``--bot`` for a table without a computer seat)."""
    chosen = games.by_command(args.kind)
    for game in games.GAMES:
        if game is chosen or game.add_options is None:
            continue
        for action in game.add_options(argparse.ArgumentParser(add_help=False)):
            if getattr(args, action.dest) != action.default:
                return _("{option} is for {game} only").format(
                    option=action.option_strings[0], game=game.title)
    if args.points and chosen.set_points is None:  # shared, but only by games with a target
        return _("{option} is not an option of {game}").format(option="--points",
                                                                game=chosen.title)
    people = args.people if args.command == "create" else 1  # `play`: the one who plays
    players = args.players or chosen.seats[0]
    seats_problem = _seats_problem(chosen, people, players)
    if seats_problem:
        return seats_problem
    if args.bot and people >= players:  # every seat a person's
        return _("{option}: the table has no computer player").format(option="--bot")
    if chosen.set_options is not None:
        try:
            chosen.set_options(pb.CreateGameRequest(), args)
        except ValueError as error:
            return str(error)
    return None


def _seats_problem(game: ClientGame, people: int, players: int) -> str | None:
    """The seats asked for (``--players``, or ``--people`` when that makes more), when the
    game's rules seat other counts."""
    if people > players:
        return seat_count_problem(game, "--people", people)
    return seat_count_problem(game, "--players", players)


def bot_options_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with `tapis-bot`'s options: a ``--strategy`` that does not load (before a
    seat is taken), selfplay's ``--players`` (0: the game's fewest) the game does not seat."""
    if args.strategy:
        try:
            strategies.load(args.strategy)
        except ValueError as error:
            return f"--strategy: {error}"
    if args.command != "selfplay":
        return None
    game = games.by_command(args.kind)
    return seat_count_problem(game, "--players", args.players or game.seats[0])
