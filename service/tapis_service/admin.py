"""`tapis-admin`: back up, restore and check a data directory; ask a running server's health.

    tapis-admin backup --data-dir D OUT   a consistent online copy (SQLite's backup API, while
                                          the server runs), with join.key and a manifest
    tapis-admin restore OUT D             into a data directory that has no database yet
    tapis-admin check D                   integrity, schema version, counts (a data directory
                                          or a backup)
    tapis-admin health [--service NAME]   the health of the tapis-server running as PID 1 (or
                                          --target), on its own port: the image's HEALTHCHECK

Exit status: 0 done / healthy, 1 a check or a probe failed, 2 refused (bad arguments, a
directory in the way).
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
from pathlib import Path
from typing import Any

from tapis_service import joinkey
from tapis_service.joinkey import DATABASE_NAME, KEY_BYTES, KEY_NAME

MANIFEST_NAME = "manifest.json"
FORMAT = "tapis-backup/1"


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
    """Tables (all, finished), journal entries, snapshots."""
    def one(sql: str) -> int:
        return int(connection.execute(sql).fetchone()[0])

    return {"tables": one("SELECT COUNT(*) FROM games"),
            "finished": one("SELECT COUNT(*) FROM games WHERE finished != 0"),
            "inputs": one("SELECT COUNT(*) FROM journal"),
            "snapshots": one("SELECT COUNT(*) FROM snapshots")}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()



# --- the commands ------------------------------------------------------------------------------


def backup(data_dir: Path, out: Path) -> dict[str, Any]:
    """Copy ``data_dir``'s database (online: the backup API reads one consistent state while the
    server writes) and its join key into the new directory ``out``, with a manifest."""
    database, key = data_dir / DATABASE_NAME, data_dir / KEY_NAME
    if not key.is_file():
        raise Refused(f"{data_dir}: no {KEY_NAME}: a backup without it cannot answer retried "
                      "joins")
    if out.exists() and any(out.iterdir()):
        raise Refused(f"{out}: not empty; a backup goes into a new directory")
    out.mkdir(parents=True, exist_ok=True)
    source = _read_only(database)
    target = sqlite3.connect(out / DATABASE_NAME)
    try:
        source.backup(target)  # all pages in one step: one read transaction, one state
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        integrity = target.execute("PRAGMA integrity_check").fetchone()[0]
        version, found = schema_version(target), counts(target)
    finally:
        target.close()
        source.close()
    if integrity != "ok":
        raise Refused(f"the copy fails SQLite's integrity check: {integrity}")
    shutil.copyfile(key, out / KEY_NAME)
    (out / KEY_NAME).chmod(0o600)
    manifest = {
        "format": FORMAT, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tapis_version": _version(), "source": str(data_dir.resolve()),
        "schema_version": version, "counts": found,
        "files": {name: {"sha256": _sha256(out / name), "bytes": (out / name).stat().st_size}
                  for name in (DATABASE_NAME, KEY_NAME)}}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for name in (DATABASE_NAME, KEY_NAME, MANIFEST_NAME):
        joinkey.sync_path(out / name)
    joinkey.sync_path(out)
    return manifest


def verify_backup(backup_dir: Path) -> dict[str, Any]:
    """The backup's manifest, once every file matches its checksum."""
    try:
        manifest: dict[str, Any] = json.loads((backup_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError) as error:
        raise Refused(f"{backup_dir}: not a tapis backup ({MANIFEST_NAME}: {error})") from None
    if manifest.get("format") != FORMAT:
        raise Refused(f"{backup_dir}: format {manifest.get('format')!r}, expected {FORMAT}")
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
    in_the_way = [name for name in (DATABASE_NAME, f"{DATABASE_NAME}-wal",
                                    f"{DATABASE_NAME}-shm", KEY_NAME)
                  if (data_dir / name).exists()]
    if in_the_way:
        raise Refused(f"{data_dir}: already holds {', '.join(in_the_way)}; restore into an "
                      "empty directory (move the old one aside first)")
    from tapis_service.sqlite_store import _lock_directory  # the server's own lock
    from tapis_service.store import StoreInUse

    try:
        lock = _lock_directory(data_dir)
    except StoreInUse as error:
        raise Refused(str(error)) from None
    try:
        for name in (DATABASE_NAME, KEY_NAME):
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
    ``problems`` is empty when it is."""
    problems: list[str] = []
    connection = _read_only(directory / DATABASE_NAME)
    try:
        integrity = [row[0] for row in connection.execute("PRAGMA integrity_check")]
        version = schema_version(connection)
        try:
            found = counts(connection)
        except sqlite3.Error as error:
            found = {}
            problems.append(f"not a Tapis store: {error}")
    except sqlite3.Error as error:
        raise Refused(f"{directory / DATABASE_NAME}: cannot be read: {error}") from None
    finally:
        connection.close()
    if integrity != ["ok"]:
        problems.append(f"integrity check: {'; '.join(integrity[:5])}")
    key = directory / KEY_NAME
    if not key.is_file():
        problems.append(f"no {KEY_NAME}: retried joins would get tokens that do not work")
    elif key.stat().st_size != KEY_BYTES:
        problems.append(f"{KEY_NAME}: {key.stat().st_size} bytes, expected {KEY_BYTES}")
    if (directory / MANIFEST_NAME).exists():
        try:
            verify_backup(directory)
        except Refused as error:
            problems.append(str(error))
    return {"directory": str(directory), "schema_version": version, "counts": found,
            "integrity": "ok" if integrity == ["ok"] else "failed", "problems": problems}


def health(target: str | None, service: str, timeout_s: float, pid: int | None = None) -> str:
    """The health status a running server reports for ``service``: at ``target``, else at the
    port of the tapis-server process ``pid`` (default: PID 1, the container's), read from its
    own flags and TAPIS_* variables as it parsed them: the check follows ``--port 6000`` as
    well as ``TAPIS_PORT``."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from tapis_service.healthcheck import channel_to

    tls = bool(os.environ.get("TAPIS_TLS_CERT"))
    if target is None:
        target, tls = _server_target(Path(f"/proc/{pid or 1}"))
    with channel_to(target, tls, os.environ) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"UNREACHABLE ({error.code().name})"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


def _server_target(process: Path) -> tuple[str, bool]:
    """host:port that the server process ``process`` (a /proc entry) listens on, and whether
    it serves TLS there."""
    from tapis_service import configuration

    try:
        argv = (process / "cmdline").read_bytes().split(b"\0")[:-1]
        environ = dict(item.split(b"=", 1) for item in
                       (process / "environ").read_bytes().split(b"\0") if b"=" in item)
    except OSError as error:
        raise Refused(f"cannot read the server's command line ({error}): give --target") \
            from None
    words = [word.decode() for word in argv]
    flags = next((words[i + 1:] for i, word in enumerate(words)
                  if word.endswith("tapis-server") or word == "tapis_service.main"), None)
    if flags is None:
        raise Refused(f"{process} is not a tapis-server ({' '.join(words)[:80]}): give "
                      "--target")
    settings = configuration.parse(flags, {k.decode(): v.decode() for k, v in environ.items()})
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.host,
                                                                        settings.host)
    target = f"[{host}]:{settings.port}" if ":" in host else f"{host}:{settings.port}"
    return target, settings.tls_cert is not None


def _version() -> str:
    from tapis_service.startup import version

    return version()


# --- the command line --------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(prog="tapis-admin", description=__doc__.split("\n")[0])
    commands = result.add_subparsers(dest="command", required=True)
    made = commands.add_parser("backup", help="a consistent copy of a data directory, online")
    made.add_argument("--data-dir", type=Path, required=True)
    made.add_argument("out", type=Path, help="a new (or empty) directory")
    restored = commands.add_parser("restore", help="a backup into an empty data directory")
    restored.add_argument("backup", type=Path)
    restored.add_argument("data_dir", type=Path)
    checked = commands.add_parser("check", help="integrity, schema version, counts")
    checked.add_argument("directory", type=Path)
    probed = commands.add_parser("health", help="a running server's health (HEALTHCHECK)")
    probed.add_argument("--service", default="",
                        help='"" (readiness, the default) or liveness')
    probed.add_argument("--target", default=None, help="HOST:PORT (default: PID 1's port)")
    probed.add_argument("--pid", type=int, default=None,
                        help="the server's process id (default: 1, a container's server)")
    probed.add_argument("--timeout", type=float, default=3.0)
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
            report = check(args.directory)
            print(json.dumps(report, indent=2))
            raise SystemExit(1 if report["problems"] else 0)
        else:
            status = health(args.target, args.service, args.timeout, args.pid)
            print(status)
            raise SystemExit(0 if status == "SERVING" else 1)
    except Refused as error:
        print(f"tapis-admin: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
