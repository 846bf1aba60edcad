"""The game registries (engine descriptors, service adapters) and the contract agree: the same
games, in the order of ``GameKind``, each with its field in every per-game oneof."""

from __future__ import annotations

from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import DESCRIPTORS
from tapis_service.codec.adapters import REGISTERED
from tests.support.games import GAME_ONEOFS, game_fields

RULES_DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_every_game_kind_has_one_descriptor_and_one_adapter_in_the_same_order() -> None:
    kinds = [value.number for value in pb.GameKind.DESCRIPTOR.values if value.number != 0]
    assert [adapter.proto_kind for adapter in REGISTERED] == kinds
    assert [adapter.kind for adapter in REGISTERED] == [game.kind for game in DESCRIPTORS]
    assert len({game.kind for game in DESCRIPTORS}) == len(DESCRIPTORS)


def test_every_per_game_oneof_has_exactly_one_field_per_game() -> None:
    fields = sorted(adapter.field for adapter in REGISTERED)
    for message, oneof in GAME_ONEOFS:
        assert sorted(game_fields(message, oneof)) == fields, f"{message.__name__}.{oneof}"


def test_short_options_are_valid_and_cross_the_wire_unchanged() -> None:
    for game, adapter in zip(DESCRIPTORS, REGISTERED, strict=True):
        game.rules.check_setup(GameSetup(game.rules.min_seats, 1, game.short_options))
        message = adapter.options_to_proto(game.short_options)
        assert adapter.options_from_proto(message) == game.short_options


def test_every_title_names_a_game_of_the_rules() -> None:
    headings = [line for line in RULES_DOC.read_text(encoding="utf-8").splitlines()
                if line.startswith("## ")]
    for game in DESCRIPTORS:
        assert any(f". {game.title} (" in heading for heading in headings), game.title


def test_the_contract_names_each_game_s_bot_strategies_as_the_engine_has_them() -> None:
    """``SeatConfig.bot_strategy``'s comment names, per game, the strategies its rules take, in
    their order (the first is the default): a backend reads them there."""
    proto = (Path(__file__).resolve().parents[2] / "protos" / "tapis" / "v1"
             / "game_service.proto").read_text(encoding="utf-8")
    block = proto[proto.index("message SeatConfig {"):proto.index("string bot_strategy = 2;")]
    comment = " ".join(line.strip().removeprefix("//").strip()
                       for line in block.splitlines() if line.strip().startswith("//"))
    named = "; ".join(game.title + " " + ", ".join(f'"{s}"' for s in game.rules.bot_strategies)
                      for game in DESCRIPTORS)
    assert named in comment
