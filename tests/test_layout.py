"""The house rules a test can check: tests share helpers through ``tests/support/`` (or a helper
module beside them), never by importing a test module or a ``conftest``; measurement scripts
live in ``bench/``; a game is named only in its own files and its registries; the built web
client ships in the wheel; each room of the service imports only the floors below it."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import tapis_webclient
from tapis_engine.registry import DESCRIPTORS
from tests.support.layout import imported, is_test_module

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GAME_WORDS = ("basra", "boutons", "corse")
"""The game names issue 23's rule counts ("war" is inside common words: forward, aware)."""
MAX_FILES_NAMING_A_GAME = 3
"""The engine's registry, the service's adapters' index, the clients' games index."""


def test_no_module_of_the_suite_imports_a_test_module_or_a_conftest() -> None:
    checked = subprocess.run([sys.executable, "-m", "tests.support.layout"],
                             cwd=TESTS.parent, capture_output=True, text=True, timeout=120,
                             check=False)
    assert checked.returncode == 0, "share helpers through tests/support/:\n" + checked.stdout \
        + checked.stderr


def test_the_check_sees_an_import_of_a_test_module() -> None:
    tree = ast.parse("from tests.service.test_war_service import view_of\n"
                     "from tests.support import conftest\n")
    assert [m for m in imported(tree) if is_test_module(m)] == [
        "tests.service.test_war_service", "tests.support.conftest"]


def test_measurement_scripts_live_in_bench() -> None:
    scripts = [path.relative_to(TESTS) for path in TESTS.rglob("*.py")
               if "measure" in path.name]
    assert not scripts, f"move {scripts} to bench/tapis_bench/"


def files_naming(word: str, base: Path, *folders: str) -> list[str]:
    """The text files under ``base``'s ``folders`` that contain ``word`` (any case), but whose
    path there does not (a game's own files name it freely)."""
    found = []
    for folder in folders:
        for path in sorted((base / folder).rglob("*")):
            relative = path.relative_to(base).as_posix()
            if not path.is_file() or "__pycache__" in relative or word in relative.lower():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            if word in text.lower():
                found.append(relative)
    return found


def test_a_game_is_named_outside_its_own_files_only_by_the_registries() -> None:
    registered = {descriptor.rules.__module__.split(".")[1] for descriptor in DESCRIPTORS}
    assert set(GAME_WORDS) <= registered
    for word in GAME_WORDS:
        naming = files_naming(word, ROOT, "service", "clients/tapis_clients")
        assert len(naming) <= MAX_FILES_NAMING_A_GAME, \
            f"{word} is named in {naming}: read the registries (descriptors) instead"


def test_the_check_sees_a_game_named_in_a_generic_file(tmp_path: Path) -> None:
    (tmp_path / "service" / "basra").mkdir(parents=True)
    (tmp_path / "service" / "basra" / "rules.py").write_text("basra", encoding="utf-8")
    (tmp_path / "service" / "protocol.py").write_text("Basra's dealer", encoding="utf-8")
    assert files_naming("basra", tmp_path, "service") == ["service/protocol.py"]


def test_the_wheel_carries_every_file_of_the_built_web_client() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["tapis_webclient"]
    package = tapis_webclient.STATIC.parent
    files = [path.relative_to(package).as_posix() for path in tapis_webclient.STATIC.iterdir()]
    assert "index.html" in [name.rsplit("/", 1)[-1] for name in files]
    assert all(any(fnmatch(name, pattern) for pattern in patterns) for name in files), files


SERVICE = ROOT / "service" / "tapis_service"
FLOORS = {
    "process": 0,  # the top floor: wires the house (start-up, server, admin); nothing imports it
    "cluster": 1,  # a node among nodes: serves and relays calls through grpc/'s servicer
    "grpc": 2, "ws": 2,  # the transports: a call in, through the door, to the game API
    "game_api": 3,  # the service's operations, transport-free (game_api.py)
    "tables": 4,  # the tables held: lifecycle, host, actor, session, streams, recovery
    "codec": 5, "stores": 5,  # protobuf <-> engine; the journal and the results ledger
    "door": 6,  # identity, credentials, limits, log context: consulted above, calls none of them
    "observe": 7,  # the ground floor: metrics, logs, tracing, clock, refusals
    "settings": 8,  # the one settings table (settings.py), which imports nothing of the service
}
"""The rooms of ``service/tapis_service`` by floor, the top first. A module's room is the first
part of its path there (a folder, or ``game_api.py`` and ``settings.py`` alone); it imports its
own room and rooms on lower floors (larger numbers) only, never one on its floor or above. An
import for type checking only (``if TYPE_CHECKING:``) may look up: it names a shape and runs
nothing (the codec names ``tables.session.Session``, whose fields it encodes)."""


def room_of(module: str) -> str | None:
    """The room of a dotted ``tapis_service`` module (None: the package itself)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "tapis_service" and len(parts) > 1 else None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under an ``if TYPE_CHECKING:``."""
    return {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
            and ast.unparse(node.test).endswith("TYPE_CHECKING") for inner in ast.walk(node)}


def floor_breaches(package: Path) -> list[str]:
    """Each module of ``package`` (a ``tapis_service``) that is in no room, and each import
    from one room into another on its floor or above."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.as_posix() == "__init__.py":
            continue
        room = relative.parts[0].removesuffix(".py")
        if room not in FLOORS:
            found.append(f"{relative.as_posix()} is in no room: place it in one of "
                         f"{sorted(FLOORS)}")
            continue
        here = ("tapis_service", *relative.with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level]) if node.level else ""
                module = ".".join(filter(None, (base, node.module)))
                targets = [f"{module}.{alias.name}" for alias in node.names] \
                    if module == "tapis_service" else [module]
            else:
                continue
            for target in targets:
                other = room_of(target)
                if other is not None and other != room and other in FLOORS \
                        and FLOORS[other] <= FLOORS[room]:
                    found.append(f"{relative.as_posix()}:{node.lineno} ({room}, floor "
                                 f"{FLOORS[room]}) imports {target} ({other}, floor "
                                 f"{FLOORS[other]})")
    return found


def test_each_room_of_the_service_imports_only_the_floors_below_it() -> None:
    assert floor_breaches(SERVICE) == []


def test_the_engine_under_every_room_imports_none_of_them() -> None:
    found = []
    for path in sorted((ROOT / "service" / "tapis_engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {name}" for name in names
                      if name.split(".")[0] == "tapis_service"]
    assert found == []


def test_the_check_sees_an_upward_import_and_a_module_in_no_room(tmp_path: Path) -> None:
    package = tmp_path / "tapis_service"
    for name, text in {
            "__init__.py": "",
            "settings.py": "",
            "observe/metrics.py": "from tapis_service.process.server import CannotListen\n",
            "codec/wire.py": "from typing import TYPE_CHECKING\n"
                             "from tapis_service.observe import metrics\n"
                             "from .convert import x\n"
                             "if TYPE_CHECKING:\n    from tapis_service.tables.session import S\n",
            "stores/store.py": "from tapis_service import settings, codec\n"
                               "from ..tables import recovery\n",
            "helpers.py": "",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    assert floor_breaches(package) == [
        "helpers.py is in no room: place it in one of " + str(sorted(FLOORS)),
        "observe/metrics.py:1 (observe, floor 7) imports tapis_service.process.server "
        "(process, floor 0)",
        "stores/store.py:1 (stores, floor 5) imports tapis_service.codec (codec, floor 5)",
        "stores/store.py:2 (stores, floor 5) imports tapis_service.tables (tables, floor 4)"]


MAX_LINES = 500
"""No module of the service is longer (issue 23): one job each."""
MAX_LINES_OF = {"service/tapis_service/tables/host.py": 400,
                "service/tapis_service/cluster/node.py": 400}
"""The tables held and the cluster member stay shorter still: their jobs live beside them."""


def test_no_module_of_the_service_is_too_long() -> None:
    long = {}
    for path in sorted((ROOT / "service").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES_OF.get(name, MAX_LINES):
            long[name] = lines
    assert long == {}, f"split these modules: {long}"


TABLE_MAPS = frozenset({"by_game", "_counts", "_held_by", "_create_requests", "_unarmed",
                        "at_rest", "sessions", "live", "creating", "resting", "unavailable",
                        "quarantined", "held_by", "create_requests"})
"""The host's one map of its tables (``lifecycle.Tables.by_game``), what is kept beside it
(counts per state and per backend, request ids, a session's rest flag) and the per-state maps
it replaced: written by the lifecycle module only (issue 32)."""
ONE_MAP = frozenset({"by_game", "_counts", "_held_by"})
"""Within the lifecycle module, written by its one transition function (``Tables._move``)."""
MUTATORS = frozenset({"pop", "popitem", "clear", "update", "setdefault", "__setitem__",
                      "__delitem__", "move_to_end"})
LIFECYCLE = "service/tapis_service/tables/lifecycle.py"
HOST = "service/tapis_service/tables/host.py"


def _map_named(node: ast.AST, maps: frozenset[str]) -> str | None:
    """The table map an expression is (``x.by_game``, ``x.by_game[k]``), if any."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in maps:
        return node.attr
    return None


def table_map_writes(tree: ast.AST, maps: frozenset[str] = TABLE_MAPS) -> list[str]:
    """Where ``tree`` changes a table map: an item set or deleted, a mutating call, or the
    attribute bound."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS and _map_named(node.func.value, maps):
            found.append((node.lineno, f".{_map_named(node.func.value, maps)}.{node.func.attr}()"))
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                name = _map_named(one, maps)
                if name is not None:
                    found.append((one.lineno, f".{name} written"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_only_the_lifecycle_module_changes_a_tables_state() -> None:
    writers = {}
    for path in sorted((ROOT / "service").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name == LIFECYCLE:
            continue
        found = table_map_writes(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            writers[name] = found
    assert writers == {}, f"change a table's state through lifecycle.Tables: {writers}"


def test_only_the_one_transition_function_writes_the_map() -> None:
    tree = ast.parse((ROOT / LIFECYCLE).read_text(encoding="utf-8"))
    tables = next(node for node in tree.body
                  if isinstance(node, ast.ClassDef) and node.name == "Tables")
    writers = {}
    for method in tables.body:
        if isinstance(method, ast.FunctionDef) and method.name not in {"_move", "__init__"}:
            found = table_map_writes(method, ONE_MAP)
            if found:
                writers[method.name] = found
    assert writers == {}, f"change a table's state through Tables._move: {writers}"
    moves = [node for node in ast.walk(tables) if isinstance(node, ast.FunctionDef)
             and node.name == "_move"]
    assert len(moves) == 1 and table_map_writes(moves[0], ONE_MAP)


def test_the_host_holds_one_map_of_its_tables() -> None:
    tree = ast.parse((ROOT / HOST).read_text(encoding="utf-8"))
    host = next(node for node in tree.body
                if isinstance(node, ast.ClassDef) and node.name == "GameHost")
    bound: dict[str, ast.expr] = {}
    for node in ast.walk(host):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id == "self":
                bound[target.attr] = value
    maps = [attr for attr, value in bound.items() if isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name) and value.func.id == "Tables"]
    assert maps == ["tables"]
    views = [attr for attr, value in bound.items() if "tables" in ast.unparse(value)
             and attr != "tables"]
    assert views == []  # no other name for the map, nor for a part of it
    assert not TABLE_MAPS & set(bound)


def test_the_check_sees_a_table_map_written() -> None:
    tree = ast.parse("host.sessions[g] = s\ndel tables.by_game[g]\nhost.resting.pop(g)\n"
                     "session.at_rest = True\nself.sessions = self.tables.by_game\n"
                     "host.tables.session(g)\nself._counts[s], x = 1, 2\n")
    assert table_map_writes(tree) == [
        "line 1: .sessions written", "line 2: .by_game written", "line 3: .resting.pop()",
        "line 4: .at_rest written", "line 5: .sessions written", "line 7: ._counts written"]
