"""`tapis-admin`: back up, restore and check a data directory; ask a running server's health.

    tapis-admin backup --data-dir D OUT   a consistent online copy of everything the server
                                          keeps (the tables' database and the results ledger,
                                          with SQLite's backup API while the server runs, and
                                          join.key), with a manifest
    tapis-admin restore OUT D             into a data directory that has no database yet
    tapis-admin check D                   integrity, schema version, counts (a data directory
                                          or a backup)
    tapis-admin check --database-url URL  the same of a PostgreSQL database (after pg_restore)
    tapis-admin health [--service NAME]   the health of the tapis-server running as PID 1 (or
                                          --pid, or --target), on its own port and over TLS
                                          as it serves it (--tls-ca): the image's HEALTHCHECK

Exit status: 0 done / sound / SERVING, 1 a check found a problem or the probe did not answer
SERVING, 2 refused (bad arguments, a directory in the way, nothing to check, no way to dial).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tapis_service.stores import joinkey
from tapis_service.stores.joinkey import DATABASE_NAME, KEY_BYTES, KEY_NAME
from tapis_service.stores.results_sqlite import FILE_NAME as RESULTS_NAME

MANIFEST_NAME = "manifest.json"
FORMAT = "tapis-backup/2"
"""Version 2 carries the results ledger; a version 1 backup (without it) is restored too."""
FORMATS = ("tapis-backup/1", FORMAT)
DATABASES = (RESULTS_NAME, DATABASE_NAME)
"""The SQLite files of a data directory, in the order a backup copies them: the ledger first,
so that every result it holds comes from a table the tables' copy (later) holds finished; a
game that ends between the two copies is filed again from its table at the next start (under
its own key: once)."""
FILES = (*DATABASES, KEY_NAME)
"""Everything a server keeps in its data directory (``tapis.lock`` and the WAL files aside:
the lock is made again, the WAL is inside each copy)."""


class Refused(Exception):
    """The command cannot do what it was asked (exit 2)."""


# --- reading a database ----------------------------------------------------------------------


def _read_only(database: Path) -> sqlite3.Connection:
    if not database.is_file():
        raise Refused(f"{database}: no database there")
    return sqlite3.connect(f"file:{database}?mode=ro", uri=True)


def schema_version(connection: sqlite3.Connection) -> int | None:
    """The store's schema version (``tapis_schema``), None for a file from before versions."""
    try:
        row = connection.execute("SELECT MAX(version) FROM tapis_schema").fetchone()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def counts(connection: sqlite3.Connection) -> dict[str, int]:
    """Tables (all, finished), journal entries (``journal``: on schema 3, the view of both
    its parts), snapshots."""
    def one(sql: str) -> int:
        return int(connection.execute(sql).fetchone()[0])

    return {"tables": one("SELECT COUNT(*) FROM games"),
            "finished": one("SELECT COUNT(*) FROM games WHERE finished != 0"),
            "inputs": one("SELECT COUNT(*) FROM journal"),
            "snapshots": one("SELECT COUNT(*) FROM snapshots")}


def twice_journaled(connection: sqlite3.Connection) -> int:
    """Inputs in both parts of the journal (schema 3: its inbox and its tree): none in a sound
    file (the server's fold would stop at them). Reads only: a running server's inbox is read as
    it is, never folded."""
    if connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                          "name = 'journal_inbox'").fetchone() is None:
        return 0  # a file from before schema 3: one journal table
    return int(connection.execute(
        "SELECT COUNT(*) FROM journal_inbox i JOIN journal_folded f "
        "ON f.game_id = i.game_id AND f.idx = i.idx").fetchone()[0])


def repeated_in_inbox(connection: sqlite3.Connection) -> int:
    """Inputs the journal's inbox holds more than once: none in a sound file (schema 4's inbox
    has no key of its own: its writer keeps it free of repeats; a fold would stop at them)."""
    if connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                          "name = 'journal_inbox'").fetchone() is None:
        return 0
    return int(connection.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM journal_inbox GROUP BY game_id, idx "
        "HAVING COUNT(*) > 1)").fetchone()[0])


def results_counts(connection: sqlite3.Connection) -> dict[str, int]:
    """The results ledger: backends, records kept, records not acknowledged yet."""
    def one(sql: str) -> int:
        return int(connection.execute(sql).fetchone()[0])

    return {"backends": one("SELECT COUNT(*) FROM result_cursors"),
            "results": one("SELECT COUNT(*) FROM results"),
            "unacknowledged": one("SELECT COUNT(*) FROM results WHERE payload IS NOT NULL")}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()



# --- the commands ------------------------------------------------------------------------------


def _copy_database(source_path: Path, target_path: Path) -> sqlite3.Connection:
    """An online copy of a SQLite file (one read transaction: one consistent state while the
    server writes), self-contained (no WAL) and checked; the copy's connection, open."""
    source = _read_only(source_path)
    target = sqlite3.connect(target_path)
    try:
        source.backup(target)  # all pages in one step: one read transaction, one state
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        integrity = target.execute("PRAGMA integrity_check").fetchone()[0]
    except BaseException:
        target.close()
        raise
    finally:
        source.close()
    if integrity != "ok":
        target.close()
        raise Refused(f"the copy of {source_path.name} fails SQLite's integrity check: "
                      f"{integrity}")
    return target


def backup(data_dir: Path, out: Path) -> dict[str, Any]:
    """Copy everything ``data_dir``'s server keeps into the new directory ``out``, with a
    manifest: its databases online (the results ledger, then the tables: ``DATABASES``) and
    its join key."""
    key = data_dir / KEY_NAME
    if not key.is_file():
        raise Refused(f"{data_dir}: no {KEY_NAME}: a backup without it cannot answer retried "
                      "joins")
    _read_only(data_dir / DATABASE_NAME).close()  # there is a database to copy
    if out.exists() and any(out.iterdir()):
        raise Refused(f"{out}: not empty; a backup goes into a new directory")
    out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {}
    version = None
    for name in DATABASES:
        if not (data_dir / name).is_file():  # a directory from before the results ledger
            continue
        copy = _copy_database(data_dir / name, out / name)
        try:
            if name == DATABASE_NAME:
                version, found = schema_version(copy), {**counts(copy), **found}
            else:
                found.update(results_counts(copy))
        finally:
            copy.close()
    shutil.copyfile(key, out / KEY_NAME)
    (out / KEY_NAME).chmod(0o600)
    names = [name for name in FILES if (out / name).is_file()]
    manifest = {
        "format": FORMAT, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tapis_version": _version(), "source": str(data_dir.resolve()),
        "schema_version": version, "counts": found,
        "files": {name: {"sha256": _sha256(out / name), "bytes": (out / name).stat().st_size}
                  for name in names}}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for name in (*names, MANIFEST_NAME):
        joinkey.sync_path(out / name)
    joinkey.sync_path(out)
    return manifest


def verify_backup(backup_dir: Path) -> dict[str, Any]:
    """The backup's manifest, once every file matches its checksum."""
    try:
        manifest: dict[str, Any] = json.loads((backup_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError) as error:
        raise Refused(f"{backup_dir}: not a tapis backup ({MANIFEST_NAME}: {error})") from None
    if manifest.get("format") not in FORMATS:
        raise Refused(f"{backup_dir}: format {manifest.get('format')!r}, expected one of "
                      f"{', '.join(FORMATS)}")
    for name, expected in manifest["files"].items():
        path = backup_dir / name
        if not path.is_file() or _sha256(path) != expected["sha256"]:
            raise Refused(f"{path}: missing or changed since the backup (checksum)")
    return manifest


def restore(backup_dir: Path, data_dir: Path) -> dict[str, Any]:
    """Put a verified backup into ``data_dir``, which must hold no database (nor WAL, nor key)
    and no running server."""
    manifest = verify_backup(backup_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    in_the_way = [name for name in (*(f"{database}{suffix}" for database in reversed(DATABASES)
                                      for suffix in ("", "-wal", "-shm")), KEY_NAME)
                  if (data_dir / name).exists()]
    if in_the_way:
        raise Refused(f"{data_dir}: already holds {', '.join(in_the_way)}; restore into an "
                      "empty directory (move the old one aside first)")
    from tapis_service.stores.sqlite_store import _lock_directory  # the server's own lock
    from tapis_service.stores.store import StoreInUse

    try:
        lock = _lock_directory(data_dir)
    except StoreInUse as error:
        raise Refused(str(error)) from None
    try:
        for name in (name for name in FILES if name in manifest["files"]):
            partial = data_dir / f".{name}.restoring"
            shutil.copyfile(backup_dir / name, partial)
            partial.chmod(0o600 if name == KEY_NAME else 0o644)
            joinkey.sync_path(partial)
            partial.rename(data_dir / name)
        joinkey.sync_path(data_dir)
    finally:
        os.close(lock)
    return manifest


def check(directory: Path) -> dict[str, Any]:
    """What ``directory`` (a data directory or a backup) holds, and whether it is sound:
    ``problems`` is empty when it is. A directory with neither a database nor a backup's
    manifest (missing, empty, the wrong path) is refused: nothing to check (exit 2); a database
    SQLite cannot read, or a backup that lost its database, is a problem (exit 1)."""
    problems: list[str] = []
    database = directory / DATABASE_NAME
    if not database.is_file() and not (directory / MANIFEST_NAME).is_file():
        raise Refused(f"{directory}: no {DATABASE_NAME} there (nor a backup's {MANIFEST_NAME}):"
                      " nothing to check")
    version: int | None = None
    found: dict[str, int] = {}
    integrity = ["no database"]
    if database.is_file():
        version, found, integrity = _check_tables(database, problems)
    else:
        problems.append(f"no {DATABASE_NAME}: the backup lost its tables' database")
    key = directory / KEY_NAME
    if not key.is_file():
        problems.append(f"no {KEY_NAME}: retried joins would get tokens that do not work")
    elif key.stat().st_size != KEY_BYTES:
        problems.append(f"{KEY_NAME}: {key.stat().st_size} bytes, expected {KEY_BYTES}")
    ledger = directory / RESULTS_NAME
    if ledger.is_file():
        found.update(_check_ledger(ledger, problems))
    if (directory / MANIFEST_NAME).exists():
        try:
            verify_backup(directory)
        except Refused as error:
            problems.append(str(error))
    return {"directory": str(directory), "schema_version": version, "counts": found,
            "integrity": "ok" if integrity == ["ok"] else "failed", "problems": problems}


def _check_tables(database: Path, problems: list[str]
                  ) -> tuple[int | None, dict[str, int], list[str]]:
    """The tables' database: its schema version, counts and integrity check (a problem each
    for what is wrong, one for a file SQLite cannot read)."""
    try:
        connection = _read_only(database)
        try:
            integrity = [row[0] for row in connection.execute("PRAGMA integrity_check")]
            version = schema_version(connection)
            try:
                found = counts(connection)
                twice = twice_journaled(connection)
                if twice:
                    problems.append(f"{twice} journal inputs are both in the inbox and in the "
                                    "tree")
                repeated = repeated_in_inbox(connection)
                if repeated:
                    problems.append(f"{repeated} journal inputs are in the inbox more than "
                                    "once")
            except sqlite3.Error as error:
                found = {}
                problems.append(f"not a Tapis store: {error}")
        finally:
            connection.close()
    except sqlite3.Error as error:
        problems.append(f"{DATABASE_NAME}: cannot be read as a database: {error}")
        return None, {}, [str(error)]
    if integrity != ["ok"]:
        problems.append(f"integrity check: {'; '.join(integrity[:5])}")
    return version, found, integrity


def check_database(url: str) -> dict[str, Any]:
    """What a PostgreSQL database holds, and whether a server can start on it (after a
    ``pg_restore``): its schema version, its counts, its secrets; ``problems`` is empty when
    it is sound."""
    import asyncio

    return asyncio.run(_check_database(url))


async def _check_database(url: str) -> dict[str, Any]:
    import asyncpg

    from tapis_service.stores.postgres_sql import SCHEMA_VERSION
    from tapis_service.stores.postgres_store import SECRETS, SERVED, redacted

    problems: list[str] = []
    try:
        connection = await asyncpg.connect(url, timeout=10)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
        raise Refused(f"cannot reach the database at {redacted(url)}: {error}") from None
    try:
        missing = [name for name in ("tapis_schema", "games", "journal", "snapshots", "meta",
                                     "tapis_results", "tapis_result_cursors")
                   if not await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", name)]
        found: dict[str, int] = {}
        version = None
        if missing:
            problems.append(f"missing tables: {', '.join(missing)}")
        else:
            version = await connection.fetchval("SELECT MAX(version) FROM tapis_schema")
            found = {key: int(await connection.fetchval(sql)) for key, sql in (
                ("tables", "SELECT count(*) FROM games"),
                ("finished", "SELECT count(*) FROM games WHERE finished"),
                ("inputs", "SELECT count(*) FROM journal"),
                ("snapshots", "SELECT count(*) FROM snapshots"),
                ("results", "SELECT count(*) FROM tapis_results"),
                ("unacknowledged",
                 "SELECT count(*) FROM tapis_results WHERE payload IS NOT NULL"))}
            secrets = {row["key"] for row in await connection.fetch(
                "SELECT key FROM meta WHERE key = ANY($1::text[])", list(SECRETS))}
            lost = [name for name in SECRETS if name not in secrets]
            if lost:
                problems.append(f"meta lacks {' and '.join(lost)}: restore meta from the same "
                                "dump as the tables")
            if version is not None and version > SCHEMA_VERSION:
                problems.append(f"schema version {version}, newer than this version's "
                                f"({SCHEMA_VERSION})")
        served = await connection.fetchval("SELECT current_setting($1, true)", SERVED) == "on"
    finally:
        await connection.close()
    return {"database": redacted(url), "schema_version": version, "counts": found,
            "served": served, "problems": problems}


def _check_ledger(ledger: Path, problems: list[str]) -> dict[str, int]:
    """The results ledger's integrity and counts (a problem each for what is wrong)."""
    try:
        connection = _read_only(ledger)
        try:
            integrity = [row[0] for row in connection.execute("PRAGMA integrity_check")]
            if integrity != ["ok"]:
                problems.append(f"{RESULTS_NAME}: integrity check: {'; '.join(integrity[:5])}")
            return results_counts(connection)
        finally:
            connection.close()
    except sqlite3.Error as error:
        problems.append(f"{RESULTS_NAME}: cannot be read as a results ledger: {error}")
        return {}


def health(target: str | None, service: str, timeout_s: float, pid: int | None = None, *,
           tls_ca: Path | None = None, tls: bool = False, tls_name: str | None = None,
           environ: Mapping[str, str] | None = None, proc: Path = Path("/proc")) -> str:
    """The health status a running server reports for ``service``: at ``target``, else on the
    port of the tapis-server process ``pid`` (default: PID 1, the container's), over TLS as that
    server serves it (``tapis_service.process.healthcheck`` says how it is dialled)."""
    from tapis_service.process import healthcheck

    trust = healthcheck.Trust.given(tls_ca, tls, tls_name,
                                    os.environ if environ is None else environ)
    try:
        probe = (healthcheck.to_target(target, trust) if target is not None
                 else healthcheck.to_process(proc / str(pid or 1), trust))
    except healthcheck.Unprobed as error:
        raise Refused(str(error)) from None
    return healthcheck.check(probe, service, timeout_s)


def _version() -> str:
    from tapis_service.process.startup import version

    return version()


# --- the command line --------------------------------------------------------------------------


CHECK_EPILOG = """\
exit status:
  0  sound: no problems
  1  a problem (printed in "problems"): a failed integrity check, a database SQLite cannot
     read, a backup that lost a file or whose checksums differ, no or a bad join.key, an
     input in both parts of the journal
  2  nothing checked: no tapis.sqlite3 in the directory and not a backup (a missing or empty
     directory, the wrong path), a PostgreSQL database that cannot be reached, or bad
     arguments"""

HEALTH_EPILOG = """\
With --pid (or PID 1), the probe dials the port that server listens on, over TLS when it
serves TLS (--tls-cert), trusting --tls-ca, else the system's roots with --tls, else the
server's own certificate file if it holds a self-signed certificate (its root); otherwise it
refuses, asking for --tls-ca: the certificate is always checked. A server that asks client
certificates (--tls-client-ca) is probed on its plaintext --health-port. With --target, TLS
is on when --tls-ca or --tls (or their variables) is given.

variables: TAPIS_TLS_CA (--tls-ca), TAPIS_TLS=1 (--tls), TAPIS_HEALTH_NAME (--tls-name)

exit status: 0 SERVING, 1 anything else (NOT_SERVING, SERVICE_UNKNOWN, UNREACHABLE (CODE)),
2 refused: no way to tell where or how to dial (not a tapis-server, a TLS server and no CA)"""


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(prog="tapis-admin", description=__doc__.split("\n")[0])
    commands = result.add_subparsers(dest="command", required=True)
    made = commands.add_parser("backup", help="a consistent copy of a data directory, online")
    made.add_argument("--data-dir", type=Path, required=True)
    made.add_argument("out", type=Path, help="a new (or empty) directory")
    restored = commands.add_parser("restore", help="a backup into an empty data directory")
    restored.add_argument("backup", type=Path)
    restored.add_argument("data_dir", type=Path)
    checked = commands.add_parser(
        "check", help="integrity, schema version, counts",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=CHECK_EPILOG)
    checked.add_argument("directory", type=Path, nargs="?",
                         help="a data directory or a backup")
    checked.add_argument("--database-url", default=None,
                         help="a PostgreSQL database instead (after pg_restore)")
    probed = commands.add_parser(
        "health", help="a running server's health (HEALTHCHECK)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=HEALTH_EPILOG)
    probed.add_argument("--service", default="",
                        help='"" (readiness, the default) or liveness')
    probed.add_argument("--target", default=None, metavar="HOST:PORT",
                        help="the server's address (default: the port of the server --pid, "
                             "read from its own flags and TAPIS_* variables)")
    probed.add_argument("--pid", type=int, default=None,
                        help="the server's process id (default: 1, a container's server)")
    probed.add_argument("--tls-ca", type=Path, default=None, metavar="FILE",
                        help="over TLS, trust this CA (PEM): the one that signed the server's "
                             "certificate (default: $TAPIS_TLS_CA)")
    probed.add_argument("--tls", action="store_true",
                        help="over TLS, trust the system's roots (default: $TAPIS_TLS)")
    probed.add_argument("--tls-name", default=None, metavar="NAME",
                        help="the name to check in the server's certificate (default: "
                             "$TAPIS_HEALTH_NAME, else localhost with --pid, the target's host "
                             "with --target)")
    probed.add_argument("--timeout", type=float, default=3.0, metavar="SECONDS")
    return result


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        if args.command == "backup":
            print(json.dumps(backup(args.data_dir, args.out), indent=2))
        elif args.command == "restore":
            manifest = restore(args.backup, args.data_dir)
            print(json.dumps({"restored": str(args.data_dir), "from": str(args.backup),
                              "created_at": manifest["created_at"],
                              "counts": manifest["counts"]}, indent=2))
        elif args.command == "check":
            if (args.directory is None) == (args.database_url is None):
                raise Refused("check takes a directory or --database-url (one of them)")
            report = (check(args.directory) if args.database_url is None
                      else check_database(args.database_url))
            print(json.dumps(report, indent=2))
            raise SystemExit(1 if report["problems"] else 0)
        else:
            status = health(args.target, args.service, args.timeout, args.pid,
                            tls_ca=args.tls_ca, tls=args.tls, tls_name=args.tls_name)
            print(status)
            raise SystemExit(0 if status == "SERVING" else 1)
    except Refused as error:
        print(f"tapis-admin: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
