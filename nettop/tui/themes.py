"""Load nettop's colour themes from TOML files into Textual `Theme` objects.

The files live in this package's `themes/` directory (the repository's top-level
`themes/` is a link to it), and are read through importlib.resources, so the same code
finds them in a source checkout and in an installed wheel. Python never names a colour:
the app's .tcss uses only theme variables.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Iterator

from textual.theme import Theme

THEME_ORDER = ("nettop-dark", "nettop-light", "nettop-mono")
DEFAULT_THEME = "nettop-dark"
NO_COLOR_THEME = "nettop-mono"

_FIELDS = ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
           "boost", "warning", "error", "success", "dark", "luminosity_spread", "text_alpha")


class ThemeError(ValueError):
    """A theme file that cannot be used, named with the reason."""


def theme_from_toml(text: str, origin: str) -> Theme:
    """One Theme from the text of a theme file; `origin` names the file in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"theme file {origin} is not valid TOML: {exc}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ThemeError(f"theme file {origin} has no `name`")
    if "primary" not in data:
        raise ThemeError(f"theme file {origin} has no `primary` colour")
    unknown = set(data) - set(_FIELDS) - {"name", "variables"}
    if unknown:
        raise ThemeError(f"theme file {origin} has unknown keys: {', '.join(sorted(unknown))}")
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeError(f"theme file {origin}: `variables` must be a table")
    kwargs = {k: data[k] for k in _FIELDS if k in data}
    return Theme(name=name, variables={str(k): str(v) for k, v in variables.items()}, **kwargs)


def _theme_files() -> Iterator[tuple[str, str]]:
    folder = resources.files("nettop.tui").joinpath("themes")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            yield f"nettop/tui/themes/{entry.name}", entry.read_text(encoding="utf-8")


def load_themes() -> dict[str, Theme]:
    """Every shipped theme by name."""
    themes = {}
    for origin, text in _theme_files():
        theme = theme_from_toml(text, origin)
        themes[theme.name] = theme
    missing = [n for n in THEME_ORDER if n not in themes]
    if missing:
        raise ThemeError(f"nettop's theme files are incomplete, missing {', '.join(missing)}: reinstall nettop")
    return themes
