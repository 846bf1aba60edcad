"""Every text the CLI marks for translation has its French in its catalog (the generic one, or
its game's), with the same placeholders; the catalogs compile and merge."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

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


FRENCH_PUNCTUATION = re.compile(r"[^\s\u00a0\u202f\d/\[\]][:;!?](?=\s|$)")
"""A colon, semicolon, exclamation or question mark glued to the word before it: French puts a
space (ideally a narrow no-break one) there. (After a digit or a slash: a time, a path.)"""
COUNTED = re.compile(r"\{(count|cards|left|taken|tries|strikes|n)\}\)? \w+s\b")
"""A count followed by a plural noun (``{cards} cards``): a text for ngettext, not ``_``."""


def french_catalogs() -> list[tuple[str, object]]:
    entries = []
    for path in i18n.catalog_paths("fr"):
        with path.open("rb") as source:
            entries += [(path.name, message) for message in read_po(source, locale="fr")
                        if message.id]
    return entries


def test_the_french_is_punctuated_and_nothing_is_fuzzy() -> None:
    """French typography in every French text; no entry left fuzzy (a fuzzy entry is not
    used: the English would show)."""
    wrong = []
    for name, message in french_catalogs():
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for text in strings:
            if FRENCH_PUNCTUATION.search(text.replace("%(prog)s:", "%(prog)s :")):
                wrong.append((name, text))
        if message.fuzzy:
            wrong.append((name, f"fuzzy: {message.id}"))
    assert not wrong, wrong
    assert FRENCH_PUNCTUATION.search("défi: 3") and not FRENCH_PUNCTUATION.search("défi : 3")


def test_every_count_has_its_plural_forms() -> None:
    """A text about a count is marked with ngettext (or NP_): ``1 cartes`` never shows."""
    singular_only = [message for domain in marked().values() for message in domain
                     if isinstance(message, str) and COUNTED.search(message)]
    assert not singular_only, singular_only
    assert COUNTED.search("you take the trick ({cards} cards)")


def test_the_help_and_argparse_speak_french(capsys: pytest.CaptureFixture[str]) -> None:
    from tapis_clients import cli

    try:
        for argv in (["--lang", "fr", "--help"], ["--lang", "fr", "play", "--help"]):
            with pytest.raises(SystemExit):
                cli.parse_args(argv)
            shown = capsys.readouterr().out
            for english in ("usage:", "positional arguments", "options:", "show this help",
                            "--name NAME", " SECONDS ", " FILE"):
                assert english not in shown, (english, shown)
            assert "usage :" in shown and "afficher cette aide" in shown
        with pytest.raises(SystemExit):
            cli.parse_args(["--lang", "fr", "plaie"])
        assert "choix invalide" in capsys.readouterr().err
    finally:
        i18n.use("en")


HELP_WIDTH = 78
"""`tapis --help` fits an 80-column terminal with argparse's margin (its width less 2)."""


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_help_fits_80_columns(lang: str, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`tapis --help` (its usage block is written by hand) and each subcommand's."""
    from tapis_clients import cli

    monkeypatch.setenv("COLUMNS", "80")
    subcommands = next(action for action in cli.build_parser()._actions
                       if isinstance(action, argparse._SubParsersAction)).choices
    try:
        for command in ([], *([name] for name in subcommands)):
            with pytest.raises(SystemExit):
                cli.parse_args(["--lang", lang, *command, "--help"])
            wide = [line for line in capsys.readouterr().out.splitlines()
                    if len(line) > HELP_WIDTH]
            assert not wide, (command, wide)
    finally:
        i18n.use("en")


WEB = Path(__file__).resolve().parents[2] / "web" / "src"
NOT_SAID = {"the connection was lost"}
"""Literals in the web client that nobody reads (an error's internal message: the page says
the refusal's sentence from i18n.ts)."""


def web_texts(language: str) -> dict[str, str]:
    """The web client's texts in ``language`` (i18n.ts): each key's literal parts joined."""
    source = (WEB / "i18n.ts").read_text(encoding="utf-8")
    start = source.index("const en = {" if language == "en" else "const fr: Texts = {")
    block = source[start:source.index("\n};", start)]
    texts: dict[str, str] = {}
    for line in block.splitlines()[1:]:
        found = re.match(r"\s{2,4}(\w+): (.*)", line)
        if found:
            literals = re.findall(r'"((?:[^"\\]|\\.)*)"|`([^`]*)`', found.group(2))
            texts[found.group(1)] = " ".join(a or b for a, b in literals)
    return texts


def test_the_web_client_says_every_text_in_french() -> None:
    """Every text of the web client is in its French table (i18n.ts), punctuated the French
    way, and none is written in a screen's code instead of the tables."""
    english, french = web_texts("en"), web_texts("fr")
    assert len(english) > 80 and set(english) == set(french), set(english) ^ set(french)
    glued = {key: text for key, text in french.items()
             if FRENCH_PUNCTUATION.search(re.sub(r"\$\{[^}]*\}", "x", text))}
    assert not glued, glued
    classes = set(re.findall(r"\.([a-z][\w-]*)", (WEB / "app.css").read_text(encoding="utf-8")))
    said = []
    for path in [*WEB.glob("*.ts"), *WEB.glob("games/*.ts")]:
        if path.name == "i18n.ts":
            continue
        code = re.sub(r"(?m)(^|\s)//[^\n]*|/\*.*?\*/", " ", path.read_text(encoding="utf-8"),
                      flags=re.S)
        templates = [re.sub(r"\$\{[^}]*\}", " ", t) for t in re.findall(r"`([^`]*)`", code)]
        for found in [*re.finditer(r'(class: )?"((?:[^"\\\n]|\\.)*)"', code),
                      *(re.match(r"()(.*)", t, re.S) for t in templates)]:
            assert found is not None
            literal = found.group(2)
            tokens = [token for token in literal.split() if re.search(r"[^\W\d_]{2,}", token)]
            if re.fullmatch(r"\s*[:;!?]\s*", literal):
                said.append((path.name, literal))  # punctuation glued on in code
            if found.group(1) or len(tokens) < 2 or literal in NOT_SAID:
                continue  # a class list, a word that is a key or a name, or nobody reads it
            if not all(token in classes or "-" in token for token in tokens) or \
                    re.search(r"[!?:]\s*$|^[A-ZÀ-Ý][a-zà-ÿ]+ ", literal):
                said.append((path.name, literal))
    assert not said, f"texts outside i18n.ts: {said}"
