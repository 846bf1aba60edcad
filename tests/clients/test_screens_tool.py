"""tools/screens.py draws the client's screens as SVG (the README's pictures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.server import ServerFactory
from tools import screens


@pytest.mark.parametrize(("name", "shown"), [("war", "Bataille !"), ("war-fr", "partie 1"),
                                             ("corse", "you slapped first")])
async def test_a_scene_is_drawn_as_svg(make_server: ServerFactory, tmp_path: Path, name: str,
                                       shown: str) -> None:
    h = await make_server()
    lang, scene = screens.SCENES[name]
    path = await screens.shoot(name, lang, scene, f"127.0.0.1:{h.running.port}", tmp_path)
    svg = path.read_text()
    assert svg.startswith("<svg") and shown.replace(" ", "&#160;") in svg


def test_every_picture_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name in screens.SCENES:
        assert f"docs/screens/{name}.svg" in readme
        assert (screens.OUT / f"{name}.svg").exists()
