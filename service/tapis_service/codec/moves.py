"""A person's action, protobuf to the table's input: every SubmitAction converts one, so this
is a module of its own that mypyc compiles (``tools/compiled.py``); ``convert`` names it with
the rest of the conversions and stays Python (a test counts its ``listing`` calls by patching
it, which no compiled caller would see).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.errors import Reason, invalid

if TYPE_CHECKING:  # the codec reads a table's session; it runs nothing of tables/
    from tapis_service.tables.session import Session


def move_from_proto(session: Session, seat: int, action: pb.Action) -> tbl.Input:
    """The table input for a person's action."""
    which = action.WhichOneof("action")
    if which is None:
        raise invalid(Reason.INVALID_ACTION, "the action is empty")
    if which == "reclaim_seat":
        return tbl.Reclaim(seat)
    if which == "start_next_game":
        return tbl.NextGame(seat)
    if which != session.adapter.field:
        raise invalid(Reason.WRONG_GAME_KIND,
                      f"a {which} action was sent to a {session.adapter.field} game")
    return tbl.Act(seat, session.adapter.action_from_proto(getattr(action, which)))
