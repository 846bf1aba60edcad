"""Every setting is declared once: its flag, its TAPIS_* variable and its docs row follow."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tapis_service import configuration
from tapis_service.configuration import BadSetting, parse
from tapis_service.settings import Declared, Settings, declared

BASE = {"TAPIS_DATA_DIR": "/srv/tapis", "TAPIS_DATABASE_URL": "postgresql://db/tapis"}
"""What some settings need beside them (``--store postgres`` needs a URL)."""


def other_value(item: Declared) -> tuple[str, Any]:
    """A value that is not the setting's default: as text, and as the parsed value."""
    if item.kind is bool:
        return "true", not item.default
    if item.option.choices:
        choice = next(c for c in item.option.choices if c != item.default)
        return choice, choice
    if item.name == "gc_thresholds":
        return "700,10", "700,10"
    if item.name == "trusted_proxies":
        return "10.0.0.0/8,fd00::1", "10.0.0.0/8,fd00::1"
    if item.kind is int:  # an optional one (None: off) takes a number too
        return str((item.default or 0) + 7), (item.default or 0) + 7
    if item.kind is float:
        return str(item.default + 2.5), item.default + 2.5
    if item.kind is Path:
        return "/var/lib/elsewhere", Path("/var/lib/elsewhere")
    return "node-b.example:50051", "node-b.example:50051"


def test_every_field_of_settings_is_a_declared_setting() -> None:
    names = [field.name for field in dataclasses.fields(Settings)]
    assert [item.name for item in declared()] == names
    flags = [item.flag for item in declared()]
    envs = [item.env for item in declared()]
    assert len(set(flags)) == len(flags) and len(set(envs)) == len(envs)
    assert all(env.startswith("TAPIS_") for env in envs)


def test_the_parser_has_one_flag_per_setting_and_nothing_else() -> None:
    parser = configuration.parser()
    flags = {option for action in parser._actions for option in action.option_strings
             if option.startswith("--") and not option.startswith("--no-")} - {"--help"}
    assert flags == {item.flag for item in declared()}
    assert parse([]) == Settings()


@pytest.mark.parametrize("item", declared(), ids=lambda item: item.name)
def test_every_setting_by_flag_and_by_variable(item: Declared) -> None:
    text, value = other_value(item)
    by_variable = parse([], {**BASE, item.env: text})
    assert getattr(by_variable, item.name) == value
    argv = ["--data-dir", BASE["TAPIS_DATA_DIR"], "--database-url", BASE["TAPIS_DATABASE_URL"]]
    argv += [item.flag] if item.kind is bool else [item.flag, text]
    assert getattr(parse(argv, {}), item.name) == value


def test_a_flag_wins_over_its_variable_and_the_variable_over_the_default() -> None:
    environ = {"TAPIS_PORT": "6000", "TAPIS_GRACE": "12.5", "TAPIS_LOG_LEVEL": "WARNING"}
    assert parse([], environ).port == 6000
    assert parse([], environ).grace_s == 12.5
    assert parse([], environ).log_level == "warning"
    assert parse(["--port", "7000"], environ).port == 7000
    assert parse(["--no-allow-stacked-decks"],
                 {"TAPIS_ALLOW_STACKED_DECKS": "yes"}).allow_stacked_decks is False


def test_the_store_follows_the_data_dir_or_the_url_unless_named() -> None:
    assert parse([], {}).store == "memory"
    assert parse([], {"TAPIS_DATA_DIR": "/d"}).store == "sqlite"
    assert parse([], BASE).store == "postgres"
    assert parse([], {**BASE, "TAPIS_STORE": "sqlite"}).store == "sqlite"
    with pytest.raises(BadSetting, match="needs --data-dir"):
        parse(["--store", "sqlite"], {})
    with pytest.raises(BadSetting, match="needs --database-url"):
        parse(["--advertise", "10.0.0.1:50051", "--data-dir", "/d"], {})


@pytest.mark.parametrize(("name", "text"), [
    ("TAPIS_PORT", "5o051"), ("TAPIS_GRACE", "soon"), ("TAPIS_EVENT_LOOP", "pigeon"),
    ("TAPIS_ALLOW_STACKED_DECKS", "maybe"), ("TAPIS_GC_THRESHOLDS", "many")])
def test_a_bad_variable_is_refused_with_its_name(name: str, text: str) -> None:
    with pytest.raises(BadSetting, match=name if name != "TAPIS_GC_THRESHOLDS"
                       else "--gc-thresholds"):
        parse([], {name: text})


def test_variables_that_name_no_setting_are_ignored() -> None:
    """Kubernetes sets TAPIS_SERVICE_HOST, TAPIS_PORT_50051_TCP... for a Service named tapis."""
    environ = {"TAPIS_SERVICE_HOST": "10.0.0.1", "TAPIS_PORT_50051_TCP": "tcp://10.0.0.1:50051"}
    assert parse([], environ) == Settings()


def test_the_docs_tables_are_generated_from_the_declarations() -> None:
    for path, text in configuration.expected_docs().items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.name}'s settings table is out of date: run `make settings-docs`"
    operations = (configuration.ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    for item in declared():
        assert f"| `{item.env}` |" in operations


def test_a_bad_variable_stops_the_real_server_with_one_line() -> None:
    refused = subprocess.run([sys.executable, "-m", "tapis_service.main"],
                             env={**os.environ, "TAPIS_PORT": "5o051"},
                             capture_output=True, timeout=60, check=False)
    stderr = refused.stderr.decode()
    assert refused.returncode == 2, stderr
    assert stderr.splitlines() == [
        "tapis-server: refusing to start: TAPIS_PORT='5o051' is not a valid --port "
        "(invalid literal for int() with base 10: '5o051')"]


@pytest.mark.parametrize(("given", "meant"), [
    ("10.0.0.7:50051", "10.0.0.7:50051"), ("tapis-0.tapis:50051", "tapis-0.tapis:50051"),
    ("fd00:10:244::7:50051", "[fd00:10:244::7]:50051"), ("[::1]:50051", "[::1]:50051")])
def test_an_ipv6_advertise_address_gets_its_brackets(given: str, meant: str) -> None:
    """The manifests advertise $(POD_IP):50051, which is a bare IPv6 address on IPv6 clusters."""
    assert parse([], {**BASE, "TAPIS_ADVERTISE": given}).advertise == meant
