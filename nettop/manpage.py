"""nettop(1), written from the argparse tree that parses the command line.

The page is generated, never edited: every command, `set`'s settings and every option
appear with the same metavar and help text as `--help`, so the two cannot drift.
`nettop man` prints it; `nettop man --install [DIR]` writes DIR/man1/nettop.1 (default:
the installation prefix's share/man, which man-db finds from the bin/ on PATH, so a venv's
page is found by `man nettop` too). ./setup.sh runs the install after each setup.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterator

from nettop import __version__

SEE_ALSO = ("docs/recording-format.md, docs/fleet.md (serve, TLS and basic auth, the systemd units), "
            "docs/tuning.md, docs/doctor.md, docs/experiments.md in nettop's source.")


def escape(text: str) -> str:
    """Roff-safe text: backslashes escaped, hyphens kept as hyphens, no line read as a request."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in out.splitlines())


def _sub_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a
    return None


def _children(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order --help lists them."""
    sub = _sub_action(parser)
    if sub is None:
        return
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    for name, child in sub.choices.items():
        yield name, helps.get(name, ""), child


def commands(parser: argparse.ArgumentParser) -> list[str]:
    """Every command path below nettop: 'record', 'set', 'set rps', ..."""
    out: list[str] = []

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for name, _, child in _children(p):
            out.append(prefix + name)
            walk(child, f"{prefix}{name} ")
    walk(parser, "")
    return out


def _formatter(prog: str) -> argparse.HelpFormatter:
    """A formatter of fixed width: the page must not depend on the terminal it is made on."""
    return argparse.HelpFormatter(prog, width=100_000, max_help_position=100_000)


def _synopsis(parser: argparse.ArgumentParser) -> str:
    fmt = _formatter(parser.prog)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return " ".join(fmt.format_help().split())


def _option_lines(parser: argparse.ArgumentParser) -> list[str]:
    fmt = _formatter(parser.prog)
    lines: list[str] = []
    for a in parser._actions:
        if isinstance(a, (argparse._SubParsersAction, argparse._HelpAction)) or a.help == argparse.SUPPRESS:
            continue
        if a.option_strings:
            if a.nargs == 0:
                names = [f"\\fB{escape(o)}\\fR" for o in a.option_strings]
            else:
                word = fmt._format_args(a, fmt._get_default_metavar_for_optional(a))
                names = [f"\\fB{escape(o)}\\fR \\fI{escape(word)}\\fR" for o in a.option_strings]
            head = ", ".join(names)
        else:
            head = f"\\fI{escape(fmt._metavar_formatter(a, a.dest)(1)[0])}\\fR"
        text = fmt._expand_help(a) if a.help else ""
        if a.choices is not None and a.option_strings and a.nargs != 0 and "{" not in text:
            text = (text + " " if text else "") + "(one of " + ", ".join(map(str, a.choices)) + ")"
        lines += [".TP", head, escape(text) if text else ""]
    return lines


def _section(parser: argparse.ArgumentParser, path: str, summary: str) -> list[str]:
    lines = [f'.SS "{escape(path)}"', escape(summary.rstrip(".") + ".") if summary else "",
             # `\:` lets troff break a long {a,b,c} choice list after a comma
             ".PP", f"\\fB{escape(path)}\\fR " + escape(_synopsis(parser).removeprefix(path).strip()).replace(",", ",\\:")]
    if parser.description and parser.description != summary:
        lines += [".PP", escape(parser.description)]
    opts = _option_lines(parser)
    if opts:
        lines += [".RS"] + opts + [".RE"]
    for name, help_text, child in _children(parser):
        lines += _section(child, f"{path} {name}", help_text)
    return lines


def render(parser: argparse.ArgumentParser) -> str:
    """The whole page as roff (man(7) macros)."""
    lines = [f'.TH NETTOP 1 "" "nettop {__version__}" "User Commands"',
             ".SH NAME", "nettop \\- " + escape((parser.description or "").rstrip(".")),
             ".SH SYNOPSIS", f"\\fBnettop\\fR [\\fIOPTIONS\\fR]",
             ".br", "\\fBnettop\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]",
             ".SH DESCRIPTION",
             "Without a command, nettop opens the full-screen live view (a plain refreshing report when "
             "the output is not a terminal). The commands below sample, record, replay, tune and export "
             "the same figures without a screen. Errors are one line on standard error, exit status 2.",
             ".SH OPTIONS"]
    lines += _option_lines(parser)
    lines += [".SH COMMANDS"]
    for name, help_text, child in _children(parser):
        lines += _section(child, f"nettop {name}", help_text)
    lines += [".SH ENVIRONMENT", ".TP", "\\fBNETTOP_STATE_DIR\\fR",
              "where the tuning journal lives (default /var/lib/nettop).",
              ".SH SEE ALSO", "\\fBsystemd-analyze\\fR(1), \\fBprometheus\\fR(1), \\fBethtool\\fR(8), \\fBtc\\fR(8); "
              + escape(SEE_ALSO)]
    return "\n".join(line for line in lines if line != "") + "\n"


def add_subcommands(sub: Any) -> None:
    m = sub.add_parser("man", help="print the nettop(1) manual page as roff, or install it")
    m.add_argument("--install", nargs="?", const=str(default_dir()), default=None, metavar="DIR",
                   dest="man_install", help="write DIR/man1/nettop.1 instead (default: this installation's share/man)")


def default_dir() -> Path:
    return Path(sys.prefix, "share", "man")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    page = render(parser)
    if args.man_install is None:
        sys.stdout.write(page)
        return 0
    target = Path(args.man_install, "man1", "nettop.1")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(".nettop.1.tmp")
        tmp.write_text(page)
        tmp.replace(target)
    except OSError as exc:
        print(f"nettop man: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0
