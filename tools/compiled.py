"""The compiled hot path: the one list of modules that mypyc compiles, and their build.

``make setup`` runs ``python -m tools.compiled``: it compiles ``MODULES`` with mypyc (shipped in
mypy, a dev dependency) and the machine's C compiler into extension modules beside their
sources (``service/**/*.so``, gitignored, as ``build/mypyc/``), which Python then imports
instead of the ``.py`` files. The ``.py`` files stay the source and the fallback: without a
compiler (or with ``TAPIS_PURE=1``) the build says so in one line and the pure modules run.

Each build records what it was built from (``build/mypyc/manifest.json``: a digest of every
compiled module and of the project's modules they import, mypy's version and the
interpreter's), so the next ``make setup`` does nothing when nothing changed and rebuilds
everything when something did: a stale ``.so`` never shadows an edited ``.py``
(``tests/engine/test_compiled.py`` fails on one). ``python -m tools.compiled --clean`` removes
the compiled modules (pure Python again); ``--list`` prints the modules.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE = ROOT / "service"
TARGET = ROOT / "build" / "mypyc"
MANIFEST = TARGET / "manifest.json"
GROUP = "tapis_engine.hotpath"
"""The shared library holding every compiled module (``tapis_engine/hotpath__mypyc*.so``; each
module gets a small shim of its own name beside its ``.py``)."""

PACKAGES = ("tapis_engine",)
"""Packages compiled whole: every module but the packages' ``__init__`` (they stay Python: the
shared library lives in ``tapis_engine``) and ``LEFT_OUT``."""
LEFT_OUT = ("tapis_engine.protocol",)
"""Modules of ``PACKAGES`` left in Python: ``protocol`` holds a generic dataclass
(``GameSetup``), which mypyc cannot compile into a native class, and nothing hot."""
EXTRA = (
    "tapis_service.codec.wire",
    "tapis_service.codec.adapters.cards",
    "tapis_service.codec.adapters.war",
    "tapis_service.codec.adapters.corse",
    "tapis_service.codec.adapters.boutons",
    "tapis_service.codec.adapters.basra",
    "tapis_service.tables.session",
    "tapis_service.tables.fanout",
    "tapis_service.tables.compaction",
    "tapis_service.ws.frames",
    "tapis_service.door.door",
    "tapis_service.door.logcontext",
    "tapis_service.door.limits",
    "tapis_service.tables.table_actor",
    "tapis_service.tables.table_writes",
    "tapis_service.tables.shielding",
    "tapis_service.tables.host",
    "tapis_service.tables.tokens",
    "tapis_service.tables.lifecycle",
    "tapis_service.ws.connection",
    "tapis_service.ws.resuming",
    "tapis_service.ws.sink",
    "tapis_service.ws.stepping",
    "tapis_service.game_api",
    "tapis_service.tables.autoplay",
    "tapis_service.tables.housekeeping",
    "tapis_service.observe.system_clock",
    "tapis_service.codec.moves",
    "tapis_service.codec.requests",
    "tapis_service.stores.checksums",
    "tapis_service.stores.sqlite_jobs",
)
"""Single modules compiled besides: the bytes of every event (the envelope and each game's body)
and the card converters they use; the session's log (the logged events the bytes are read from),
the fan-out that hands them to the streams and the compaction that keeps a finished game's as
bytes; on the request path, the socket's frames, its connection (a frame to a call through the
door, the answer back) and its sink onto picows, the door every transport passes (its bound, log
context and size limits), the GameApi's methods (its two server streams, async generators, are
``tables/event_streams.py``, Python) and the table's per-action work: the table actor, its
journal steps and the shielding of its inputs, the host, the seat tokens and the lifecycle's map
of the tables; the socket's request stepped without a task; the bots and timers re-armed, the
table's last use noted, the system clock and a person's action converted, which every action
calls from compiled code (the compaction is per game, but O(events): under ``bench-peers``'s
load its Python was ~3.5 % of the server's samples); and the SQLite store's per-write work
(``stores/sqlite_jobs.py``: a write handed from the loop, the batch's statements on the writer
thread, the outcomes settled back) with each journal entry's canonical JSON
(``stores/checksums.py``). The rest of the request path stays Python:
docs/performance.md ("The door and the frames", "The connection and the GameApi", "The table
actor and the host") says why, module by module (async generators, subclasses of Cython or
builtin classes, a test's subclass, what did not pay). A compiled class must not annotate again
an attribute its base declares: mypyc 2.4 then shows it twice to the garbage collector
(``tests/engine/test_compiled.py`` checks the generated C); and mypyc drops the cause of ``raise
... from``: set ``__cause__`` where it is read."""


def _module_path(module: str) -> Path:
    return SERVICE.joinpath(*module.split(".")).with_suffix(".py")


def modules() -> list[str]:
    """Every compiled module, by name, sorted."""
    names = list(EXTRA)
    for package in PACKAGES:
        for path in sorted(SERVICE.joinpath(package).rglob("*.py")):
            name = ".".join(path.relative_to(SERVICE).with_suffix("").parts)
            if path.name != "__init__.py" and name not in LEFT_OUT:
                names.append(name)
    return sorted(names)


def _imported(path: Path) -> set[Path]:
    """The project's modules that ``path`` imports (their types are compiled in)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            candidate = _module_path(name)
            package = SERVICE.joinpath(*name.split("."), "__init__.py")
            found.update(p for p in (candidate, package) if p.is_file())
    return found


def _sources() -> list[Path]:
    """The compiled modules' files and the project's modules they import."""
    compiled = [_module_path(name) for name in modules()]
    every = set(compiled)
    for path in compiled:
        every |= _imported(path)
    return sorted(every)


def _fingerprint() -> dict[str, str]:
    import mypy.version

    digests = {str(path.relative_to(ROOT)): hashlib.sha256(path.read_bytes()).hexdigest()
               for path in _sources()}
    return {"mypy": mypy.version.__version__, "python": sys.version,
            "modules": " ".join(modules()),
            "build": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(), **digests}


def built() -> list[Path]:
    """The compiled files beside the sources (the shims and the shared library), of the modules
    listed now and of those the last build listed (a module taken off the list leaves no
    shim behind)."""
    try:
        before = json.loads(MANIFEST.read_text())["modules"].split()
    except (OSError, ValueError, KeyError):
        before = []
    found: list[Path] = []
    for name in {*modules(), *before, f"{GROUP}__mypyc"}:
        path = SERVICE.joinpath(*name.split("."))
        found += path.parent.glob(f"{path.name}.*.so")
    return sorted(found)


def fresh() -> bool:
    """Whether the compiled modules were built from the sources as they are now."""
    try:
        recorded = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return False
    return bool(built()) and recorded == _fingerprint()


def clean() -> None:
    """Remove the compiled modules and their build: the pure-Python modules run."""
    for path in built():
        path.unlink()
    shutil.rmtree(TARGET, ignore_errors=True)
    shutil.rmtree(ROOT / "build" / "compiled", ignore_errors=True)


def _compile_in_parallel() -> None:
    """Have setuptools compile an extension's C files side by side (one job per processor)
    rather than one after the other: the shared library is one C file per module."""
    from concurrent.futures import ThreadPoolExecutor
    from distutils import ccompiler  # setuptools' own, once setuptools is imported
    from typing import Any

    def compile(self: Any, sources: list[str], output_dir: str | None = None,
                macros: Any = None, include_dirs: Any = None, debug: bool = False,
                extra_preargs: Any = None, extra_postargs: Any = None,
                depends: Any = None) -> list[str]:
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(one, objects))
        return objects

    ccompiler.CCompiler.compile = compile  # type: ignore[method-assign,assignment]


def build() -> None:
    """Compile ``modules()`` in place (a compiler job per processor, -O2)."""
    import setuptools
    from mypyc.build import mypycify

    clean()
    paths = [str(_module_path(name).relative_to(ROOT)) for name in modules()]
    extensions = mypycify(paths, opt_level="2", debug_level="0", group_name=GROUP,
                          multi_file=True, target_dir=str(TARGET.relative_to(ROOT)))
    for extension in extensions:  # mypyc writes a dotted group's headers under its package
        extension.include_dirs.append(str(TARGET / GROUP.rpartition(".")[0]))
    _compile_in_parallel()
    setuptools.setup(
        name="tapis-compiled", ext_modules=extensions, package_dir={"": "service"},
        script_args=["-q", "build_ext", "--inplace", "--parallel", str(os.cpu_count() or 1),
                     "--build-temp", "build/compiled/temp", "--build-lib", "build/compiled/lib"])
    MANIFEST.write_text(json.dumps(_fingerprint(), indent=1, sort_keys=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--list", action="store_true", help="print the compiled modules")
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.list:
        print("\n".join(modules()))
        return 0
    if args.clean or os.environ.get("TAPIS_PURE"):
        clean()
        return 0
    if fresh():
        return 0
    started = time.monotonic()
    print(f"compiling the hot path with mypyc ({len(modules())} modules)...", file=sys.stderr)
    log = TARGET.parent / "compiled.log"
    log.parent.mkdir(exist_ok=True)
    with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)  # the compiler's output too
        os.dup2(out.fileno(), 2)
        try:
            build()
            failure = None
        except (Exception, SystemExit) as error:  # the pure modules are the fallback
            failure = f"{type(error).__name__}: {error}".strip()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    if failure is not None:
        clean()
        errors = [line for line in log.read_text().splitlines() if "error" in line]
        reason = (errors[0] if errors else failure.splitlines()[0])[:120]
        print(f"the hot path is not compiled ({reason}; "
              f"{log.relative_to(ROOT)}): the pure-Python modules run", file=sys.stderr)
        return 0
    print(f"compiled the hot path in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
