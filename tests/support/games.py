"""The registered games as the generic tests see them: read from the registries, never listed."""

from __future__ import annotations

from google.protobuf.message import Message

from tapis.v1 import game_service_pb2 as pb
from tapis_engine.registry import BY_KIND, DESCRIPTORS
from tapis_service.codec.adapters import ADAPTERS

KINDS: tuple[str, ...] = tuple(game.kind for game in DESCRIPTORS)
"""Every game's engine kind, in the order of the contract's ``GameKind``."""

GAME_ONEOFS: tuple[tuple[type[Message], str], ...] = (
    (pb.CreateGameRequest, "options"),
    (pb.GameSettings, "options"),
    (pb.Action, "action"),
    (pb.GameView, "game"),
    (pb.Event, "body"),
)
"""The contract's oneofs with one field per game (besides the fields every game shares)."""

_SHARED_FILE = pb.DESCRIPTOR.name


def game_fields(message: type[Message], oneof: str) -> list[str]:
    """The fields of ``message.oneof`` whose type a game's own ``.proto`` file declares."""
    fields = message.DESCRIPTOR.oneofs_by_name[oneof].fields
    return [field.name for field in fields
            if field.message_type is not None and field.message_type.file.name != _SHARED_FILE]


def proto_kind(kind: str) -> pb.GameKind.ValueType:
    """The contract's ``GameKind`` of the engine's ``kind``."""
    return ADAPTERS[kind].proto_kind  # type: ignore[return-value]


def seat_counts(kind: str) -> tuple[int, ...]:
    """The fewest seats, the most, and one in between when there is room."""
    rules = BY_KIND[kind].rules
    return tuple(sorted({rules.min_seats, (rules.min_seats + rules.max_seats) // 2,
                         rules.max_seats}))


def short_options(kind: str) -> dict[str, Message]:
    """The game's short options as ``CreateGameRequest`` keyword arguments."""
    adapter = ADAPTERS[kind]
    return {adapter.field: adapter.options_to_proto(BY_KIND[kind].short_options)}
