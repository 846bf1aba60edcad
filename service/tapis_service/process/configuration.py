"""The command line, the environment and the docs table, all made from ``settings.declared()``.

Precedence: a flag, else its ``TAPIS_*`` variable, else the declared default. A variable that
does not parse (``TAPIS_PORT=5o051``), or any value outside the setting's declared range
(``TAPIS_MAX_GAMES=-5``, ``TAPIS_METRICS_PORT=70000``, a ``mysql://`` database URL) is a
``BadSetting``: the server refuses to start with one line naming the setting, its variable and
what it takes (exit 2). Variables that name no setting are ignored (Kubernetes sets
``TAPIS_SERVICE_HOST`` and the like for a Service called ``tapis``).

``python -m tapis_service.process.configuration`` rewrites the settings tables of
docs/operations.md and docs/limits.md (``make settings-docs``); ``--check`` says whether they
are up to date.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tapis_service.door import capacity
from tapis_service.door.proxies import parse_networks
from tapis_service.settings import GROUPS, MAX_PORT, Declared, Settings, declared, redacted

PROG = "tapis-server"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


class BadSetting(ValueError):
    """A setting's value (from the environment or the flags' combination) is not acceptable."""


def convert(item: Declared, text: str) -> Any:
    """``text`` as the setting's value (raises ValueError with the reason)."""
    if item.kind is bool:
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise ValueError(f"not a boolean (one of {', '.join(TRUE + FALSE[:-1])})")
    value = item.kind(text)
    if item.option.choices and value not in item.option.choices:
        raise ValueError(f"not one of {', '.join(item.option.choices)}")
    return value


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment gives: field name -> value."""
    found: dict[str, Any] = {}
    for item in declared():
        text = environ.get(item.env)
        if text is None:
            continue
        if item.optional and text == "":
            found[item.name] = None
            continue
        try:
            found[item.name] = convert(item, text.lower() if item.option.choices else text)
        except ValueError as error:
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise BadSetting(f"{item.env}={shown!r} is not a valid {item.flag} "
                             f"({str(error) or 'invalid value'})") from None
    return found


def _shown(value: Any, item: Declared) -> str:
    """The value as a refusal shows it: a number as it is, text quoted and cut, a URL without
    its password."""
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    text = str(value)
    if item.option.schemes is not None:
        text = redacted(text)
    return repr(text if len(text) <= 60 else text[:60] + "…")


def check(item: Declared, value: Any) -> None:
    """Raises ``BadSetting`` when ``value`` is not one the setting takes (its range, a URL's
    scheme, a ``HOST:PORT``), naming the flag, the variable and what is allowed."""
    if value is None:
        return
    option = item.option
    if option.bounds is not None:
        wrong = value not in option.bounds
    elif option.schemes is not None:
        wrong = urllib.parse.urlsplit(str(value)).scheme.lower() not in option.schemes
    elif option.address:
        host, _, port = bracketed(str(value)).rpartition(":")
        wrong = not host or not port.isdigit() or not 1 <= int(port) <= MAX_PORT
    else:
        return
    if wrong:
        raise BadSetting(f"{item.flag} ({item.env}) is {_shown(value, item)}: it takes "
                         f"{option.allowed}")


def _default_text(item: Declared) -> str:
    if item.option.default_text is not None:
        return item.option.default_text
    if item.default is None:
        return "none"
    if item.kind is bool:
        return "on" if item.default else "off"
    if item.default == "":
        return "empty"
    return str(item.default)


def parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """``tapis-server``'s parser: one flag per setting, its default from the environment."""
    given = from_environment({} if environ is None else environ)
    result = argparse.ArgumentParser(
        prog=PROG, description="Run the Tapis game server.",
        epilog="Every flag has a TAPIS_* variable (shown in brackets) that gives its default. "
               "Exit status 2: the server refused to start (a damaged store, a directory or "
               "port in use, a bad setting); see docs/operations.md.")
    groups = {name: result.add_argument_group(title) for name, title in GROUPS.items()}
    for item in declared():
        default = given.get(item.name, None if item.name == "store" else item.default)
        help_text = f"{item.option.help} (default: {_default_text(item)}) [{item.env}]"
        if item.kind is bool:
            groups[item.option.group].add_argument(
                item.flag, dest=item.name, action=argparse.BooleanOptionalAction,
                default=default, help=help_text)
            continue
        kind: Any = str.lower if item.option.choices else item.kind
        groups[item.option.group].add_argument(
            item.flag, dest=item.name, type=kind, default=default, choices=item.option.choices,
            metavar=item.option.metavar or item.flag[2:].upper().replace("-", "_"),
            help=help_text)
    return result


def parse(argv: list[str] | None = None,
          environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from the flags and the environment (raises BadSetting; argparse exits 2
    with its usage on a bad flag)."""
    the_parser = parser(environ)
    values = vars(the_parser.parse_args(argv))
    for item in declared():
        check(item, values[item.name])
    if values["store"] is None:
        values["store"] = ("postgres" if values["database_url"]
                           else "sqlite" if values["data_dir"] else "memory")
    if values["store"] == "sqlite" and values["data_dir"] is None:
        raise BadSetting("--store sqlite needs --data-dir")
    if values["store"] == "postgres" and not values["database_url"]:
        raise BadSetting("--store postgres needs --database-url")
    if values["advertise"] and values["store"] != "postgres":
        raise BadSetting("--advertise (a cluster node) needs --database-url")
    if values["advertise"]:
        values["advertise"] = bracketed(values["advertise"])
    if values["gc_thresholds"]:
        from tapis_service.process import (
            gctune,  # (its metrics only when measuring: a fast refusal)
        )

        try:
            if min(gctune.thresholds(values["gc_thresholds"])) < 0:
                raise ValueError("negative")
        except ValueError:
            raise BadSetting(f"--gc-thresholds (TAPIS_GC_THRESHOLDS) is "
                             f"{values['gc_thresholds']!r}: it takes two whole numbers "
                             "GEN0,GEN1 from 0") from None
    try:
        parse_networks(values["trusted_proxies"])
    except ValueError as error:
        raise BadSetting(f"{error} (TAPIS_TRUSTED_PROXIES)") from None
    flags_of: dict[int, str] = {}
    for flag in ("--port", "--ws-port", "--health-port", "--metrics-port"):
        port = values[flag[2:].replace("-", "_")]
        if not port:  # 0: a free one, or off
            continue
        if port in flags_of:
            raise BadSetting(f"{flags_of[port]} and {flag} are both {port}: each needs a port "
                             "of its own")
        flags_of[port] = flag
    settings = Settings(**values)
    over = capacity.over_descriptors(settings, capacity.open_files_limit())
    if over is not None:
        raise BadSetting(over)
    return settings


def bracketed(address: str) -> str:
    """HOST:PORT with an IPv6 host in brackets (``fd00::7:50051`` -> ``[fd00::7]:50051``): a
    manifest's ``$(POD_IP):50051`` works on an IPv6 cluster too."""
    if address.startswith("[") or address.count(":") < 2:
        return address
    host, _, port = address.rpartition(":")
    return f"[{host}]:{port}"


# --- the docs tables ----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
TABLES = {ROOT / "docs" / "operations.md": tuple(GROUPS), ROOT / "docs" / "limits.md": ("limits",)}
BEGIN = "<!-- settings table: generated by `make settings-docs` from tapis_service/settings.py -->"
END = "<!-- end of the settings table -->"


def markdown(groups: tuple[str, ...]) -> str:
    """The table of the settings of these groups: flag, variable, default, the values it
    takes (anything else refuses the start), meaning."""
    lines = ["| flag | variable | default | takes | what |", "|---|---|---|---|---|"]
    for group in groups:
        for item in declared():
            if item.option.group != group:
                continue
            flag = item.flag + (f" {item.option.metavar}" if item.option.metavar else "")
            what = item.option.help.replace("|", "\\|")
            takes = item.option.allowed or ("on, off" if item.kind is bool else "a path"
                                               if item.kind is Path else "any text")
            lines.append(f"| `{flag}` | `{item.env}` | {_default_text(item)} | {takes} | "
                         f"{what} |")
    return "\n".join(lines)


def updated(text: str, groups: tuple[str, ...]) -> str:
    """``text`` with the table between the markers regenerated."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + markdown(groups) + "\n" + text[end:]


def expected_docs() -> dict[Path, str]:
    """Each docs page as it should read."""
    return {path: updated(path.read_text(encoding="utf-8"), groups)
            for path, groups in TABLES.items()}


def _main() -> None:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in expected_docs().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path.name)
            if not check:
                path.write_text(text, encoding="utf-8")
    if check and stale:
        raise SystemExit(f"out of date: {', '.join(stale)} (run `make settings-docs`)")


if __name__ == "__main__":
    _main()
