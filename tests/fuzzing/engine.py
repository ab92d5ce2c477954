"""Run a target over N seeded inputs; keep every crash as a regression input.

Input i of a target is made from `random.Random(f"{seed}:{target}:{i}")`, so any input
can be rebuilt from (seed, target, i) on any machine. A crash is an exception outside
the target's allowed project exceptions; it is recorded once per (exception type,
innermost nettop frame) and its input written under tests/data/fuzz-regressions/TARGET/,
where tests/test_fuzz.py replays it for ever.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from fuzzing.targets import DATA, Outcome, Target

REGRESSIONS = Path(os.environ.get("NETTOP_FUZZ_REGRESSIONS", DATA / "fuzz-regressions"))


@dataclass
class Stats:
    target: str
    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    silent: int = 0  # inputs with an inconsistency no Problem reported
    flagged: int = 0  # inputs the parser marked (a Problem or an allowed project error)
    slowest_s: float = 0.0
    kinds: dict[str, str] = field(default_factory=dict)  # crash key -> first message

    def add(self, other: Stats) -> None:
        for f in ("inputs", "crashes", "hangs", "silent", "flagged"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.slowest_s = max(self.slowest_s, other.slowest_s)
        self.kinds.update(other.kinds)


def make_input(target: Target, seed: int, i: int) -> str:
    return target.make(random.Random(f"{seed}:{target.name}:{i}"))


def crash_key(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "/nettop/" in f.filename] or frames
    where = f"{Path(mine[-1].filename).name}:{mine[-1].lineno}" if mine else "?"
    return f"{type(exc).__name__} at {where}"


def save_regression(target: str, data: str, note: str) -> Path:
    raw = data.encode("utf-8", "surrogatepass")
    d = REGRESSIONS / target
    d.mkdir(parents=True, exist_ok=True)
    path = d / (hashlib.sha1(raw).hexdigest()[:16] + ".in")
    if not path.exists():
        path.write_bytes(raw)
        (d / (path.stem + ".why")).write_text(note.strip() + "\n")
    return path


def regressions(target: str) -> list[Path]:
    d = REGRESSIONS / target
    return sorted(d.glob("*.in")) if d.is_dir() else []


def load(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "surrogatepass")


def run_one(target: Target, data: str) -> tuple[Outcome | None, BaseException | None]:
    """(outcome, None), or (None, the exception) when the input crashed the parser."""
    try:
        out = target.run(data)
    except target.allowed:
        return Outcome(flagged=1), None
    except (MemoryError, RecursionError, Exception) as exc:  # noqa: BLE001 - that is the point
        return None, exc
    return out, None


def fuzz(target: Target, n: int, seed: int = 0, start: int = 0, hang_s: float = 5.0,
         save: bool = False, progress: Callable[[int], None] | None = None,
         inputs: Iterator[tuple[int, str]] | None = None) -> Stats:
    """Run inputs start..start+n-1 in this process. An input that takes longer than
    `hang_s` counts as a hang (in-process it still has to finish; benchmarks/fuzz.py runs
    targets in a child it can kill)."""
    st = Stats(target.name)
    if target.setup:
        target.setup()
    try:
        it = inputs if inputs is not None else ((i, make_input(target, seed, i)) for i in range(start, start + n))
        for i, data in it:
            if progress is not None:
                progress(i)
            t0 = time.perf_counter()
            out, exc = run_one(target, data)
            dt = time.perf_counter() - t0
            st.inputs += 1
            st.slowest_s = max(st.slowest_s, dt)
            if dt > hang_s:
                st.hangs += 1
                if "hang" not in st.kinds:
                    st.kinds["hang"] = f"input {i} took {dt:.1f} s"
                    if save:
                        save_regression(target.name, data, f"hang: {dt:.1f} s (seed {seed}, input {i})")
            if exc is not None:
                st.crashes += 1
                key = crash_key(exc)
                if key not in st.kinds:
                    st.kinds[key] = f"{exc!r}"[:200]
                    if save:
                        save_regression(target.name, data, f"{key}: {exc!r}"[:500] + f" (seed {seed}, input {i})")
                continue
            assert out is not None
            if out.flagged:
                st.flagged += 1
            if out.silent:
                st.silent += 1
                key = "silent: " + re.sub(r"[0-9]+", "N", out.silent[0])[:60]
                if key not in st.kinds:  # one input per kind of inconsistency
                    st.kinds[key] = f"input {i}"
                    if save:
                        save_regression(target.name, data, "silent: " + "; ".join(out.silent))
    finally:
        if target.teardown:
            target.teardown()
    return st
