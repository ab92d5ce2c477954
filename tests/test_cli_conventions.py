"""What a sysadmin expects of a CLI: `--version`, help text on every option of every
command, readable metavars, and a man page made from the same parser that renders."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from nettop import __version__
from nettop.cli import build_parser
from nettop.manpage import commands, escape, render

ROOT = Path(__file__).parent.parent
NETTOP = str(Path(sys.executable).with_name("nettop"))


def walk(p: argparse.ArgumentParser, path: tuple[str, ...] = ("nettop",)) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """Every argument of every parser under `p`, `set`'s settings included."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from walk(sp, path + (name,))
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield path, a


def shown_metavar(a: argparse.Action) -> str:
    """The word --help prints for the argument's value."""
    fmt = argparse.HelpFormatter("nettop")
    if a.option_strings:
        return fmt._metavar_formatter(a, fmt._get_default_metavar_for_optional(a))(1)[0]
    return fmt._metavar_formatter(a, fmt._get_default_metavar_for_positional(a))(1)[0]


ARGS = list(walk(build_parser()))


def test_the_walk_reaches_every_command_and_sets_settings():
    commands_seen = {path[1] for path, _ in ARGS if len(path) > 1}
    assert {"snapshot", "record", "serve", "doctor", "set", "replay", "report"} <= commands_seen
    assert {path[2] for path, _ in ARGS if path[:2] == ("nettop", "set") and len(path) > 2} >= {"rps", "sysctl", "qdisc"}
    assert len(ARGS) > 150


def test_every_option_of_every_command_has_help_text():
    missing = [f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}" for path, a in ARGS
               if not a.help or not a.help.strip()]
    assert not missing, "no help text: " + "; ".join(missing)


def test_no_metavar_is_an_internal_dest_name():
    """`--interval REC_INTERVAL` tells a reader about nettop's argparse, not the value."""
    bad = []
    for path, a in ARGS:
        if a.option_strings and a.nargs == 0:
            continue
        word = shown_metavar(a)
        if a.metavar is None and a.choices is None and "_" in a.dest:
            bad.append(f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}: {word}")
    assert not bad, "metavars from dest names: " + "; ".join(bad)


def test_version_prints_the_package_version_and_exits_0():
    p = subprocess.run([NETTOP, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == f"nettop {__version__}\n", p


def test_record_help_reads_like_a_manual():
    p = subprocess.run([NETTOP, "record", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    assert "REC_" not in p.stdout and "--interval SECONDS" in p.stdout


def test_the_man_page_names_every_command_and_option():
    page = render(build_parser())
    for path, a in ARGS:
        for opt in a.option_strings:
            assert "\\-" + opt.lstrip("-").replace("-", "\\-") in page, (path, opt)
    for name in commands(build_parser()):
        assert f'.SS "{escape("nettop " + name)}"\n' in page, name
    assert page.startswith(".TH NETTOP 1 ")
    assert __version__ in page.splitlines()[0]


def test_the_installed_man_page_renders_with_man_without_warnings(tmp_path):
    if shutil.which("man") is None:
        pytest.fail("man-db is missing: ./setup.sh test installs it")
    installed = Path(sys.prefix, "share", "man", "man1", "nettop.1")
    assert installed.is_file(), f"{installed} missing: ./setup.sh installs it (nettop man --install)"
    assert installed.read_text() == render(build_parser()), "the installed page is stale: run ./setup.sh setup"
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_STDERR="1")
    p = subprocess.run(["man", "--warnings", "-l", str(installed)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr
    text = p.stdout.replace("\u2010", "-")
    assert "   nettop record\n" in text and "-o FILE, --output FILE" in text, text[:2000]
    # man-db derives the venv's man directory from its bin/ on PATH: `man nettop` finds the page
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    env.pop("MANPATH", None)
    p = subprocess.run(["man", "-w", "nettop"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and Path(p.stdout.strip()).resolve() == installed.resolve(), p


def test_man_install_writes_the_page_under_a_prefix(tmp_path):
    p = subprocess.run([NETTOP, "man", "--install", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "man1" / "nettop.1").read_text() == render(build_parser())
    p = subprocess.run([NETTOP, "man"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == render(build_parser())
