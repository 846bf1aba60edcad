"""The clients' tests run in English whatever the machine's locale, and leave it so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tapis_clients import i18n


@pytest.fixture(autouse=True)
def english(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    i18n.use("en")
    yield
    i18n.use("en")
