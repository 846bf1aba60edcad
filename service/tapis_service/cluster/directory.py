"""The cluster's directory in the database: who is alive (``members``) and who owns which
table at which fencing epoch (``games.owner``, ``games.epoch``).

Liveness is an expiry renewed by each node; it decides who *should* serve a table, and no
takeover succeeds while the owner's membership is live: a takeover locks the owner's
``members`` row (``FOR SHARE``), so it is ordered against the owner's renewal, and a renewal
that finds its membership had lapsed sees every takeover made meanwhile. Who *may* write is
decided by the journal's primary key (and, to fail fast, the epoch).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from tapis_service.stores.postgres_store import ACQUIRE_TIMEOUT_S

_ORPHAN = ("(owner IS NULL OR NOT EXISTS (SELECT 1 FROM members m "
           "WHERE m.node_id = games.owner AND m.expires_at > now()))")
"""A games row whose owner is dead (its membership expired) or gone (handed off)."""
UNOWNED = "unowned"
"""How ListGames names, among its missing nodes, the tables a stopped node handed off that no
node took over yet."""
_DEAD = "dead AS (SELECT node_id FROM members WHERE expires_at <= now() FOR SHARE)"
"""The expired members, their rows locked until the takeover commits: an owner's renewal
waits for it (and one that committed first makes its row not expired any more)."""


RENEW = ("WITH old AS (SELECT expires_at FROM members WHERE node_id = $1) "
         "INSERT INTO members (node_id, address, expires_at) "
         "VALUES ($1, $2, now() + make_interval(secs => $3)) "
         "ON CONFLICT (node_id) DO UPDATE SET address = EXCLUDED.address, "
         "expires_at = EXCLUDED.expires_at "
         "RETURNING COALESCE((SELECT expires_at FROM old) <= clock_timestamp(), TRUE)")
"""A membership's renewal, answering whether it had lapsed. The lapse is judged when the row
is ours (``clock_timestamp()``, after any takeover holding it ``FOR SHARE`` has committed), not
when the statement began (``now()``): a renewal begun just before the expiry that waited for a
takeover begun just after it must say lapsed, or its node would keep serving a table it lost.
The new expiry counts from the statement's start (earlier: the node's lease ends sooner)."""


def _decoded(listing: str | None) -> dict[str, Any] | None:
    try:
        decoded = json.loads(listing) if listing is not None else None
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


@dataclass(frozen=True, slots=True)
class Owner:
    """A table's row in the directory."""

    node_id: str | None
    epoch: int
    address: str | None
    alive: bool


class Directory:
    """Queries over a pool to the cluster's database, as node ``node_id``."""

    def __init__(self, pool: asyncpg.Pool, node_id: str, address: str, ttl_s: float) -> None:
        self.pool = pool
        self.node_id = node_id
        self.address = address
        self.ttl_s = ttl_s

    async def renew(self) -> bool:
        """Register or renew this node's membership; True if it had expired (or was missing)
        before: the node may have lost tables meanwhile."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            lapsed = await connection.fetchval(RENEW, self.node_id, self.address, self.ttl_s)
        return bool(lapsed)

    async def leave(self) -> None:
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            await connection.execute("DELETE FROM members WHERE node_id = $1", self.node_id)

    async def live_members(self) -> dict[str, str]:
        """node id -> address of every live node (this one included)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                "SELECT node_id, address FROM members WHERE expires_at > now()")
        return {r["node_id"]: r["address"] for r in rows}

    async def owner_of(self, game_id: str) -> Owner | None:
        """The table's owner (None: no such table)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            row = await connection.fetchrow(
                "SELECT g.owner, g.epoch, m.address, COALESCE(m.expires_at > now(), FALSE) "
                "AS alive FROM games g LEFT JOIN members m ON m.node_id = g.owner "
                "WHERE g.game_id = $1", game_id)
        if row is None:
            return None
        return Owner(row["owner"], row["epoch"], row["address"], row["alive"])

    async def created_by(self, scope: str, request_id: str) -> str | None:
        """The table a CreateGame with this request id from this sender (``scope``: the
        backend's name, "" without a key) created, on any node (None: none)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            game_id = await connection.fetchval(
                "SELECT game_id FROM games WHERE create_scope = $1 AND create_request_id = $2",
                scope, request_id)
        return None if game_id is None else str(game_id)

    async def take_over(self, game_id: str, seen_epoch: int) -> int | None:
        """Become the table's owner if its epoch is still ``seen_epoch`` and its owner is dead
        or gone (checked under a lock on the owner's membership): the new epoch, or None if
        another node moved it first or its owner renewed meanwhile."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection, \
                connection.transaction():
            # wait (a TTL at most) for the appends in flight: what they commit is loaded
            await connection.execute(f"SET LOCAL lock_timeout = {int(self.ttl_s * 1000)}")
            locked = await connection.fetchval(
                "SELECT epoch FROM games WHERE game_id = $1 FOR UPDATE", game_id)
            if locked != seen_epoch:
                return None
            epoch = await connection.fetchval(
                "WITH owner_alive AS (SELECT m.expires_at > now() AS alive FROM games g "
                "JOIN members m ON m.node_id = g.owner WHERE g.game_id = $2 FOR SHARE OF m) "
                "UPDATE games SET owner = $1, epoch = epoch + 1 "
                "WHERE game_id = $2 AND epoch = $3 "
                "AND NOT COALESCE((SELECT alive FROM owner_alive), FALSE) RETURNING epoch",
                self.node_id, game_id, seen_epoch)
        return None if epoch is None else int(epoch)

    async def holds(self, game_id: str, epoch: int) -> bool:
        """Whether this node still owns the table at ``epoch`` (a takeover installs the table
        only then)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            return bool(await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM games WHERE game_id = $1 AND owner = $2 "
                "AND epoch = $3)", game_id, self.node_id, epoch))

    async def sweep_orphans(self, limit: int) -> list[tuple[str, int]]:
        """Take over up to ``limit`` unfinished tables whose owner is dead or gone, those that
        can move without a client (bots, turn timers) first: (game id, new epoch). Rows
        another node is sweeping are skipped (``FOR UPDATE SKIP LOCKED``)."""
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
                self.node_id, limit)
        return [(r["game_id"], int(r["epoch"])) for r in rows]

    async def orphans(self, include_finished: bool, limit: int
                      ) -> list[tuple[str, dict[str, Any] | None]]:
        """Up to ``limit`` tables whose owner is dead or gone (finished ones too if asked):
        (game id, its stored listing when it rests; None: it does not, or the listing cannot
        be read)."""
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            rows = await connection.fetch(
                f"SELECT game_id, listing FROM games WHERE ($1 OR NOT finished) AND {_ORPHAN} "
                "ORDER BY created_order LIMIT $2", include_finished, limit)
        return [(r["game_id"], _decoded(r["listing"])) for r in rows]

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
