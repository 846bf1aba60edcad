"""The clients' tests run in English whatever the machine's locale, and leave it so; the
``terminal`` fixture starts the CLI on a pty."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tapis_clients import i18n
from tests.clients.terminal import StartTerminal, Terminal


@pytest.fixture(autouse=True)
def english(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    i18n.use("en")
    yield
    i18n.use("en")


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[StartTerminal]:
    started: list[Terminal] = []

    async def start(*args: str, **options: object) -> Terminal:
        term = await Terminal.start(*args, state_dir=tmp_path, **options)  # type: ignore[arg-type]
        started.append(term)
        return term

    yield start
    for term in started:
        await term.close()
