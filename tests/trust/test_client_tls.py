"""The reference clients reach a server with TLS and keys: `tapis create --api-key KEY` and
`tapis list --tls-ca CA` (or TAPIS_TLS_CA and TAPIS_API_KEY), the bot's Connection alike."""

from __future__ import annotations

import asyncio
import os
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_clients.connection import Connection, Credentials
from tests.support.tables import live_of
from tests.trust.door import KEY_A, StartSecured, door

pytestmark = pytest.mark.slow  # client processes

CLI = (sys.executable, "-c", "from tapis_clients.cli import main; main()")


async def tapis(*arguments: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *CLI, *arguments, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_create_with_a_key_and_list_over_tls(tmp_path: Path,
                                                   start_secured: StartSecured) -> None:
    files = door(tmp_path)
    secured = await start_secured(files)
    ca = str(files.server.ca)
    code, out, err = await tapis("create", "war", "--target", secured.target, "--tls-ca", ca,
                                 "--api-key", KEY_A)
    assert code == 0, err
    game_id = out.strip()
    assert game_id in live_of(secured.running.host)
    code, out, err = await tapis("list", "--json", "--target", secured.target,
                                 env={"TAPIS_TLS_CA": ca, "TAPIS_API_KEY": KEY_A})
    assert code == 0, err
    assert game_id in out
    code, out, err = await tapis("list", "--json", "--target", secured.target, "--tls-ca", ca)
    assert code == 0, err
    assert game_id not in out  # a backend's table is private: listed to its backend only
    code, _, err = await tapis("create", "war", "--target", secured.target, "--tls-ca", ca)
    assert code != 0 and "this needs a backend's API key" in err + _


def test_credentials_come_from_the_options_else_the_environment(tmp_path: Path) -> None:
    files = door(tmp_path)
    options = Namespace(tls_ca=str(files.server.ca), tls=False, api_key="k" * 20)
    given = Credentials.from_options(options, {})
    assert given.tls and given.ca == files.server.ca_bytes() and given.api_key == "k" * 20
    from_env = Credentials.from_options(None, {"TAPIS_TLS": "1", "TAPIS_API_KEY": "e" * 20})
    assert from_env == Credentials(True, None, "e" * 20)
    assert Credentials.from_options(None, {}) == Credentials()


async def test_a_connection_with_credentials_plays_the_backend(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    secured = await start_secured(files)
    conn = Connection(secured.target, credentials=Credentials(True, files.server.ca_bytes(),
                                                              KEY_A))
    try:
        created = await conn.call(conn.stub.CreateGame, pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR))
        listed = await conn.call(conn.stub.ListGames, pb.ListGamesRequest())
        assert [g.game_id for g in listed.games] == [created.game.game_id]
    finally:
        await conn.close()
