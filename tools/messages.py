"""``make messages``: the CLI's marked texts, extracted into one template per domain and merged
into each language's catalog of that domain.

A game's texts (those marked in a file whose path names the game: ``games/basra.py``,
``strategies/corse.py``) go to the game's own catalog, ``locale/GAME.pot`` and
``locale/LANG/LC_MESSAGES/GAME.po``; every other text to ``tapis.pot`` and ``tapis.po``. The
games are the modules of the clients' registry package (``tapis_clients.games``), so a new game
needs no edit here. A catalog a language lacks is created, with the translations that language
already has in its other catalogs (a text moving between domains keeps its translation).
``tapis_clients.i18n`` loads and merges a language's catalogs.
"""

from __future__ import annotations

import pkgutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

import tapis_clients.games
from tapis_clients import i18n

CLIENTS = Path(i18n.__file__).resolve().parent
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2), "NP_": (1, 2)}
Message = str | tuple[str, ...]


def games() -> list[str]:
    """The names of the games the clients know (their modules in ``tapis_clients.games``)."""
    return sorted(module.name for module in pkgutil.iter_modules(tapis_clients.games.__path__))


def domain_of(path: str) -> str:
    """The catalog of the texts marked in ``path`` (relative to the clients' package)."""
    found = [game for game in games() if game in path]
    return found[0] if len(found) == 1 else i18n.DOMAIN


def marked() -> dict[str, set[Message]]:
    """Every marked text, by the domain of the file that marks it."""
    found: dict[str, set[Message]] = defaultdict(set)
    for path, _line, message, _comments, _context in extract_from_dir(
            str(CLIENTS), keywords=KEYWORDS, comment_tags=()):
        found[domain_of(path)].add(message if isinstance(message, str) else tuple(message))
    return dict(found)


def translated(string: str | Sequence[str] | None) -> bool:
    """A translation with every form filled."""
    if isinstance(string, str) or string is None:
        return bool(string)
    return bool(string) and all(string)


def template(messages: Iterable[Message]) -> Catalog:
    catalog = Catalog(project="tapis", fuzzy=False)
    for message in messages:
        catalog.add(message)
    return catalog


def _write(path: Path, catalog: Catalog, **options: bool) -> None:
    with path.open("wb") as out:
        write_po(out, catalog, no_location=True, sort_output=True, **options)


def _read(path: Path, lang: str | None = None) -> Catalog:
    with path.open("rb") as source:
        return read_po(source, locale=lang)


def main() -> None:
    by_domain = marked()
    languages = [lang for lang in i18n.LANGUAGES if lang != "en"]
    known = {lang: {message.id: message.string for path in i18n.catalog_paths(lang)
                    for message in _read(path, lang) if message.id and translated(message.string)}
             for lang in languages}
    for domain, messages in sorted(by_domain.items()):
        pot = template(messages)
        _write(i18n.LOCALE_DIR / f"{domain}.pot", pot, omit_header=True)
        for lang in languages:
            path = i18n.catalog_path(lang, domain)
            if path.exists():
                catalog = _read(path, lang)
            else:
                catalog = Catalog(locale=lang, domain=domain, project="tapis", fuzzy=False,
                                  version="0.1.0", copyright_holder="the Tapis authors",
                                  last_translator="the Tapis authors", language_team=lang)
            catalog.update(pot, no_fuzzy_matching=True, update_creation_date=False)
            for message in catalog:
                if message.id and not translated(message.string) and message.id in known[lang]:
                    message.string = known[lang][message.id]
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, catalog, ignore_obsolete=True)
            print(f"{path.relative_to(CLIENTS)}: {len(pot)} texts")


if __name__ == "__main__":
    main()
