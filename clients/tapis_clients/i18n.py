"""The CLI's language: English (the texts in the code) or French (a gettext catalog).

The catalog is ``locale/fr/LC_MESSAGES/tapis.po``, read and compiled by Babel when the language
is chosen, so a fresh clone needs no build step. Texts are marked ``_("...")`` where they are
said, ``N_("...")`` where they are only named (tables of texts, translated when shown), and
``ngettext`` for a count. ``make messages`` extracts the marked texts into ``tapis.pot`` and
merges them into the French catalog; a test fails on a text the catalog lacks.
"""

from __future__ import annotations

import gettext
import io
import os
from collections.abc import Mapping
from pathlib import Path

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


def catalog_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def load(lang: str) -> gettext.NullTranslations:
    """The translations of ``lang`` compiled from its catalog (none for English)."""
    if lang == "en":
        return gettext.NullTranslations()
    with catalog_path(lang).open("rb") as source:
        catalog = read_po(source, locale=lang)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
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


def ngettext(singular: str, plural: str, count: int) -> str:
    """The singular or plural form for ``count``, in the chosen language."""
    return _translations.ngettext(singular, plural, count)
