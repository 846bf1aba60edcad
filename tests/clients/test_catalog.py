"""Every text the CLI marks for translation has its French in its catalog (the generic one, or
its game's), with the same placeholders; the catalogs compile and merge."""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from tapis_clients import i18n
from tools.messages import domain_of, games, marked

PLACEHOLDER = re.compile(r"\{(\w*)\}")


@pytest.mark.parametrize("domain", [i18n.DOMAIN, *games()])
def test_every_marked_text_is_translated_to_french_in_its_catalog(domain: str) -> None:
    with i18n.catalog_path("fr", domain).open("rb") as source:
        catalog = read_po(source, locale="fr")
    missing = []
    for message in marked().get(domain, set()):
        key = message[0] if isinstance(message, tuple) else message
        entry = catalog.get(key)
        if entry is None or not entry.string or (isinstance(entry.string, tuple)
                                                 and not all(entry.string)):
            missing.append(message)
            continue
        for translated in (entry.string if isinstance(entry.string, tuple) else (entry.string,)):
            assert set(PLACEHOLDER.findall(translated)) == set(PLACEHOLDER.findall(key)), key
    assert not missing, f"texts without French (run `make messages`, then translate): {missing}"


def test_the_client_speaks_every_catalog_merged() -> None:
    """Each marked text reads, once the catalogs are merged, as its own catalog says."""
    found = marked()
    assert set(found) == {i18n.DOMAIN, *games()}
    assert domain_of("games/war.py") == "war" and domain_of("cli.py") == i18n.DOMAIN
    french = i18n.load("fr")
    for domain, texts in found.items():
        with i18n.catalog_path("fr", domain).open("rb") as source:
            catalog = read_po(source, locale="fr")
        for text in texts:
            if isinstance(text, str):
                assert french.gettext(text) == catalog[text].string, (domain, text)


def test_the_catalog_compiles_and_translates() -> None:
    translations = i18n.load("fr")
    assert translations.gettext("reveal your top card") == "retourner votre carte du dessus"
    assert translations.ngettext("{count} try left", "{count} tries left", 2) == \
        "{count} essais restants"
    assert translations.gettext("Lebanese") == "libanaise"  # from a game's catalog
