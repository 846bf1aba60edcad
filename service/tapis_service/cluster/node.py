"""A cluster node: this process as a member of the cluster (``--advertise``).

Any node answers any call. A call for a table this node holds is served here; for a table
another live node owns, it is relayed there through the tunnel (``relay``); for a table whose
owner is dead or gone, this node takes it over (bumps the fencing epoch) and loads it from the
database (snapshot + journal replay), then serves it (``locator``). Writes are decided by the
journal's primary key: a node whose append is refused has lost the table; the host discards
its session and tells the locator, and from then on the node relays. The node's membership and
the sweep of orphan tables run on their own (``membership``); ListGames lists every node's
tables (``listing``); the gRPC handlers are the ``gateway``'s.
"""

from __future__ import annotations

import asyncio
import secrets

import grpc
import structlog

from tapis_service.cluster import gateway, metrics, tunnel
from tapis_service.cluster.directory import Directory
from tapis_service.cluster.listing import Listing
from tapis_service.cluster.locator import DATABASE_ERRORS, Locator
from tapis_service.cluster.membership import Membership
from tapis_service.cluster.relay import Relay, Tunnels
from tapis_service.door import logcontext
from tapis_service.door.door import Door
from tapis_service.door.rpcs import Route
from tapis_service.door.tls import ClusterTls
from tapis_service.game_api import GameApi
from tapis_service.grpc import stopcalls
from tapis_service.settings import Settings
from tapis_service.stores.postgres_store import PostgresStore
from tapis_service.tables.host import GameHost
from tapis_service.tables.lifecycle import TableState

log = structlog.get_logger("tapis.cluster")

HAND_OFF_MIN_S = 1.0
"""The hand-off's time at a stop whose grace is shorter (0 included): the others take the
tables over at once rather than after the lease."""


def new_node_id() -> str:
    return secrets.token_hex(6)


async def open_store(settings: Settings) -> PostgresStore:
    """A cluster node's store: fenced, owning what it creates, loading nothing at start (its
    tables are adopted one by one); the node id is bound to every log line from here on."""
    assert settings.database_url is not None
    node_id = settings.node_id or new_node_id()
    logcontext.bind_process(node=node_id)
    return await PostgresStore.open(settings.database_url, node_id=node_id, fenced=True,
                                    preload=False)


class ClusterNode:
    """This process as a member of the cluster."""

    def __init__(self, settings: Settings, host: GameHost, api: GameApi,
                 store: PostgresStore, tls: ClusterTls | None = None,
                 door: Door | None = None) -> None:
        assert settings.advertise is not None and store.node_id is not None
        self.settings = settings
        self.host = host
        self.store = store
        self.node_id = store.node_id
        self.directory = Directory(store.pool, self.node_id, settings.advertise,
                                   settings.node_ttl_s)
        self.locator = Locator(host, self.directory, self.node_id, settings.node_ttl_s)
        self.tunnels = Tunnels(store.relay_key.hex(), tls)
        self.relay = Relay(api, host, self.locator, self.tunnels, settings.stream_queue_size,
                           settings.node_ttl_s)
        self.listing = Listing(api, self.directory, self.locator, self.tunnels, self.node_id)
        self.membership = Membership(host, self.directory, self.locator, self.tunnels,
                                     settings.node_ttl_s)
        self.tunnel_server = tunnel.TunnelServer(self.relay.call, self.relay.stream,
                                                 self.tunnels.relay_key, settings.max_in_flight,
                                                 door=door)
        host.lost_listeners.append(self.locator.lost)
        host.confirm_owner = self.locator.owns  # a healed or woken table: still ours?

    def routes(self) -> dict[str, Route]:
        """How this node serves each method (the WebSocket's calls take them too)."""
        return gateway.routes(self.relay, self.listing)

    def handlers(self) -> tuple[grpc.GenericRpcHandler, ...]:
        """Every GameService method (served here or relayed), and the tunnel."""
        return (gateway.game_service(self.relay, self.listing), self.tunnel_server.handler())

    async def start(self) -> None:
        """Join. A node that restarts with the same ``--node-id`` holds nothing in memory yet:
        what its earlier life owned is handed off first, for the others (or itself) to adopt."""
        stale = await self.directory.hand_off()
        await self.locator.renewal()
        live = await self.directory.live_members()
        metrics.MEMBERS.set(self.directory.confirmed_members(live))
        if stale:
            log.info("stale_ownership_released", tables=stale)
        self.membership.start()
        log.info("cluster_joined", address=self.settings.advertise,
                 ttl_s=self.settings.node_ttl_s)

    async def leave(self, within_s: float | None = None) -> None:
        """Graceful stop: hand every table off (the others take them over on their next call
        or sweep), end the relayed streams (their clients resume elsewhere), leave; within
        ``within_s`` (None: however long it takes; the hand-off at least ``HAND_OFF_MIN_S``).
        A database that does not answer in time (paused, unreachable) holds it no longer: the
        hand-off is abandoned, and this node's lease expires by itself within a TTL (then the
        database decides who writes first: the fencing epoch)."""
        loop = asyncio.get_running_loop()
        ends = None if within_s is None else loop.time() + within_s
        self.locator.leaving = True
        self.membership.stop()
        self.relay.cut_relayed_streams()
        tables = self.host.tables
        for game_id in tables.ids(TableState.LIVE):
            tables.discard(game_id)
        for game_id in tables.ids(TableState.RESTING):  # handed off too: adopted elsewhere next
            tables.unlist_resting(game_id)
        _, handed = await stopcalls.within(
            self._hand_off(), None if within_s is None else max(within_s, HAND_OFF_MIN_S),
            "cluster_leave")
        left = None if ends is None else max(0.0, ends - loop.time())
        await self.tunnel_server.drain(left)  # answer what was relayed to us
        metrics.TABLES_OWNED.set(0)
        log.info("cluster_left", tables_handed_off=handed)

    async def _hand_off(self) -> int | None:
        """The database's part of leaving: the writes queued settled, every table handed off,
        the membership deleted; None when the database failed it (its lease expires)."""
        try:
            await self.store.settled()
            handed = await self.directory.hand_off()
            await self.directory.leave()
        except DATABASE_ERRORS as error:
            log.warning("cluster_leave_failed", error=str(error)[:200])
            return None
        return handed

    async def close(self) -> None:
        self.membership.stop()
        await self.tunnels.close()
