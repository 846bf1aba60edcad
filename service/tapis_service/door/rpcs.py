"""The RPCs of tapis.v1.GameService, declared once: every transport and every node derives its
handlers from ``RPCS`` at start (the gRPC servicer, the WebSocket's dispatch, a cluster node's
gateway, relay and tunnel), so adding a method is one row here (and its ``GameApi`` method).

Each row says what the method is (its request and response messages, whether it streams), how
it is served (the ``GameApi`` method, whether the API answers bytes serialized already, whether
it writes), where a cluster serves it (``Routing``), who may call it (``Access``), and its
**tunnel code**: the fixed number a relayed call of it carries between nodes. A code is given
once and never changed or reused (``tests/contract/test_rpcs.py`` pins them): during a rolling
restart, old and new nodes agree on every method both know, and a node meeting a code it does
not know refuses that call only (``cluster.tunnel``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from google.protobuf.message import Message

from tapis.v1 import game_service_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["GameService"].full_name


class Routing(enum.Enum):
    """Where a cluster serves a method (a single node serves everything itself)."""

    TABLE = "table"
    """The table named by the request's field 1 (``game_id``): served by its owner, relayed
    there from any other node."""
    PLACE = "place"
    """A new table, placed on the node that receives the call (a retry, with the same
    ``request_id``, finds the table wherever it is)."""
    EVERY_NODE = "every node"
    """Every node's part, merged by the node that receives the call (ListGames)."""
    HERE = "here"
    """Not a table's: any node serves it from the shared database (a backend's results)."""


class Access(enum.Enum):
    """Who may call a method (docs/integration.md; ``tests/trust/test_access.py`` calls every
    method as nobody, as another backend and as the owner, and checks this column)."""

    ANYONE = "anyone"
    """Any client; a seat token shows that seat's own view."""
    PLAYER = "player"
    """Any client (a player taking a seat); keyless callers share the server's budgets."""
    SEAT = "seat"
    """A seat's holder: the seat token is required."""
    BACKEND = "backend"
    """A backend's API key (in open mode, anyone, for CreateGame)."""
    TABLE_OWNER = "table owner"
    """The backend owning the table (its API key)."""


@dataclass(frozen=True, slots=True)
class Rpc:
    """One method of the service."""

    name: str
    """As in the contract (``GameService.<name>``)."""
    request: type[Message]
    response: type[Message]
    api: str
    """The ``GameApi`` method serving it: ``(request, caller)`` for a unary method, ``(request,
    caller, end)`` for a stream."""
    code: int
    """Its tunnel code: fixed, never reused (1 to ``MAX_CODE``)."""
    routing: Routing
    access: Access
    writes: bool = False
    """It changes a table: an answer lost on the way leaves it in doubt (COMMIT_UNKNOWN)."""
    streams: bool = False
    """A server stream (any number of responses)."""
    serialized: bool = False
    """The ``GameApi`` answers bytes serialized already (sent as they are)."""

    @property
    def path(self) -> str:
        """The gRPC method's full name (``/tapis.v1.GameService/GetGame``)."""
        return f"/{SERVICE}/{self.name}"


MAX_CODE = 0xEF
"""The highest method code; the codes above are the tunnel's own frames (``cluster.frames``)."""

RPCS: tuple[Rpc, ...] = (
    Rpc("CreateGame", pb.CreateGameRequest, pb.CreateGameResponse, "create_game", 1,
        Routing.PLACE, Access.BACKEND, writes=True),
    Rpc("JoinGame", pb.JoinGameRequest, pb.JoinGameResponse, "join_game", 2,
        Routing.TABLE, Access.PLAYER, writes=True),
    Rpc("GetGame", pb.GetGameRequest, pb.GetGameResponse, "get_game", 3,
        Routing.TABLE, Access.ANYONE),
    Rpc("SubmitAction", pb.SubmitActionRequest, pb.SubmitActionResponse, "submit_action", 4,
        Routing.TABLE, Access.SEAT, writes=True, serialized=True),
    Rpc("StreamEvents", pb.StreamEventsRequest, pb.StreamEventsResponse, "stream_events", 5,
        Routing.TABLE, Access.ANYONE, streams=True, serialized=True),
    Rpc("ListGames", pb.ListGamesRequest, pb.ListGamesResponse, "list_games", 6,
        Routing.EVERY_NODE, Access.ANYONE),
    Rpc("CreateSpectatorToken", pb.CreateSpectatorTokenRequest,
        pb.CreateSpectatorTokenResponse, "create_spectator_token", 7,
        Routing.TABLE, Access.TABLE_OWNER),
    Rpc("WatchResults", pb.WatchResultsRequest, pb.WatchResultsResponse, "watch_results", 8,
        Routing.HERE, Access.BACKEND, streams=True),
    Rpc("AckResults", pb.AckResultsRequest, pb.AckResultsResponse, "ack_results", 9,
        Routing.HERE, Access.BACKEND),
    Rpc("EndTable", pb.EndTableRequest, pb.EndTableResponse, "end_table", 10,
        Routing.TABLE, Access.TABLE_OWNER, writes=True),
    Rpc("ReplaceSeat", pb.ReplaceSeatRequest, pb.ReplaceSeatResponse, "replace_seat", 11,
        Routing.TABLE, Access.TABLE_OWNER, writes=True),
    Rpc("RotateSpectatorToken", pb.RotateSpectatorTokenRequest,
        pb.RotateSpectatorTokenResponse, "rotate_spectator_token", 12,
        Routing.TABLE, Access.TABLE_OWNER, writes=True),
)
"""Every method of tapis.v1.GameService (``tests/contract/test_rpcs.py``: the same as the
contract's)."""


BY_NAME: Mapping[str, Rpc] = {rpc.name: rpc for rpc in RPCS}
BY_CODE: Mapping[int, Rpc] = {rpc.code: rpc for rpc in RPCS}
BY_REQUEST: Mapping[str, Rpc] = {rpc.request.DESCRIPTOR.full_name: rpc for rpc in RPCS}
"""By the request message's full name."""


class Route(NamedTuple):
    """How a node serves one method, whatever the transport: the function, and whether it
    takes the request's bytes (a cluster node routes them unparsed) or its message."""

    rpc: Rpc
    serve: Callable[..., Any]
    """``(request, caller)``, or a stream's ``(request, caller, end)``."""
    raw: bool = False


def local_routes(api: Any, table: tuple[Rpc, ...] = RPCS) -> dict[str, Route]:
    """A single node's routes: every method of ``table`` served by ``api`` (a ``GameApi``),
    its methods bound once."""
    return {rpc.name: Route(rpc, getattr(api, rpc.api)) for rpc in table}
