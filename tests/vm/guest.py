"""Run a command as root inside the VM tier's guest (Debian's stock kernel under qemu).

The guest boots the kernel `build.sh` unpacked, mounts this machine's `/` read-only
with a tmpfs overlay, `cd`s to the caller's directory and runs the command, so it sees
the same checkout and `.venv` as the host. What it writes is thrown away; its output
comes back on the serial console and its exit code through a small shared directory.

qemu runs in software emulation here (the host is itself a guest whose /dev/kvm cannot
run a stock kernel): about 10 s to boot and power off, Python about 25x slower.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DIR = Path(os.environ.get("NETTOP_VM_DIR", "/var/cache/nettop-vm"))


@dataclass(frozen=True)
class GuestRun:
    rc: int
    output: str
    kept: dict[str, bytes] = field(default_factory=dict)  # what the guest left in /tmp/vmout


def why_not() -> str | None:
    """Why the VM tier cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "the VM tier needs root (it installs qemu and Debian's kernel source)"
    if shutil.which("apt-get") is None or shutil.which("dpkg-query") is None:
        return "the VM tier builds its guest from Debian packages and this is not a Debian-based system"
    if os.uname().machine != "x86_64":
        return f"the VM tier boots an amd64 kernel and this machine is {os.uname().machine}"
    return None


def build(work: Path = DEFAULT_DIR, timeout: float = 1800) -> Path:
    """Build (or reuse) the guest; returns its directory. RuntimeError with the build's
    last lines when it fails (no network for apt, no kernel source package, ...)."""
    p = subprocess.run(["bash", str(HERE / "build.sh"), str(work)], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"tests/vm/build.sh failed ({p.returncode}):\n{tail}")
    return Path(p.stdout.strip().splitlines()[-1])


LOCKUP = re.compile(r"watchdog: BUG: soft lockup|Kernel panic - not syncing")
STUCK_FOR_GOOD = "[guest: killed, a vCPU stuck for"
STUCK = re.compile(rb"soft lockup - CPU#\d+ stuck for (\d+)s")
STUCK_FOR_GOOD_S = 240  # a loaded host's TCG guest may report 20-odd s and go on; minutes never end


def run(argv: list[str], work: Path = DEFAULT_DIR, cwd: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 1500, cpus: int = 2, mem_mb: int = 1024, devices: list[str] | None = None,
        netns: str | None = None, keep: bool = False) -> GuestRun:
    """Boot the guest, run argv in cwd (default: ours) as root, power off.

    `devices` are extra qemu arguments (NICs and their -netdev backends); `netns` runs
    qemu inside that network namespace, where the NICs' tap devices live, so nothing of
    the guest's traffic reaches this machine's own interfaces. With `keep`, the files the
    guest wrote to /tmp/vmout come back in `kept`.

    A guest whose vCPUs lock up for good is booted once more within what is left of `timeout`.
    Under TCG on a loaded 2-core host, a 4-vCPU guest once had every vCPU stuck in idle
    and ksoftirqd for 50 minutes ("soft lockup ... stuck for 2980s!", during the e1000e
    coalescing check, which had passed in every run before and raises ~200 irq/s): the
    emulator, not the code under test, had stopped. A vCPU reported stuck for
    STUCK_FOR_GOOD_S ends that boot (a short report, which a loaded host can give and
    recover from, does not); the first boot's console is kept in a file and its lockup
    lines head the output, so a lockup that comes back twice fails with both on record."""
    started = time.monotonic()
    first = _boot(argv, work, cwd, env, timeout, cpus, mem_mb, devices, netns, keep)
    if STUCK_FOR_GOOD not in first.output:
        return first  # a failed test, or a panic, beside a short lockup report fails as it is
    left = timeout - (time.monotonic() - started)
    saved = Path(tempfile.mkstemp(prefix="lockup.", suffix=".log", dir=work)[1])
    saved.write_text(first.output)
    lines = [line for line in first.output.splitlines() if LOCKUP.search(line)][:6]
    head = (f"[guest: its kernel locked up after {timeout - left:.0f} s; full console in {saved}; "
            f"booted again with {left:.0f} s left]\n" + "\n".join(lines) + "\n")
    if left < 60:
        return GuestRun(first.rc, head + first.output, first.kept)
    second = _boot(argv, work, cwd, env, left, cpus, mem_mb, devices, netns, keep)
    return GuestRun(second.rc, head + second.output, second.kept)


def _boot(argv: list[str], work: Path, cwd: str | None, env: dict[str, str] | None, timeout: float, cpus: int,
          mem_mb: int, devices: list[str] | None, netns: str | None, keep: bool) -> GuestRun:
    kver = (work / "done").read_text().strip()
    cwd = cwd or os.getcwd()
    with tempfile.TemporaryDirectory(prefix="out.", dir=work) as out:
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
        # the guest's /bin/sh runs this: a script the guest reads, not a command of ours
        Path(out, "cmd.sh").write_text(f"cd {shlex.quote(cwd)} || exit 99\n{exports}{shlex.join(argv)}\n")
        qemu = [
            "qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max", "-m", str(mem_mb),
            "-smp", str(cpus), "-machine", "q35", "-nographic", "-no-reboot", "-nodefaults",
            "-serial", "stdio",
            "-kernel", str(work / "kroot" / "boot" / f"vmlinuz-{kver}"), "-initrd", str(work / "initramfs.gz"),
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={out},mount_tag=out,security_model=none",
            "-append", f"console=ttyS0 panic=-1 quiet loglevel=1 klmods={work}/kroot/lib/modules/{kver}",
            *(devices or []),
        ]
        if netns:
            qemu = ["ip", "netns", "exec", netns, *qemu]
        output = _watch(qemu, timeout)
        try:
            rc = int(Path(out, "rc").read_text().strip())
        except (OSError, ValueError):
            rc = 255
        kept = {f.name: f.read_bytes() for f in Path(out).iterdir()
                if keep and f.is_file() and f.name not in ("cmd.sh", "rc")}
    return GuestRun(rc, _clean(output), kept)


def _watch(qemu: list[str], timeout: float) -> str:
    """qemu's console until it exits, `timeout` passes, or a vCPU is stuck for good."""
    p = subprocess.Popen(qemu, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    console = p.stdout
    assert console is not None
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(console.fileno(), 65536), b"")), daemon=True)
    reader.start()
    deadline, seen, why = time.monotonic() + timeout, 0, ""
    while p.poll() is None:
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        n = len(chunks)
        stuck = [int(m.group(1)) for c in chunks[max(0, seen - 1):n] for m in STUCK.finditer(c)]
        seen = n
        if stuck and max(stuck) >= STUCK_FOR_GOOD_S:
            why = f"\n{STUCK_FOR_GOOD} {max(stuck)} s]"
        elif time.monotonic() > deadline:
            why = f"\n[guest: killed after {timeout:g} s]"
        if why:
            p.kill()
            p.wait()
    reader.join(timeout=10)
    return b"".join(chunks).decode(errors="replace") + why


def _clean(text: str) -> str:
    """The serial console without terminal escapes and firmware chatter."""
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1bc", "", text)
    keep = [line for line in text.splitlines()
            if not re.match(r"^(SeaBIOS|Booting from ROM|\[ *[0-9.]+\] (sysrq|reboot))", line)]
    return "\n".join(keep)
