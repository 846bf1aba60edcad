"""A game's own options on `tapis play` and `tapis create`: Basra's variant, two-card jack basra
and target (``--points``), checked before any call and sent in ``CreateGameRequest.basra``."""

from __future__ import annotations

import pytest

from tapis.v1 import basra_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_clients import cli, i18n
from tests.support.server import ServerFactory


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


@pytest.mark.parametrize(("argv", "said"), [
    (["play", "basra", "--variant", "lebanese", "--two-card-jack"],
     "--two-card-jack cannot go with --variant lebanese"),
    (["play", "basra", "--points", "120"], "Basra is played to 101 or 151 points"),
    (["play", "war", "--variant", "iraqi"], "--variant is for Basra only"),
    (["create", "boutons", "--two-card-jack"], "--two-card-jack is for Basra only"),
    (["--lang", "fr", "play", "basra", "--variant", "lebanese", "--two-card-jack"],
     "--two-card-jack ne va pas avec --variant lebanese"),
])
def test_options_the_rules_refuse_are_one_line_before_any_call(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        with pytest.raises(SystemExit) as stopped:
            cli.parse_args(argv)
    finally:
        i18n.use("en")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f": {said}"), err


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
