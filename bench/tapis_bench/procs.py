"""Server and load-generator processes for the benchmarks."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    """Until the server accepts connections."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=0.5)
                return
            except grpc.FutureTimeoutError:
                continue
    raise RuntimeError("the server did not start")


def sqlite_available() -> bool:
    return importlib.util.find_spec("tapis_service.stores.sqlite_store") is not None


@contextmanager
def servers(wanted: dict[str, tuple[str, str]], profile: Path | None = None,
            extra_args: dict[str, list[str]] | None = None,
            env: dict[str, dict[str, str]] | None = None,
            pythons: dict[str, str] | None = None
            ) -> Iterator[dict[str, tuple[int, int]]]:
    """Server processes started side by side: name → (``tapis``, ``bare`` (on uvloop, as
    Tapis) or ``bare-asyncio``, store); yields name → (port, pid). With ``profile``, every
    tapis server runs under pyinstrument; ``extra_args`` and ``env`` (by name) add to a
    server's command line and environment; ``pythons`` (by name) runs a server with another
    interpreter (another source tree's virtualenv: ``make bench ARGS="--compare TREE"``)."""
    processes: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    with tempfile.TemporaryDirectory(prefix="tapis-bench-") as data_dir:
        try:
            for name, (kind, store) in wanted.items():
                port = free_port()
                python = (pythons or {}).get(name, sys.executable)
                if kind in ("bare", "bare-asyncio"):
                    command = [python, "-m", "tapis_bench.bare", str(port),
                               "--loop", "uvloop" if kind == "bare" else "asyncio"]
                else:
                    # the load chooses seeds and creates thousands of tables from one address
                    command = [python, "-m", "tapis_service.process.main", "--port", str(port),
                               "--store", store, "--log-level", "warning",
                               "--allow-stacked-decks", "--create-rate", "0",
                               "--keyless-create-rate", "0", "--join-rate", "0", "--list-rate", "0",
                               "--keyless-max-tables", "0"]
                    if store == "sqlite":
                        command += ["--data-dir", str(Path(data_dir) / name)]
                    command += (extra_args or {}).get(name, [])
                    if profile is not None:
                        command[1:1] = ["-m", "pyinstrument", "--renderer", "text",
                                        "--outfile", str(profile)]
                environment = {**os.environ, **(env or {}).get(name, {})}
                processes[name] = (port, subprocess.Popen(command, env=environment))
            for port, process in processes.values():
                wait_ready(port, process)
            yield {name: (port, process.pid) for name, (port, process) in processes.items()}
        finally:
            for _, process in processes.values():
                # pyinstrument writes its profile on a clean exit; the others need no grace
                process.terminate() if profile is not None else process.kill()
            for _, process in processes.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def load(config: dict[str, Any]) -> dict[str, Any]:
    """Run the load generator in its own process; its figures."""
    done = subprocess.run([sys.executable, "-m", "tapis_bench.load", json.dumps(config)],
                          check=True, stdout=subprocess.PIPE, text=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures
