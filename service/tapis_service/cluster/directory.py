"""The cluster's directory in the database: who is a member (``members``: its address, its
heartbeat ``beat``, how many of its tables were taken over ``taken``) and who owns which table
at which fencing epoch (``games.owner``, ``games.epoch``).

Liveness is judged by each node on its own monotonic clock (``liveness``): a member whose
heartbeat has not moved for a TTL is dead. No takeover succeeds while the owner's heartbeat
moves on: a takeover locks the owner's ``members`` row (for update: two takeovers that shared
it would deadlock on the count) and checks that its heartbeat is still the one judged dead, so
it is ordered against the owner's renewal, and a trigger counts it on that row, which the
owner's next renewal reads. Who *may* write is
decided by the journal's primary key (and, to fail fast, the epoch). No decision compares
timestamps (``members.expires_at`` is written for people and for nodes of schema 4 in a rolling
upgrade, never read here).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from tapis_service.cluster.liveness import Liveness
from tapis_service.stores.postgres_store import ACQUIRE_TIMEOUT_S
from tapis_service.stores.stored_rows import listing

_ORPHAN = ("(owner IS NULL OR owner = ANY($3::text[]) OR NOT EXISTS (SELECT 1 FROM members m "
           "WHERE m.node_id = games.owner))")
"""A games row whose owner is dead (in ``$3``, the members judged dead), gone (its membership
deleted) or none (handed off)."""
UNOWNED = "unowned"
"""How ListGames names, among its missing nodes, the tables a stopped node handed off that no
node took over yet."""
_DEAD = ("dead AS (SELECT m.node_id FROM members m JOIN unnest($3::text[], $4::bigint[]) "
         "AS d(node_id, beat) ON m.node_id = d.node_id AND m.beat = d.beat "
         "ORDER BY m.node_id FOR NO KEY UPDATE OF m)")
"""The members judged dead whose heartbeat is still the one judged dead, their rows locked
until the takeover commits: an owner's renewal waits for it (and one that committed first gave
its row a new heartbeat). Locked for update, in node id order, not shared: the takeover's
trigger counts it on that row (``taken``), and two takeovers that had each shared the row
would each wait for the other to let go (a deadlock, PostgreSQL aborting one of them)."""
_OWNER_ALIVE = ("owner_alive AS (SELECT m.beat IS DISTINCT FROM $4 AS alive FROM games g "
                "JOIN members m ON m.node_id = g.owner WHERE g.game_id = $2 "
                "FOR NO KEY UPDATE OF m)")
"""Whether the table's owner renewed since it was judged dead, its row locked as ``_DEAD``
locks it (for update: the takeover counts itself on that row)."""


RENEW = ("INSERT INTO members (node_id, address, expires_at) "
         "VALUES ($1, $2, now() + make_interval(secs => $3)) "
         "ON CONFLICT (node_id) DO UPDATE SET address = EXCLUDED.address, "
         "expires_at = EXCLUDED.expires_at RETURNING taken")
"""A membership's renewal (its row's trigger gives it a new heartbeat), answering how many of
its tables were ever taken over: read once the row is ours, after any takeover holding it has
committed, so a renewal that waited for a takeover counts it."""


@dataclass(frozen=True, slots=True)
class Owner:
    """A table's row in the directory."""

    node_id: str | None
    epoch: int
    address: str | None
    alive: bool
    """Its owner's heartbeat moved on within a TTL, as this node saw it."""
    beat: int | None = None
    """Its owner's heartbeat when it was read (None: no owner, or no membership)."""


class Directory:
    """Queries over a pool to the cluster's database, as node ``node_id``."""

    def __init__(self, pool: asyncpg.Pool, node_id: str, address: str, ttl_s: float,
                 liveness: Liveness | None = None) -> None:
        self.pool = pool
        self.node_id = node_id
        self.address = address
        self.ttl_s = ttl_s
        self.liveness = Liveness(ttl_s) if liveness is None else liveness

    async def renew(self) -> int:
        """Register or renew this node's membership; how many of its tables were ever taken
        over (a count the node has not seen: it may have lost tables meanwhile)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            taken = await connection.fetchval(RENEW, self.node_id, self.address, self.ttl_s)
        return int(taken)

    async def leave(self) -> None:
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            await connection.execute("DELETE FROM members WHERE node_id = $1", self.node_id)

    async def live_members(self) -> dict[str, str]:
        """node id -> address of every live node (this one included while it renews); every
        member's heartbeat is read (``liveness``)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch("SELECT node_id, address, beat FROM members")
        self.liveness.keep_only(r["node_id"] for r in rows)
        return {r["node_id"]: r["address"] for r in rows
                if self.liveness.observe(r["node_id"], r["beat"])}

    def confirmed_members(self, live: Iterable[str]) -> int:
        """How many of ``live`` (``live_members``) are confirmed alive: this node, and each
        member whose heartbeat it has read move on (``Liveness.confirmed``)."""
        return len(self.liveness.confirmed(live) | {self.node_id})

    async def owner_of(self, game_id: str) -> Owner | None:
        """The table's owner (None: no such table)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            row = await connection.fetchrow(
                "SELECT g.owner, g.epoch, m.address, m.beat FROM games g "
                "LEFT JOIN members m ON m.node_id = g.owner WHERE g.game_id = $1", game_id)
        if row is None:
            return None
        beat = row["beat"]
        alive = beat is not None and self.liveness.observe(row["owner"], beat)
        return Owner(row["owner"], row["epoch"], row["address"], alive, beat)

    async def created_by(self, scope: str, request_id: str) -> str | None:
        """The table a CreateGame with this request id from this sender (``scope``: the
        backend's name, "" without a key) created, on any node (None: none)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            game_id = await connection.fetchval(
                "SELECT game_id FROM games WHERE create_scope = $1 AND create_request_id = $2",
                scope, request_id)
        return None if game_id is None else str(game_id)

    async def take_over(self, game_id: str, owner: Owner) -> int | None:
        """Become the table's owner if its epoch is still ``owner.epoch`` and its owner is
        dead (its heartbeat still ``owner.beat``, checked under a lock on its membership) or
        gone: the new epoch, or None if another node moved it first or its owner renewed
        meanwhile."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection, \
                connection.transaction():
            # wait (a TTL at most) for the appends in flight: what they commit is loaded
            await connection.execute(f"SET LOCAL lock_timeout = {int(self.ttl_s * 1000)}")
            locked = await connection.fetchval(
                "SELECT epoch FROM games WHERE game_id = $1 FOR UPDATE", game_id)
            if locked != owner.epoch:
                return None
            epoch = await connection.fetchval(
                f"WITH {_OWNER_ALIVE} UPDATE games SET owner = $1, epoch = epoch + 1 "
                "WHERE game_id = $2 AND epoch = $3 "
                "AND NOT COALESCE((SELECT alive FROM owner_alive), FALSE) RETURNING epoch",
                self.node_id, game_id, owner.epoch, owner.beat)
        return None if epoch is None else int(epoch)

    async def holds(self, game_id: str, epoch: int) -> bool:
        """Whether this node still owns the table at ``epoch`` (a takeover installs the table
        only then)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            return bool(await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM games WHERE game_id = $1 AND owner = $2 "
                "AND epoch = $3)", game_id, self.node_id, epoch))

    async def sweep_orphans(self, limit: int) -> list[tuple[str, int]]:
        """Take over up to ``limit`` unfinished tables whose owner is dead (as last read:
        ``live_members``) or gone, those that can move without a client (bots, turn timers)
        first: (game id, new epoch). Rows another node is sweeping are skipped (``FOR UPDATE
        SKIP LOCKED``)."""
        dead = self.liveness.dead()
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                # never this node's own tables: a heartbeat late under load must not make it
                # "take over" what it holds (its renewal keeps them)
                f"WITH {_DEAD}, orphans AS (SELECT game_id FROM games WHERE NOT finished "
                "AND owner IS DISTINCT FROM $1 AND (owner IS NULL "
                "OR owner IN (SELECT node_id FROM dead) "
                "OR NOT EXISTS (SELECT 1 FROM members m WHERE m.node_id = games.owner)) "
                "ORDER BY timed DESC, created_order LIMIT $2 FOR UPDATE SKIP LOCKED) "
                "UPDATE games SET owner = $1, epoch = games.epoch + 1 FROM orphans "
                "WHERE games.game_id = orphans.game_id RETURNING games.game_id, games.epoch",
                self.node_id, limit, list(dead), list(dead.values()))
        return [(r["game_id"], int(r["epoch"])) for r in rows]

    async def orphans(self, include_finished: bool, limit: int
                      ) -> list[tuple[str, dict[str, Any] | None]]:
        """Up to ``limit`` tables whose owner is dead (as last read: ``live_members``) or gone
        (finished ones too if asked): (game id, its stored listing when it rests; None: it
        does not, or the listing cannot be read)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                f"SELECT game_id, listing FROM games WHERE ($1 OR NOT finished) AND {_ORPHAN} "
                "ORDER BY created_order LIMIT $2", include_finished, limit,
                list(self.liveness.dead()))
        return [(r["game_id"], listing(r["listing"])) for r in rows]

    async def unlisted_owners(self, listed: Sequence[str], include_finished: bool
                              ) -> list[str]:
        """Who owns tables that no node of ``listed`` lists (a table being taken over from a
        dead or departed node; finished ones only if ``include_finished``): each owner's
        address (its node id when its membership row is gone), ``UNOWNED`` for tables handed
        off that no node took yet. The owners are found through the owner index, one probe
        per owner (not a scan of every table)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                "WITH RECURSIVE owners(owner) AS ("
                "(SELECT owner FROM games WHERE owner IS NOT NULL ORDER BY owner LIMIT 1) "
                "UNION ALL SELECT (SELECT g.owner FROM games g WHERE g.owner > o.owner "
                "ORDER BY g.owner LIMIT 1) FROM owners o WHERE o.owner IS NOT NULL) "
                "SELECT COALESCE(m.address, o.owner) AS name FROM owners o "
                "LEFT JOIN members m ON m.node_id = o.owner "
                "WHERE o.owner IS NOT NULL AND o.owner <> ALL($1::text[]) "
                "AND EXISTS (SELECT 1 FROM games g WHERE g.owner = o.owner "
                "AND ($2 OR NOT g.finished)) "
                "UNION ALL SELECT $3 WHERE EXISTS (SELECT 1 FROM games "
                "WHERE owner IS NULL AND ($2 OR NOT finished))",
                list(listed), include_finished, UNOWNED)
        return sorted(r["name"] for r in rows)

    async def owned(self) -> dict[str, int]:
        """game id -> epoch of every table this node owns."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                "SELECT game_id, epoch FROM games WHERE owner = $1", self.node_id)
        return {r["game_id"]: int(r["epoch"]) for r in rows}

    async def hand_off(self) -> int:
        """Give up every table this node owns (graceful stop); how many."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            status = await connection.execute(
                "UPDATE games SET owner = NULL WHERE owner = $1", self.node_id)
        return int(status.split()[-1])
