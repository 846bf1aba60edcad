"""Every setting is declared once: its flag, its TAPIS_* variable and its docs row follow."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tapis_service.door import capacity
from tapis_service.process import configuration
from tapis_service.process.configuration import BadSetting, parse
from tapis_service.settings import Declared, Settings, declared

NUMBERS = [item for item in declared() if item.kind in (int, float)]
URLS = [item for item in declared() if item.option.schemes]
ADDRESSES = [item for item in declared() if item.option.address]
SERVER = Path(sys.executable).with_name("tapis-server")
"""The installed command (its entry point reads the settings before anything else)."""

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
        bounds = item.option.bounds
        other = item.default + 2.5
        if bounds is not None and other > bounds.high:  # a share, say: within its range
            other = (bounds.low + item.default) / 2
        return str(other), other
    if item.kind is Path:
        return "/var/lib/elsewhere", Path("/var/lib/elsewhere")
    if item.option.schemes:
        return f"{item.option.schemes[-1]}://db.example/other", \
            f"{item.option.schemes[-1]}://db.example/other"
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
    refused = subprocess.run([sys.executable, "-m", "tapis_service.process.main"],
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


def test_every_number_declares_a_range_that_holds_its_default() -> None:
    assert NUMBERS and URLS and ADDRESSES
    for item in NUMBERS:
        assert item.option.bounds is not None, f"{item.name} declares no range"
        assert item.default is None or item.default in item.option.bounds, item.name


def refused(item: Declared, text: str) -> str:
    """The one line ``parse`` refuses the variable's ``text`` with."""
    with pytest.raises(BadSetting) as refusal:
        parse([], {**BASE, item.env: text})
    return str(refusal.value)


def outside(item: Declared) -> list[str]:
    """Values just beyond each end of the setting's range, as text."""
    bounds = item.option.bounds
    assert bounds is not None
    step = 1 if item.kind is int else 0.001
    below = bounds.low if bounds.above else bounds.low - step
    found = [str(int(below) if item.kind is int else below),
             str(int(bounds.high + step) if item.kind is int else bounds.high + step)]
    return found + (["nan", "inf", "-inf"] if item.kind is float else [])


@pytest.mark.parametrize("item", NUMBERS, ids=lambda item: item.name)
def test_each_end_of_a_range_is_taken_and_beyond_it_the_start_is_refused(
        item: Declared, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capacity, "open_files_limit", lambda: 1 << 40)  # the ranges alone
    bounds = item.option.bounds
    assert bounds is not None
    step = 0.001 if bounds.above else 0
    for end in (bounds.low + step, bounds.high):
        value = item.kind(end)
        assert getattr(parse([], {**BASE, item.env: str(value)}), item.name) == value
    for text in outside(item):
        line = refused(item, text)
        assert item.flag in line and item.env in line and str(bounds) in line, line
    # a flag is checked as its variable is
    argv = [item.flag, outside(item)[0]]
    with pytest.raises(BadSetting, match=item.env):
        parse(argv, BASE)


@pytest.mark.parametrize("item", URLS, ids=lambda item: item.name)
def test_a_url_of_another_scheme_is_refused_without_its_password(item: Declared) -> None:
    assert item.option.schemes is not None
    for scheme in item.option.schemes:
        url = f"{scheme}://tapis:pw@db:5432/tapis"
        assert getattr(parse([], {item.env: url}), item.name) == url
    for url in ("mysql://tapis:s3cret@db/tapis", "db:5432/tapis", "http://db/tapis"):
        line = refused(item, url)
        assert item.env in line and "postgresql://" in line and "s3cret" not in line, line


@pytest.mark.parametrize("item", ADDRESSES, ids=lambda item: item.name)
def test_an_address_needs_a_host_and_a_port_from_1_to_65535(item: Declared) -> None:
    for text in ("node-b", "node-b:0", "node-b:70000", ":50051", "node-b:http"):
        assert item.env in refused(item, text)
    assert getattr(parse([], {**BASE, item.env: "node-b:65535"}), item.name) == "node-b:65535"


ISSUE_37 = {
    "TAPIS_MAX_GAMES": "-5", "TAPIS_SNAPSHOT_EVERY": "0", "TAPIS_STREAM_QUEUE_SIZE": "0",
    "TAPIS_MAX_STREAMS_PER_TABLE": "0", "TAPIS_SLAP_RATE": "nan", "TAPIS_DB_WAIT": "-3",
    "TAPIS_GRACE": "-1", "TAPIS_KEEPALIVE_TIME_MS": "-1", "TAPIS_NODE_TTL": "0",
    "TAPIS_CREATE_RATE": "-1", "TAPIS_DATABASE_URL": "mysql://tapis:s3cret@db/tapis",
    "TAPIS_METRICS_PORT": "70000"}
"""The values an operator tried (issue 37): each started a server, or ended in a traceback."""


@pytest.mark.parametrize(("name", "text"), ISSUE_37.items(), ids=list(ISSUE_37))
def test_an_out_of_range_variable_stops_the_real_server_with_one_line_within_2_s(
        name: str, text: str) -> None:
    item = next(item for item in declared() if item.env == name)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TAPIS_")}
    started = time.monotonic()
    result = subprocess.run([str(SERVER)], env={**environ, name: text}, capture_output=True,
                            timeout=60, check=False)
    elapsed = time.monotonic() - started
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(f"tapis-server: refusing to start: {item.flag} ({name}) is ")
    assert stderr.rstrip().endswith(f"it takes {item.option.allowed}")
    assert "s3cret" not in stderr
    assert elapsed < 2.0, f"{elapsed:.2f} s"


def test_a_bad_setting_is_refused_before_the_server_is_imported() -> None:
    """The entry point checks the settings before importing grpc, asyncpg or the server."""
    probe = ("import sys\n"
             "from tapis_service.process import entry\n"
             "sys.argv = ['tapis-server', '--max-games', '0']\n"
             "try:\n    entry.main()\n"
             "except SystemExit as stop:\n"
             "    print(stop.code, sorted(m for m in ('grpc', 'asyncpg',"
             " 'tapis_service.process.main') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60,
                            check=True)
    assert result.stdout.decode().split() == ["2", "[]"]


def test_connection_caps_beyond_the_descriptor_limit_are_refused_at_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the limit grpc's core fails each accept and retries (new clients wait for their
    deadline), and a WebSocket port left 16 connections resets the 17th: refused at start,
    with the figures and what to change."""
    monkeypatch.setattr(capacity, "open_files_limit", lambda: 1024)
    assert parse(["--max-connections", "768"], BASE).max_connections == 768  # 1024 - 256
    with pytest.raises(BadSetting, match=r"--max-connections 769 is more than the 768 "
                                         r"connections .* \(ulimit -n 1024, less 256"):
        parse(["--max-connections", "769"], BASE)
    with pytest.raises(BadSetting, match="less 16 for the WebSocket port"):
        parse(["--max-connections", "768", "--ws-port", "8080"], BASE)
    # the port's share: the descriptors but 256 and gRPC's (half the rest when not set)
    assert parse(["--ws-port", "8080", "--ws-max-sockets", "384"], BASE).ws_max_sockets == 384
    with pytest.raises(BadSetting, match=r"--ws-max-sockets 385 is more than the 384 "):
        parse(["--ws-port", "8080", "--ws-max-sockets", "385"], BASE)
    with pytest.raises(BadSetting, match=r"--ws-max-sockets 100 is more than the 68 .* "
                                         r"gRPC's 700"):
        parse(["--ws-port", "8080", "--ws-max-sockets", "100", "--max-connections", "700"],
              BASE)
    assert parse(["--ws-max-sockets", "5000"], BASE).ws_max_sockets == 5000  # no port: moot


def test_two_servers_on_one_port_are_refused_by_name() -> None:
    with pytest.raises(BadSetting, match="--port and --metrics-port are both 9000: each "
                                         "needs a port of its own"):
        parse(["--port", "9000", "--metrics-port", "9000"], BASE)
    with pytest.raises(BadSetting, match="--ws-port and --health-port are both 8080"):
        parse(["--ws-port", "8080", "--health-port", "8080"], BASE)
    settings = parse(["--port", "0", "--ws-port", "0", "--health-port", "0"], BASE)
    assert (settings.port, settings.ws_port, settings.health_port) == (0, 0, 0)  # free ones
