"""ListGames on a cluster: every live node's tables, this node's and the others' (asked
through the tunnel), in one list paged as a single node pages its own; tables of dead or
departed owners that the sweep has not reached yet are taken over first, so the list has them.
The nodes are asked at once; a node that does not answer within ``NODE_TIMEOUT_S`` (or the
client's deadline) makes the answer ``partial``, with its address in ``missing_nodes``.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from tapis.v1 import game_service_pb2 as pb
from tapis_service import convert, logrepeat
from tapis_service.caller import Caller, deadline_in
from tapis_service.cluster import frames, tunnel
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.locator import DATABASE_ERRORS, Locator, database_away
from tapis_service.cluster.relay import Tunnels
from tapis_service.errors import ServiceError
from tapis_service.game_api import MAX_PAGE, GameApi, page_bounds, page_token

log = structlog.get_logger("tapis.cluster")

SWEEP_EVERY_S = 1.0
LIST_ADOPTS = 200
"""Orphan tables a ListGames takes over before listing, at most (the sweep takes the rest)."""
NODE_TIMEOUT_S = 5.0
"""How long a node's list is waited for: one that does not answer has no tables listed."""
LIST = frames.METHODS.index("ListGames")


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
        start, size = page_bounds(request)
        if request.kind:
            convert.kind_of(request.kind)
        try:
            if not self.locator.leaving:
                await self._adopt_orphans(request.include_finished)
            members = await self.directory.live_members()
        except DATABASE_ERRORS as error:
            raise database_away() from error
        if self.node_id not in members:  # our own membership lapsed: our tables still count
            members[self.node_id] = ""
        await self.locator.confirm()
        ordered = sorted(members)
        lists = await asyncio.gather(*(self._list_node(node_id, members[node_id], request,
                                                       caller) for node_id in ordered))
        games = [game for listed in lists if listed is not None for game in listed]
        missing = [members[node_id] for node_id, listed in zip(ordered, lists, strict=True)
                   if listed is None]
        return pb.ListGamesResponse(games=games[start:start + size],
                                    next_page_token=page_token(start, size, len(games)),
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

    async def _list_node(self, node_id: str, address: str, request: pb.ListGamesRequest,
                         caller: Caller) -> list[pb.GameListing] | None:
        """One node's tables (all its pages); None when it does not answer them all."""
        out: list[pb.GameListing] = []
        token = ""
        left = caller.time_remaining()
        wait_s = NODE_TIMEOUT_S if left is None else min(left, NODE_TIMEOUT_S)
        while True:
            ask = pb.ListGamesRequest(kind=request.kind, include_finished=request.include_finished,
                                      page_size=MAX_PAGE, page_token=token)
            if node_id == self.node_id:
                if self.locator.leaving:
                    return out
                answer = await self.api.list_games(ask, caller)
            else:
                try:
                    async with asyncio.timeout(wait_s):
                        raw = await self.tunnels.to(address).call(
                            LIST, caller.relayed()._replace(deadline=deadline_in(wait_s)),
                            ask.SerializeToString())
                except (ServiceError, tunnel.OwnerUnreachable, TimeoutError):
                    return None
                answer = pb.ListGamesResponse.FromString(raw)
                if answer.partial:
                    return None
            out.extend(answer.games)
            token = answer.next_page_token
            if not token:
                return out
