"""A person's action, protobuf to the table's input: every SubmitAction converts one, so this
is a module of its own that mypyc compiles (``tools/compiled.py``); ``convert`` names it with
the rest of the conversions and stays Python (a test counts its ``listing`` calls by patching
it, which no compiled caller would see).

An action is read once per kind of action, not once per request (``read_action``): its bytes
are a handful (War's ``reveal`` is the same four on every action), so what protobuf parses of
them, and the game's action the table's adapter makes of that, are remembered by those bytes.
Both are values (a parsed message nobody writes to, a frozen game action), the same whoever
sends them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.errors import Reason, invalid

if TYPE_CHECKING:  # the codec reads a table's session; it runs nothing of tables/
    from tapis_service.tables.session import Session

REMEMBERED_BYTES: Final = 64
"""An action of at most this many bytes is remembered (every action of the four games is)."""
MAX_REMEMBERED: Final = 1024
"""Actions remembered at most; beyond, the memory starts again (a client sending action after
different action gains nothing from it, and holds no more than this)."""


class ReadAction:
    """An ``Action`` as read: the field of its oneof that is set (None: none), the game's
    message it holds (None for ``reclaim_seat``, ``start_next_game`` or none), and the game's
    action a table's adapter made of it, once made."""

    __slots__ = ("game_action", "message", "which")

    def __init__(self, which: str | None, message: Any) -> None:
        self.which = which
        self.message = message
        self.game_action: Any = None

    @staticmethod
    def of(action: pb.Action) -> ReadAction:
        """The plain way: the action's message read."""
        which = action.WhichOneof("action")
        if which is None or which in ("reclaim_seat", "start_next_game"):
            return ReadAction(which, None)
        return ReadAction(which, getattr(action, which))


_REMEMBERED: Final[dict[bytes, ReadAction]] = {}


def read_action(data: bytes) -> ReadAction:
    """The ``Action`` serialized in ``data`` (protobuf's ``DecodeError`` if it is none),
    remembered by its bytes when they are few."""
    read = _REMEMBERED.get(data)
    if read is None:
        read = ReadAction.of(pb.Action.FromString(data))
        if len(data) <= REMEMBERED_BYTES:
            if len(_REMEMBERED) >= MAX_REMEMBERED:
                _REMEMBERED.clear()
            _REMEMBERED[data] = read
    return read


def move_from_read(session: Session, seat: int, action: ReadAction) -> tbl.Input:
    """The table input for a person's action (its game's action made by the table's adapter
    once per ``ReadAction``: the same adapter for every table of a game, a pure conversion)."""
    which = action.which
    if which is None:
        raise invalid(Reason.INVALID_ACTION, "the action is empty")
    if which == "reclaim_seat":
        return tbl.Reclaim(seat)
    if which == "start_next_game":
        return tbl.NextGame(seat)
    adapter = session.adapter
    if which != adapter.field:
        raise invalid(Reason.WRONG_GAME_KIND,
                      f"a {which} action was sent to a {adapter.field} game")
    game_action = action.game_action
    if game_action is None:
        game_action = action.game_action = adapter.action_from_proto(action.message)
    return tbl.Act(seat, game_action)


def move_from_proto(session: Session, seat: int, action: pb.Action) -> tbl.Input:
    """The table input for a person's action, from its message."""
    return move_from_read(session, seat, ReadAction.of(action))
