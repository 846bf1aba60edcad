"""A game's own options on `tapis play` and `tapis create`: Basra's variant, two-card jack basra
and target (``--points``), Bataille Corse's combinations switched off (``--no-combination``) and
flip cap (``--flip-cap``), La bataille des boutons' rounds (``--rounds``), War's target
(``--points``), checked before any call and sent in the request's options of the game; and the
seats each game takes (``--players``, ``--people``), checked against the game's own counts."""

from __future__ import annotations

import pytest

from tapis.v1 import basra_pb2
from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients import cli, games, i18n
from tapis_clients.game import ClientGame
from tapis_clients.games import corse, war
from tapis_engine import war as war_rules
from tapis_engine.corse import state as corse_rules
from tapis_engine.registry import GAMES as RULES
from tests.support.server import ServerFactory


def test_the_bounds_are_the_engines() -> None:
    """The flip cap's and War's target's bounds and defaults, as the server checks them."""
    assert (corse.MAX_FLIP_CAP, corse.DEFAULT_FLIP_CAP) == (corse_rules.MAX_FLIP_CAP,
                                                            corse_rules.DEFAULT_FLIP_CAP)
    assert war.MAX_TARGET == 10_000 and war_rules.DEFAULT_TARGET == 50


def test_each_game_seats_what_its_engine_seats() -> None:
    """Each game's seat counts, declared in its ClientGame, are its rules' (check_setup's)."""
    assert {game.commands[0]: game.seats for game in games.GAMES} == {
        kind: (rules.min_seats, rules.max_seats) for kind, rules in RULES.items()}


@pytest.mark.parametrize("game", games.GAMES, ids=lambda game: game.commands[0])
def test_every_seat_count_of_a_game_goes_in_the_request(game: ClientGame) -> None:
    """``--players N`` for each N the game seats (with one person, or all of them people);
    not given: the fewest it seats."""
    low, high = game.seats
    for count in range(low, high + 1):
        args = cli.parse_args(["play", game.commands[0], "--players", str(count)])
        assert cli.create_request(args, 1).seats == count
        args = cli.parse_args(["create", game.commands[0], "--people", str(count)])
        assert cli.create_request(args, args.people).seats == count
    assert cli.create_request(cli.parse_args(["play", game.commands[0]]), 1).seats == low


def test_every_variant_of_the_contract_is_a_choice_by_its_lower_case_name() -> None:
    for variant in basra_pb2.BasraVariant.values():
        if variant == basra_pb2.BASRA_VARIANT_UNSPECIFIED:
            continue
        name = basra_pb2.BasraVariant.Name(variant).removeprefix("BASRA_VARIANT_").lower()
        args = cli.parse_args(["play", "basra", "--variant", name])
        assert cli.create_request(args, 1).basra.variant == variant


@pytest.mark.parametrize(("argv", "options"), [
    ([], (basra_pb2.BASRA_VARIANT_UNSPECIFIED, False, 0)),
    (["--variant", "lebanese", "--points", "151"], (basra_pb2.BASRA_VARIANT_LEBANESE, False, 151)),
    (["--variant", "iraqi", "--two-card-jack"], (basra_pb2.BASRA_VARIANT_IRAQI, True, 0)),
    (["--two-card-jack"], (basra_pb2.BASRA_VARIANT_UNSPECIFIED, True, 0)),
])
def test_basra_options_go_in_the_request(
        argv: list[str], options: tuple[int, bool, int]) -> None:
    for command in ("play", "create"):
        request = cli.create_request(cli.parse_args([command, "basra", *argv]), 1)
        assert request.WhichOneof("options") == "basra"
        basra = request.basra
        assert (basra.variant, basra.two_card_jack_basra, basra.target) == options


def test_every_combination_of_the_contract_is_a_choice_by_its_lower_case_name() -> None:
    for combination in corse_pb2.BatailleCorseCombination.values():
        if combination == corse_pb2.BATAILLE_CORSE_COMBINATION_UNSPECIFIED:
            continue
        name = corse_pb2.BatailleCorseCombination.Name(combination).removeprefix(
            "BATAILLE_CORSE_COMBINATION_").lower()
        args = cli.parse_args(["play", "corse", "--no-combination", name])
        assert list(cli.create_request(args, 1).bataille_corse.disabled_combinations) == [
            combination]


@pytest.mark.parametrize(("argv", "disabled"), [
    ([], None),
    (["--no-combination", "big_mac", "--no-combination", "ten", "--no-combination", "ten"],
     [corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC, corse_pb2.BATAILLE_CORSE_COMBINATION_TEN]),
])
def test_combinations_switched_off_go_in_the_request(
        argv: list[str], disabled: list[int] | None) -> None:
    """None given: no options (the server's six); each named once, however often it is said."""
    for command in ("play", "create"):
        request = cli.create_request(cli.parse_args([command, "bataille-corse", *argv]), 1)
        if disabled is None:
            assert request.WhichOneof("options") is None
        else:
            assert list(request.bataille_corse.disabled_combinations) == disabled


@pytest.mark.parametrize(("argv", "cap"), [
    ([], None), (["--flip-cap", "1"], 1), (["--flip-cap", "300"], 300),
    (["--flip-cap", "1000000"], 1_000_000),
])
def test_the_flip_cap_goes_in_the_request(argv: list[str], cap: int | None) -> None:
    """None given: no options (the server's 10,000)."""
    for command in ("play", "create"):
        request = cli.create_request(cli.parse_args([command, "bataille-corse", *argv]), 1)
        if cap is None:
            assert request.WhichOneof("options") is None
        else:
            assert request.bataille_corse.flip_cap == cap


def test_the_flip_cap_goes_with_combinations_switched_off() -> None:
    request = cli.create_request(cli.parse_args(
        ["play", "corse", "--no-combination", "seven", "--flip-cap", "500"]), 1)
    assert (list(request.bataille_corse.disabled_combinations),
            request.bataille_corse.flip_cap) == ([corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN], 500)


@pytest.mark.parametrize(("argv", "target"), [
    (["war"], 0), (["war", "--points", "1"], 1), (["war", "--points", "10000"], 10_000),
    (["bataille", "--points", "151"], 151),
])
def test_wars_target_goes_in_the_request(argv: list[str], target: int) -> None:
    """Within the engine's 1 to 10,000 (0, not given: the server's 50); Basra's two targets
    are no limit of War's."""
    for command in ("play", "create"):
        request = cli.create_request(cli.parse_args([command, *argv]), 1)
        assert request.war.target_points == target


@pytest.mark.parametrize(("argv", "rounds"), [([], None), (["--rounds", "1"], 1),
                                              (["--rounds", "100"], 100)])
def test_the_rounds_go_in_the_request(argv: list[str], rounds: int | None) -> None:
    for command in ("play", "create"):
        request = cli.create_request(cli.parse_args([command, "boutons", *argv]), 1)
        if rounds is None:
            assert request.WhichOneof("options") is None
        else:
            assert request.boutons.rounds == rounds


@pytest.mark.parametrize(("argv", "said"), [
    (["play", "basra", "--variant", "lebanese", "--two-card-jack"],
     "--two-card-jack cannot go with --variant lebanese"),
    (["play", "basra", "--points", "120"], "Basra is played to 101 or 151 points"),
    (["play", "war", "--variant", "iraqi"], "--variant is for Basra only"),
    (["create", "boutons", "--two-card-jack"], "--two-card-jack is for Basra only"),
    (["play", "war", "--no-combination", "ten"], "--no-combination is for Bataille Corse only"),
    (["play", "corse", "--rounds", "3"], "--rounds is for La bataille des boutons only"),
    (["play", "boutons", "--rounds", "101"],
     "argument --rounds: 101 is out of range (from 1 to 100)"),
    (["play", "boutons", "--rounds", "0"], "argument --rounds: 0 is out of range (from 1 to 100)"),
    (["play", "corse", "--flip-cap", "0"],
     "argument --flip-cap: 0 is out of range (from 1 to 1000000)"),
    (["create", "bataille-corse", "--flip-cap", "1000001"],
     "argument --flip-cap: 1000001 is out of range (from 1 to 1000000)"),
    (["play", "corse", "--flip-cap", "-3"],
     "argument --flip-cap: -3 is out of range (from 1 to 1000000)"),
    (["play", "war", "--flip-cap", "300"], "--flip-cap is for Bataille Corse only"),
    (["create", "basra", "--flip-cap", "300"], "--flip-cap is for Bataille Corse only"),
    (["play", "war", "--points", "10001"], "Bataille is played to at most 10000 points"),
    (["create", "bataille", "--points", "4294967295"],
     "Bataille is played to at most 10000 points"),
    (["play", "basra", "--points", "10000"], "Basra is played to 101 or 151 points"),
    (["--lang", "fr", "play", "war", "--points", "20000"],
     "la bataille se joue en 10000 points au plus"),
    (["--lang", "fr", "play", "corse", "--flip-cap", "0"],
     "argument --flip-cap : 0 est hors limites (de 1 à 1000000)"),
    (["play", "corse", "--no-combination", "triple"], "argument --no-combination: invalid choice: "
     "'triple' (choose from 'double', 'sandwich', 'big_mac', 'suite', 'ten', 'seven')"),
    (["--lang", "fr", "play", "basra", "--variant", "lebanese", "--two-card-jack"],
     "--two-card-jack ne va pas avec --variant lebanese"),
    (["play", "war", "--players", "6"], "--players 6: Bataille is for exactly 2 players"),
    (["play", "bataille", "--players", "1"], "--players 1: Bataille is for exactly 2 players"),
    (["create", "war", "--people", "3"], "--people 3: Bataille is for exactly 2 players"),
    (["create", "war", "--players", "1", "--people", "1"],
     "--players 1: Bataille is for exactly 2 players"),
    (["play", "basra", "--players", "5"], "--players 5: Basra is for 2 to 4 players"),
    (["create", "boutons", "--players", "3", "--people", "5"],
     "--people 5: La bataille des boutons is for 2 to 4 players"),
    (["play", "corse", "--players", "1"], "--players 1: Bataille Corse is for 2 to 6 players"),
    (["--lang", "fr", "play", "war", "--players", "4"],
     "--players 4 : Bataille se joue à 2 joueurs exactement"),
    (["--lang", "fr", "create", "basra", "--people", "6"],
     "--people 6 : Basra se joue de 2 à 4 joueurs"),
    (["play", "corse", "--points", "50"], "--points is not an option of Bataille Corse"),
    (["create", "bataille-corse", "--points", "1"], "--points is not an option of Bataille Corse"),
    (["play", "boutons", "--points", "10"],
     "--points is not an option of La bataille des boutons"),
    (["--lang", "fr", "create", "boutons", "--points", "10"],
     "--points n'est pas une option de La bataille des boutons"),
    (["create", "war", "--people", "2", "--bot", "basic"],
     "--bot: the table has no computer player"),
    (["create", "basra", "--players", "3", "--people", "3", "--bot", "random"],
     "--bot: the table has no computer player"),
    (["--lang", "fr", "create", "corse", "--people", "4", "--bot", "reflex"],
     "--bot : la table n'a pas de joueur ordinateur"),
])
def test_options_the_rules_refuse_are_one_line_before_any_call(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The subcommand's parser says it, as argparse says a number out of range: its usage line
    and its name (``tapis play: error: ...``), not the top-level ``tapis``'s."""
    try:
        with pytest.raises(SystemExit) as stopped:
            cli.parse_args(argv)
    finally:
        i18n.use("en")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f": {said}"), err
    command = f"tapis {next(arg for arg in argv if arg in ('play', 'create'))}"
    assert f"{command} [-h]" in err.splitlines()[0], err
    assert err.strip().splitlines()[-1].startswith(f"{command}"), err


async def test_the_server_seats_a_table_of_the_options_asked(
        make_server: ServerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    """`tapis create basra --variant iraqi --two-card-jack --points 151`: the server takes the
    request, and its view says those rules."""
    h = await make_server()
    argv = ["create", "basra", "--target", f"127.0.0.1:{h.running.port}", "--variant", "iraqi",
            "--two-card-jack", "--points", "151"]
    assert await cli.run(cli.parse_args(argv)) == 0
    game_id = capsys.readouterr().out.split()[-1]
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert (view.settings.basra.variant, view.settings.basra.two_card_jack_basra,
            view.settings.basra.target) == (basra_pb2.BASRA_VARIANT_IRAQI, True, 151)


async def test_the_server_seats_corse_and_boutons_tables_of_the_options_asked(
        make_server: ServerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    """`tapis create corse --no-combination suite --no-combination seven` and `tapis create
    boutons --rounds 3`: the server takes both requests, and its settings say those rules."""
    h = await make_server()
    target = ["--target", f"127.0.0.1:{h.running.port}"]
    argv = ["create", "corse", *target, "--no-combination", "suite", "--no-combination", "seven"]
    assert await cli.run(cli.parse_args(argv)) == 0
    game_id = capsys.readouterr().out.split()[-1]
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert set(view.settings.bataille_corse.disabled_combinations) == {
        corse_pb2.BATAILLE_CORSE_COMBINATION_SUITE, corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN}
    assert await cli.run(cli.parse_args(["create", "boutons", *target, "--rounds", "3"])) == 0
    game_id = capsys.readouterr().out.split()[-1]
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert view.settings.boutons.rounds == 3


async def test_the_server_seats_a_corse_table_of_the_flip_cap_asked(
        make_server: ServerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    """`tapis create corse --flip-cap 40`: the server takes the request, and its view says that
    cap (the board's "flips 0 of 40"); the engine's largest, and War's largest target, are
    taken too."""
    h = await make_server()
    target = ["--target", f"127.0.0.1:{h.running.port}"]

    async def created(argv: list[str]) -> pb.GameView:
        """The table made, once two people sat down (its first game dealt)."""
        assert await cli.run(cli.parse_args(["create", *argv, *target])) == 0
        game_id = capsys.readouterr().out.split()[-1]
        for name in ("ana", "bo"):
            await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name=name))
        return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game

    view = await created(["corse", "--flip-cap", "40", "--no-combination", "double"])
    assert (view.settings.bataille_corse.flip_cap, view.bataille_corse.flip_cap) == (40, 40)
    assert list(view.settings.bataille_corse.disabled_combinations) == [
        corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE]
    view = await created(["corse", "--flip-cap", "1000000"])
    assert view.bataille_corse.flip_cap == 1_000_000
    view = await created(["war", "--points", "10000"])
    assert view.war.target_points == 10_000


@pytest.mark.parametrize(("argv", "said"), [
    (["play", "corse", "--flip-cap", "0"], "--flip-cap: 0 is out of range (from 1 to 1000000)"),
    (["create", "corse", "--flip-cap", "1000001"],
     "--flip-cap: 1000001 is out of range (from 1 to 1000000)"),
    (["play", "war", "--points", "10001"], "Bataille is played to at most 10000 points"),
    (["create", "war", "--points", "10001"], "Bataille is played to at most 10000 points"),
    (["create", "corse", "--points", "50"], "--points is not an option of Bataille Corse"),
    (["play", "war", "--players", "6"], "--players 6: Bataille is for exactly 2 players"),
    (["create", "basra", "--people", "5"], "--people 5: Basra is for 2 to 4 players"),
])
async def test_a_value_out_of_range_makes_no_call(
        argv: list[str], said: str, make_server: ServerFactory,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`tapis` itself, against a real server: exit status 2, the one line, and no table made."""
    h = await make_server()
    with pytest.raises(SystemExit) as stopped:
        cli.main([*argv, "--target", f"127.0.0.1:{h.running.port}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith(said), err
    listed = await h.stub.ListGames(pb.ListGamesRequest(include_finished=True))
    assert list(listed.games) == []
