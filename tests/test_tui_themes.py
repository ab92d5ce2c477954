"""Themes: every shipped file loads, bad files are named, the wheel carries them, and no
colour is written in the UI's Python."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nettop.tui.themes import THEME_ORDER, ThemeError, load_themes, theme_from_toml

REPO = Path(__file__).resolve().parent.parent
TUI = REPO / "nettop" / "tui"


def test_every_shipped_theme_loads_into_a_textual_theme():
    themes = load_themes()
    assert set(THEME_ORDER) <= set(themes)
    assert themes["nettop-light"].dark is False and themes["nettop-dark"].dark is True
    mono = themes["nettop-mono"]
    hues = {mono.primary, mono.accent, mono.warning, mono.error, mono.success, mono.foreground}
    assert hues == {"#FFFFFF"}  # high contrast, no hue: hot cells rely on bold/underline/reverse


def test_top_level_themes_dir_is_the_packaged_one():
    assert (REPO / "themes").resolve() == (TUI / "themes").resolve()
    assert sorted(p.name for p in (REPO / "themes").glob("*.toml")) == ["dark.toml", "light.toml", "mono.toml"]


@pytest.mark.parametrize("text,fragment", [
    ("name = ", "not valid TOML"),
    ('primary = "#000000"', "has no `name`"),
    ('name = "x"', "has no `primary`"),
    ('name = "x"\nprimary = "#000000"\ncolour = "red"', "unknown keys: colour"),
])
def test_a_bad_theme_file_is_named_with_the_reason(text, fragment):
    with pytest.raises(ThemeError, match=re.escape(fragment)) as err:
        theme_from_toml(text, "themes/broken.toml")
    assert "themes/broken.toml" in str(err.value)


def test_ui_python_names_no_colours():
    hex_colour = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")
    named = re.compile(r"\b(?:red|green|blue|yellow|magenta|cyan|white|black)\b")
    for path in TUI.glob("*.py"):
        text = path.read_text()
        assert not hex_colour.search(text), path
        assert not named.search(re.sub(r'""".*?"""|#.*', "", text, flags=re.S)), path


def test_app_css_uses_only_theme_variables():
    css = (TUI / "nettop.tcss").read_text()
    for line in css.splitlines():
        if re.match(r"\s*(color|background|border(-top|-title-color|-subtitle-color)?)\s*:", line) and "none" not in line:
            assert "$" in line, line
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", css)


def test_an_installed_wheel_finds_its_themes_and_css(tmp_path):
    wheels = tmp_path / "whl"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    str(REPO), "-w", str(wheels)], check=True, capture_output=True, cwd=tmp_path)
    wheel = next(wheels.glob("nettop-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("nettop/tui/nettop.tcss", "nettop/tui/themes/dark.toml", "nettop/tui/themes/light.toml",
              "nettop/tui/themes/mono.toml"):
        assert f in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = ("import nettop, pathlib; from nettop.tui.themes import load_themes; "
             "from nettop.tui.app import NettopApp; "
             "print(pathlib.Path(nettop.__file__).parent); print(sorted(load_themes())); "
             "print(pathlib.Path(NettopApp.CSS_PATH).is_file())")
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                         cwd=tmp_path, env=env).stdout.splitlines()
    assert out[0] == str(site / "nettop")  # the wheel's copy, not the checkout
    assert out[1] == str(sorted(THEME_ORDER)) and out[2] == "True"
