"""A ListGames page: its size and where it starts, checked (the same on one node and across a
cluster, whose page token is a single node's too)."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.errors import invalid_argument
from tapis_service.tables import lobby

MAX_PAGE = 1000
"""The most lines a ListGames page may ask for."""


def page_size(request: pb.ListGamesRequest) -> int:
    """The lines of a ListGames page, checked."""
    size = request.page_size or 100
    if size > MAX_PAGE:
        raise invalid_argument("INVALID_PAGE_SIZE", f"page_size is at most {MAX_PAGE}")
    return size


def page_cursor(request: pb.ListGamesRequest) -> lobby.Cursor:
    """Where a ListGames page starts (its ``page_token``, checked): a position in the order
    every node lists in, so a cluster's page token is a single node's too."""
    try:
        return lobby.cursor_of(request.page_token)
    except (ValueError, UnicodeDecodeError) as error:
        raise invalid_argument("INVALID_PAGE_TOKEN", "page_token is not valid") from error
