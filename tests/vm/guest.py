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
import shlex
import shutil
import subprocess
import tempfile
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


def run(argv: list[str], work: Path = DEFAULT_DIR, cwd: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 1500, cpus: int = 2, mem_mb: int = 1024, devices: list[str] | None = None,
        netns: str | None = None, keep: bool = False) -> GuestRun:
    """Boot the guest, run argv in cwd (default: ours) as root, power off.

    `devices` are extra qemu arguments (NICs and their -netdev backends); `netns` runs
    qemu inside that network namespace, where the NICs' tap devices live, so nothing of
    the guest's traffic reaches this machine's own interfaces. With `keep`, the files the
    guest wrote to /tmp/vmout come back in `kept`."""
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
        try:
            p = subprocess.run(qemu, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            output = p.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"").decode(errors="replace") + f"\n[guest: killed after {timeout:g} s]"
        try:
            rc = int(Path(out, "rc").read_text().strip())
        except (OSError, ValueError):
            rc = 255
        kept = {f.name: f.read_bytes() for f in Path(out).iterdir()
                if keep and f.is_file() and f.name not in ("cmd.sh", "rc")}
    return GuestRun(rc, _clean(output), kept)


def _clean(text: str) -> str:
    """The serial console without terminal escapes and firmware chatter."""
    import re

    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1bc", "", text)
    keep = [line for line in text.splitlines()
            if not re.match(r"^(SeaBIOS|Booting from ROM|\[ *[0-9.]+\] (sysrq|reboot))", line)]
    return "\n".join(keep)
