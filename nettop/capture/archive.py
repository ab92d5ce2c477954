"""`nettop capture OUT.tar.gz`: one file a customer can send, and `--root OUT.tar.gz` to open it.

Layout (docs/captures.md):

    nettop-capture/capture.json     what, when, which nettop; no secrets
    nettop-capture/1/proc/...       the first capture's kernel files (capture/tree.py)
    nettop-capture/1/sys/...
    nettop-capture/1/commands/...   `ip -s -d link`, `tc -s qdisc show`, `ethtool -c/-g/-l/-k/-S IF`
    nettop-capture/2/...            with `--twice N`: the same N seconds later

Opening extracts into a private temporary directory removed at exit. Only directories,
regular files and relative symlinks that stay inside the archive are extracted (no
devices, no absolute or `..` paths), so a hostile archive can write nowhere else.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from nettop.capture.tree import TreeWriter

TOP = "nettop-capture"
META = "capture.json"
FORMAT = "nettop.capture/1"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar", ".tar.bz2")
_MAC = re.compile(r"\b(link/\S+|brd|permaddr)\s+\S+")


class CaptureFileError(ValueError):
    """An archive that cannot be opened as a capture (one line for the user)."""


def _commands(ifnames: list[str]) -> list[tuple[str, list[str]]]:
    """(file name, argv) of the text state sysfs cannot hold, as sos report names them."""
    out = [("ip_-s_-d_link", ["ip", "-s", "-d", "link"]),
           ("tc_-s_qdisc_show", ["tc", "-s", "qdisc", "show"])]
    for name in ifnames:
        for opt in ("-c", "-g", "-l", "-k", "-S"):
            out.append((f"ethtool_{opt}_{name}", ["ethtool", opt, name]))
    return out


def _run_commands(dest: Path, ifnames: list[str], addresses: bool) -> None:
    cmd_dir = dest / "commands"
    cmd_dir.mkdir(parents=True, exist_ok=True)
    for fname, argv in _commands(ifnames):
        if shutil.which(argv[0]) is None:
            continue
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = p.stdout
        if not addresses and argv[0] == "ip":
            text = _MAC.sub(lambda m: f"{m.group(1)} (not captured)", text)
        (cmd_dir / fname).write_text(text)


def take_one(dest: Path, addresses: bool = False) -> dict[str, Any]:
    """One capture of the live host into `dest`; its entry for capture.json."""
    t0 = time.time()
    w = TreeWriter(dest, "/", addresses)
    w.capture()
    names = sorted(n for n in os.listdir("/sys/class/net") if os.path.isdir(f"/sys/class/net/{n}"))
    _run_commands(dest, [n for n in names if n != "lo"], addresses)
    uptime = None
    try:
        uptime = float((dest / "proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return {"dir": dest.name, "t_wall": t0, "took_s": round(time.time() - t0, 3),
            "uptime_s": uptime, "files": w.copied}


def write_capture(out: str, twice: float | None = None, addresses: bool = False,
                  log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Write OUT (a .tar.gz): one capture, or two `twice` seconds apart; returns the meta."""
    with tempfile.TemporaryDirectory(prefix="nettop-capture-") as tmp:
        top = Path(tmp) / TOP
        top.mkdir()
        entries = [take_one(top / "1", addresses)]
        log(f"capture 1 taken ({entries[0]['files']} files)")
        if twice:
            time.sleep(max(0.0, float(entries[0]["t_wall"]) + twice - time.time()))
            entries.append(take_one(top / "2", addresses))
            log(f"capture 2 taken {twice:g} s later")
        meta: dict[str, Any] = {"format": FORMAT, "host": _read(top / "1/proc/sys/kernel/hostname"),
                "kernel": _read(top / "1/proc/sys/kernel/osrelease"),
                "addresses": addresses, "captures": entries}
        (top / META).write_text(json.dumps(meta, indent=1) + "\n")
        tmp_out = out + ".part"
        xz = out.endswith((".xz", ".txz"))
        with tarfile.open(tmp_out, "w:xz") if xz else tarfile.open(tmp_out, "w:gz") as tar:
            tar.add(str(top), arcname=TOP)
        os.replace(tmp_out, out)
    return meta


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


# --- opening ---------------------------------------------------------------------------


def is_archive(path: str) -> bool:
    return os.path.isfile(path) and path.endswith(ARCHIVE_SUFFIXES)


EXTRACTED: set[str] = set()  # directories extracted from archives: their trees never change


def is_static(root: str) -> bool:
    """A tree that cannot change while nettop reads it: one extracted from an archive, or
    a sosreport directory (a plain directory may be rewritten, e.g. by tests/treegen.py)."""
    p = os.path.abspath(root)
    if any(p == d or p.startswith(d + os.sep) for d in EXTRACTED):
        return True
    return os.path.isdir(os.path.join(root, "sos_commands"))


def extract(path: str) -> Path:
    """Extract an archive safely into a temporary directory (removed at exit)."""
    dest = Path(tempfile.mkdtemp(prefix="nettop-root-"))
    EXTRACTED.add(str(dest.resolve()))
    atexit.register(shutil.rmtree, dest, True)
    try:
        with tarfile.open(path) as tar:
            for m in tar:
                _extract_member(tar, m, dest)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CaptureFileError(f"cannot open {path} as a capture archive: {exc}") from None
    return dest


def _extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path) -> None:
    name = m.name.lstrip("./") if m.name.startswith("./") else m.name
    parts = Path(name).parts
    if not parts or name.startswith("/") or ".." in parts:
        return
    target = dest.joinpath(*parts)
    if m.isdir():
        target.mkdir(parents=True, exist_ok=True)
    elif m.isfile():
        f = tar.extractfile(m)
        if f is None:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as out:
            shutil.copyfileobj(f, out)
        os.utime(target, (m.mtime, m.mtime))  # when it was captured (capture_time)
    elif m.issym():
        link = m.linkname
        resolved = os.path.normpath(os.path.join(os.path.dirname(name), link))
        if link.startswith("/") or resolved.startswith(".."):
            return  # pointing outside the archive
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            os.symlink(link, target)


def capture_roots(base: Path) -> list[Path]:
    """The capture trees under an extracted archive: `nettop-capture/1` (and `/2`), or the
    one directory holding `proc/` (a plain tarball of /proc and /sys)."""
    top = base / TOP
    if (top / META).is_file():
        return [top / d for d in ("1", "2") if (top / d / "proc").is_dir()]
    if (base / "proc").is_dir():
        return [base]
    subdirs = [d for d in base.iterdir() if d.is_dir() and (d / "proc").is_dir()]
    return subdirs[:1]


def second_capture(root: str) -> str | None:
    """For the first tree of a two-capture archive, the second tree's path."""
    p = Path(root)
    if p.name == "1" and p.parent.name == TOP and (p.parent / META).is_file() \
            and (p.parent / "2" / "proc").is_dir():
        return str(p.parent / "2")
    return None


def capture_meta(root: str) -> dict[str, Any] | None:
    """capture.json of the archive a tree came from (None for other trees)."""
    p = Path(root)
    try:
        return json.loads((p.parent / META).read_text()) if p.parent.name == TOP else None
    except (OSError, ValueError):
        return None


def capture_time(root: str) -> float | None:
    """When a captured tree was taken (UTC seconds): its capture.json entry for a `nettop
    capture` archive, else the newest modification time of the proc files it holds (a
    sosreport's and tar's files keep the time they were copied); None when unknown."""
    meta = capture_meta(root)
    if meta is not None:
        for entry in meta.get("captures", ()):
            if isinstance(entry, dict) and entry.get("dir") == Path(root).name:
                t = entry.get("t_wall")
                if isinstance(t, (int, float)):
                    return float(t)
    times = []
    for rel in ("proc/uptime", "proc/net/dev", "proc/stat", "proc/net/softnet_stat", "proc/softirqs"):
        try:
            times.append(os.stat(os.path.join(root, rel)).st_mtime)
        except OSError:
            continue
    return max(times) if times else None
