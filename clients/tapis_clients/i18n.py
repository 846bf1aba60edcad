"""The CLI's language: English (the texts in the code) or French (a gettext catalog).

The catalogs are ``locale/fr/LC_MESSAGES/*.po``: ``tapis.po`` for the generic texts and one per
game for its own (``GAME.po``), read, merged and compiled by Babel when the language is chosen,
so a fresh clone needs no build step. Texts are marked ``_("...")`` where they are said,
``N_("...")`` where they are only named (tables of texts, translated when shown), and
``ngettext`` for a count (``NP_`` names a singular and plural pair translated later).
``make messages`` (``tools/messages.py``) extracts the marked texts
into the templates (``tapis.pot``, ``GAME.pot``) and merges them into the French catalogs; a
test fails on a text its catalog lacks.
"""

from __future__ import annotations

import gettext
import io
import os
from collections.abc import Mapping
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

DOMAIN = "tapis"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES = ("en", "fr")
"""The languages the CLI speaks; English is the source."""

_translations: gettext.NullTranslations = gettext.NullTranslations()
_language = "en"


def language_from(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``--lang``, else the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set
    (``fr_FR.UTF-8`` is French); English for anything else."""
    if flag:
        return flag if flag in LANGUAGES else "en"
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        if value:
            return "fr" if value.lower().startswith("fr") else "en"
    return "en"


def catalog_path(lang: str, domain: str = DOMAIN) -> Path:
    """The catalog of ``domain`` (the generic texts, or a game's) in ``lang``."""
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{domain}.po"


def catalog_paths(lang: str) -> list[Path]:
    """Every catalog of ``lang``: the generic one first, then each game's."""
    first = catalog_path(lang)
    return [first, *sorted(path for path in first.parent.glob("*.po") if path != first)]


def load(lang: str) -> gettext.NullTranslations:
    """The translations of ``lang`` compiled from its catalogs, merged (none for English)."""
    if lang == "en":
        return gettext.NullTranslations()
    merged: Catalog | None = None
    for path in catalog_paths(lang):
        with path.open("rb") as source:
            catalog = read_po(source, locale=lang)
        if merged is None:
            merged = catalog
            continue
        for message in catalog:
            if not message.id or not message.string:
                continue
            known = merged.get(message.id)
            if known is None or not known.string:
                merged[message.id] = message
    compiled = io.BytesIO()
    write_mo(compiled, merged or Catalog(locale=lang))
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def use(lang: str) -> None:
    """Speak ``lang`` from now on."""
    global _translations, _language
    _translations = load(lang)
    _language = lang


def language() -> str:
    return _language


def _(message: str) -> str:
    """``message`` in the chosen language."""
    return _translations.gettext(message)


def N_(message: str) -> str:
    """Mark a text for the catalog without translating it yet."""
    return message


def NP_(singular: str, plural: str) -> tuple[str, str]:
    """Mark a text about a count (its singular and plural) without translating it yet."""
    return singular, plural


def ngettext(singular: str, plural: str, count: int) -> str:
    """The singular or plural form for ``count``, in the chosen language."""
    return _translations.ngettext(singular, plural, count)


def labelled(label: str, text: str) -> str:
    """``label: text``, punctuated as the reader's language does (``label : text`` in French):
    a colon is never glued to a text in code."""
    return _("{label}: {text}").format(label=label, text=text)


def then(first: str, second: str) -> str:
    """Two clauses, ``first; second`` (``first ; second`` in French)."""
    return _("{first}; {second}").format(first=first, second=second)
