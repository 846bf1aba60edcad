"""Every text the CLI marks for translation has its French in the catalog, with the same
placeholders; the catalog compiles."""

from __future__ import annotations

import re
from pathlib import Path

from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from tapis_clients import i18n

CLIENTS = Path(__file__).resolve().parents[2] / "clients" / "tapis_clients"
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
PLACEHOLDER = re.compile(r"\{(\w*)\}")


def marked() -> set[str | tuple[str, ...]]:
    found: set[str | tuple[str, ...]] = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
            str(CLIENTS), keywords=KEYWORDS, comment_tags=()):
        found.add(message if isinstance(message, str) else tuple(message))
    return found


def test_every_marked_text_is_translated_to_french() -> None:
    with i18n.catalog_path("fr").open("rb") as source:
        catalog = read_po(source, locale="fr")
    missing = []
    for message in marked():
        key = message[0] if isinstance(message, tuple) else message
        entry = catalog.get(key)
        if entry is None or not entry.string or (isinstance(entry.string, tuple)
                                                 and not all(entry.string)):
            missing.append(message)
            continue
        for translated in (entry.string if isinstance(entry.string, tuple) else (entry.string,)):
            assert set(PLACEHOLDER.findall(translated)) == set(PLACEHOLDER.findall(key)), key
    assert not missing, f"texts without French (run `make messages`, then translate): {missing}"


def test_the_catalog_compiles_and_translates() -> None:
    translations = i18n.load("fr")
    assert translations.gettext("reveal your top card") == "retourner votre carte du dessus"
    assert translations.ngettext("{count} try left", "{count} tries left", 2) == \
        "{count} essais restants"
