"""ListGames on a cluster: every live node's tables, this node's and the others' (asked
through the tunnel), in one list paged as a single node pages its own; tables of dead or
departed owners that the sweep has not reached yet are taken over first, so the list has them.
The nodes are asked at once; a node that does not answer within ``NODE_TIMEOUT_S`` (or the
client's deadline) makes the answer ``partial``, with its address in ``missing_nodes``. So does
every owner of a table that no node answering listed — a dead node whose tables are not all
taken over yet, whether or not its membership expired (``Directory.unlisted_owners``, asked
before the nodes and again after, with those that answered), and every node taking tables over
while it answers (``Locator.moving``: a table it owns in the database may not be loaded yet):
an answer is complete only when every table of the cluster had a node to list it.

A page costs a page per node: every node lists in the same order (by creation time, then id;
the quarantined tables after the others, by id: lobby.py), so the client's ``page_token`` names
a position in every node's list. Each node is asked for one page from there, the answers are
merged by that order, and the page's last line names the next position.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_service.cluster import tunnel
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.locator import DATABASE_ERRORS, Locator, database_away
from tapis_service.cluster.relay import Tunnels
from tapis_service.codec import convert
from tapis_service.door.caller import Caller, deadline_in
from tapis_service.door.rpcs import BY_NAME
from tapis_service.game_api import GameApi
from tapis_service.observe import logrepeat
from tapis_service.observe.errors import ServiceError
from tapis_service.tables import lobby
from tapis_service.tables.paging import page_cursor, page_size

log = structlog.get_logger("tapis.cluster")

SWEEP_EVERY_S = 1.0
LIST_ADOPTS = 200
"""Orphan tables a ListGames takes over before listing, at most (the sweep takes the rest)."""
NODE_TIMEOUT_S = 5.0
"""How long a node's list is waited for: one that does not answer has no tables listed."""
LIST = BY_NAME["ListGames"].code


class Listing:
    """ListGames over the whole cluster."""

    def __init__(self, api: GameApi, directory: Directory, locator: Locator,
                 tunnels: Tunnels, node_id: str) -> None:
        self.api = api
        self.directory = directory
        self.locator = locator
        self.tunnels = tunnels
        self.node_id = node_id
        self._orphans_asked: dict[bool, float] = {}
        """When ListGames last asked the database for orphans (without / with finished)."""

    async def list_games(self, request: pb.ListGamesRequest,
                         caller: Caller) -> pb.ListGamesResponse:
        size = page_size(request)
        page_cursor(request)  # checked here: a node refusing it would pass for a missing one
        convert.listed_kind(request.kind)  # likewise: an unknown kind is refused, not relayed
        try:
            if not self.locator.leaving:
                await self._adopt_orphans(request.include_finished)
            members = await self.directory.live_members()
            if self.node_id not in members:  # our membership lapsed: our tables still count
                members[self.node_id] = ""
            # a dead node's tables not taken over yet: missing, whatever ``members`` says
            missing = await self.directory.unlisted_owners(list(members),
                                                           request.include_finished)
        except DATABASE_ERRORS as error:
            raise database_away() from error
        await self.locator.confirm()
        ordered = sorted(members)
        ask = pb.ListGamesRequest(kind=request.kind, include_finished=request.include_finished,
                                  page_size=size, page_token=request.page_token)
        pages = await asyncio.gather(*(self._list_node(node_id, members[node_id], ask, caller)
                                       for node_id in ordered))
        answered = []
        for node_id, page in zip(ordered, pages, strict=True):
            if page is None or page.partial:  # it did not answer, or is taking tables over
                missing.append(members[node_id] or self.directory.address)
            if page is not None:
                answered.append(node_id)
        try:  # and tables taken over by a node after it answered (from a node that did not)
            unlisted = await self.directory.unlisted_owners(answered,
                                                            request.include_finished)
        except DATABASE_ERRORS as error:
            raise database_away() from error
        missing = sorted(set(missing) | set(unlisted))
        merged: dict[str, pb.GameListing] = {}  # a table moving may be listed by two nodes
        for line in sorted((line for page in pages if page is not None for line in page.games),
                           key=position):
            merged.setdefault(line.game_id, line)
        games = list(merged.values())[:size]  # each among its node's first ``size``: exact
        more = len(merged) > size or any(page is not None and page.next_page_token
                                         for page in pages)
        return pb.ListGamesResponse(games=games,
                                    next_page_token=token_after(games[-1]) if more else "",
                                    partial=bool(missing), missing_nodes=missing)

    async def _adopt_orphans(self, include_finished: bool) -> None:
        """Take over (up to ``LIST_ADOPTS``) the tables of dead or departed owners (the
        database is asked at most once per sweep period, however often clients list)."""
        now = time.monotonic()
        if now - self._orphans_asked.get(include_finished, -SWEEP_EVERY_S) < SWEEP_EVERY_S:
            return
        self._orphans_asked[include_finished] = now
        for game_id, listing in await self.directory.orphans(include_finished, LIST_ADOPTS):
            try:
                if listing is None or not await self.locator.adopt_resting(game_id, listing):
                    await self.locator.route(game_id, False)
            except ServiceError as refused:
                if refused.reason == "STORE_UNAVAILABLE":
                    raise
                continue  # moved meanwhile (listed by its node), or quarantined
            except Exception as error:  # its records are damaged (the host quarantines it)
                logrepeat.limited(log.warning, "adopt_failed", game=game_id,
                                  error=str(error)[:200])

    async def _list_node(self, node_id: str, address: str, ask: pb.ListGamesRequest,
                         caller: Caller) -> pb.ListGamesResponse | None:
        """One node's page from the client's position; None when it does not answer it."""
        if node_id == self.node_id:
            if self.locator.leaving:
                return pb.ListGamesResponse()
            return partial_while_moving(self.locator, await self.api.list_games(ask, caller))
        left = caller.time_remaining()
        wait_s = NODE_TIMEOUT_S if left is None else min(left, NODE_TIMEOUT_S)
        try:
            async with asyncio.timeout(wait_s):
                raw = await self.tunnels.to(address).call(
                    LIST, caller.relayed()._replace(deadline=deadline_in(wait_s)),
                    ask.SerializeToString())
        except (ServiceError, tunnel.OwnerUnreachable, TimeoutError):
            return None
        return pb.ListGamesResponse.FromString(raw)


def partial_while_moving(locator: Locator, page: pb.ListGamesResponse) -> pb.ListGamesResponse:
    """A node's own page is partial while it takes tables over: one it owns in the database
    may not be loaded (listed) yet."""
    if locator.moving:
        page.partial = True
    return page


def position(line: pb.GameListing) -> tuple[bool, int, str]:
    """Where a node's line stands in the cluster's list (lobby.py's order): by creation time
    and id, the quarantined tables after the others by id."""
    quarantined = line.status == pb.GAME_STATUS_QUARANTINED
    return quarantined, 0 if quarantined else line.create_time.ToMilliseconds(), line.game_id


def token_after(line: pb.GameListing) -> str:
    """The ``next_page_token`` of a page whose last line is ``line``."""
    if line.status == pb.GAME_STATUS_QUARANTINED:
        return lobby.token_after(quarantined=line.game_id)
    return lobby.token_after((line.create_time.ToMilliseconds(), line.game_id))
