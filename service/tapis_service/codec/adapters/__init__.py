"""Per-game converters between the tapis.v1 protobuf messages and the engine's domain types.

Each game has one adapter module, registered below (one line per game); ``ADAPTERS`` maps the
engine's kind to it. ``docs/adding-a-game.md`` lists everything a new game touches.
"""

from __future__ import annotations

from typing import Any, Protocol

from google.protobuf.message import Message

from tapis_service.codec.adapters.basra import BasraAdapter
from tapis_service.codec.adapters.boutons import BoutonsAdapter
from tapis_service.codec.adapters.corse import CorseAdapter
from tapis_service.codec.adapters.war import WarAdapter


class GameAdapter(Protocol):
    """Translates one game's protobuf messages to and from its engine types."""

    kind: str
    """The engine's kind (``"war"``)."""
    proto_kind: int
    """The ``tapis.v1.GameKind`` value."""
    field: str
    """The oneof field name used for this game everywhere (options, action, event, view)."""

    def options_from_proto(self, message: Message | None) -> Any:
        """Engine options from the request (None: defaults); raise RuleError when invalid."""
        ...

    def options_to_proto(self, options: Any) -> Message:
        ...

    def action_from_proto(self, message: Message) -> Any:
        """The engine action; raise RuleError(INVALID_ACTION) when malformed."""
        ...

    def action_to_proto(self, action: Any) -> Message:
        ...

    def event_to_proto(self, event: Any) -> Message:
        """An (already redacted) engine event as the game's Event message."""
        ...

    def event_wire(self, event: Any) -> bytes:
        """``event_to_proto(event).SerializeToString()`` (a game may write it by hand: this
        runs for every event)."""
        ...

    def view_to_proto(self, view: Any) -> Message:
        ...


REGISTERED: tuple[GameAdapter, ...] = (
    WarAdapter(),
    CorseAdapter(),
    BoutonsAdapter(),
    BasraAdapter(),
)
"""Every game's adapter, in the order of the contract's ``GameKind``."""
ADAPTERS: dict[str, GameAdapter] = {adapter.kind: adapter for adapter in REGISTERED}
BY_PROTO_KIND: dict[int, GameAdapter] = {a.proto_kind: a for a in REGISTERED}
