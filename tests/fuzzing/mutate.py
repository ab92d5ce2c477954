"""Mutations of kernel text: what truncated, half-copied or hostile files look like.

Every mutation is a pure function of (text, rng): the same seed gives the same input on
every machine, so a crash found once can be replayed from its seed and index alone.
"""

from __future__ import annotations

import random
import re
from typing import Callable, Sequence

# Numbers that break naive parsers: widths, signs, spellings int() accepts and the
# kernel never prints, digits that str.isdigit() accepts and int() refuses.
HOSTILE_NUMBERS = (
    "0", "1", "-1", "-5", "+1", " +1", "1_000", "0x10", "0X1f", "1e3", "nan", "inf",
    "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
    "340282366920938463463374607431768211456", "9" * 400, "1" + "0" * 5000,
    "²", "²⁹", "٣", "１２", "߁", "¹²³", "0-4294967295", "0-400000000:1/2",
    "ffffffff", "fffffffff", "ffffffffffffffffff", "", "\x00", "00000000000000000000000000001",
)
HOSTILE_CHARS = ("\x00", "\xff", "\xb2", "\xa0", "\x85", "\x1c", "\t", "\r", "\x0b", "é", "²", "٣", "\u2028")
_NUM = re.compile(r"[0-9a-fA-F]+")


def _lines(text: str) -> list[str]:
    return text.split("\n")


def truncate(text: str, rng: random.Random) -> str:
    return text[:rng.randrange(len(text) + 1)]


def delete_lines(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    del lines[i:i + rng.choice((1, 1, 2, 5))]
    return "\n".join(lines)


def duplicate_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines) + 1)
    lines.insert(j, lines[i])
    return "\n".join(lines)


def repeat_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    lines[i:i + 1] = [lines[i]] * rng.choice((2, 10, 500))
    return "\n".join(lines)


def swap_lines(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def column(text: str, rng: random.Random) -> str:
    """Add or remove a whitespace-separated column on one line or on every line."""
    lines = _lines(text)
    idx = range(len(lines)) if rng.random() < 0.3 else [rng.randrange(len(lines))]
    add = rng.random() < 0.5
    extra = rng.choice(("0", "12345", "00000001", "CPU9", "x"))
    for i in idx:
        toks = lines[i].split(" ")
        if add:
            toks.insert(rng.randrange(len(toks) + 1), extra)
        elif len(toks) > 1:
            del toks[rng.randrange(len(toks))]
        lines[i] = " ".join(toks)
    return "\n".join(lines)


def number(text: str, rng: random.Random) -> str:
    """Replace one number-looking token with a hostile one."""
    spans = [m.span() for m in _NUM.finditer(text, 0, min(len(text), 200_000))]
    if not spans:
        return text + rng.choice(HOSTILE_NUMBERS)
    a, b = rng.choice(spans)
    return text[:a] + rng.choice(HOSTILE_NUMBERS) + text[b:]


def char(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(HOSTILE_CHARS) * rng.choice((1, 1, 3)) + text[i + 1:]


def flip(text: str, rng: random.Random) -> str:
    if not text:
        return chr(rng.randrange(256))
    i = rng.randrange(len(text))
    return text[:i] + chr(ord(text[i]) ^ (1 << rng.randrange(8))) + text[i + 1:]


def blank_run(text: str, rng: random.Random) -> str:
    """A long run of blanks (or of one character) somewhere: catches quadratic regexes."""
    i = rng.randrange(len(text) + 1)
    run = rng.choice((" ", " ", "\t", "0", "-", "a", " 1")) * rng.choice((200, 5000, 20000))
    return text[:i] + run + text[i:]


def header(text: str, rng: random.Random) -> str:
    """CPU-count mismatches: a CPUn cell removed, repeated, renumbered or made non-ASCII."""
    lines = _lines(text)
    for k, line in enumerate(lines[:3]):
        cells = re.findall(r"CPU\d+", line)
        if not cells:
            continue
        op = rng.randrange(5)
        cell = rng.choice(cells)
        if op == 0:
            line = line.replace(cell, "", 1)
        elif op == 1:
            line = line.replace(cell, cell + " " + cell, 1)
        elif op == 2:
            line = line.replace(cell, "CPU" + rng.choice(("4294967295", "8192", "99999", "²", "٣", "-1")), 1)
        elif op == 3:
            line = line + " CPU" + str(rng.randrange(64))
        else:
            line = line.replace(cell, "CPUé", 1)
        lines[k] = line
        break
    return "\n".join(lines)


def crlf(text: str, rng: random.Random) -> str:
    return text.replace("\n", rng.choice(("\r\n", "\r", "\n\n", "\x00\n")))


Mutation = Callable[[str, random.Random], str]
MUTATIONS: tuple[Mutation, ...] = (
    truncate, delete_lines, duplicate_line, repeat_line, swap_lines, column, column,
    number, number, number, char, flip, blank_run, header, header, crlf,
)


def mutate(seed_text: str, rng: random.Random, others: Sequence[str] = ()) -> str:
    """One fuzzed input from a real capture: 1-4 stacked mutations, sometimes another
    file's content spliced in (a tree copied wrongly)."""
    text = seed_text
    limit = max(4 * len(seed_text), 1 << 16)  # inputs stay the size of real files
    if others and rng.random() < 0.05:
        other = rng.choice(others)
        text = other if rng.random() < 0.5 else text[:len(text) // 2] + other[len(other) // 2:]
    for _ in range(rng.choice((1, 1, 2, 2, 3, 4))):
        text = rng.choice(MUTATIONS)(text, rng)[:limit]
    return text


def mutate_value(seed_text: str, rng: random.Random) -> str:
    """A fuzzed short typed value (a CPU list, a qdisc parameter, a sysctl value)."""
    r = rng.random()
    if r < 0.25:
        return rng.choice(HOSTILE_NUMBERS)
    if r < 0.35:
        a, b = rng.choice(HOSTILE_NUMBERS), rng.choice(HOSTILE_NUMBERS)
        return rng.choice((f"{a}-{b}", f"{a},{b}", f"{a}-{b}:{rng.randrange(9)}/{rng.randrange(9)}", f"{a} {b}"))
    return mutate(seed_text, rng)
