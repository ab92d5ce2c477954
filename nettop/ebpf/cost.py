"""What the probes themselves cost: CPU time the kernel spent running them.

The kernel counts run time per BPF program only while run-time statistics are on. They
are turned on with the bpf(BPF_ENABLE_STATS) command, which keeps them on for as long as
the returned fd is open: closing it, or the process dying, turns them back off, so a
crash can never leave the host paying for statistics. Kernels without that command
(before 5.8) fall back to the `kernel.bpf_stats_enabled` sysctl, which is restored to
its old value on stop. Each program's `run_time_ns` and `run_cnt` are read from the
fdinfo of its fd. That time covers the programs themselves, not the tracepoint dispatch
around each run, so the real cost to the host is somewhat higher than reported
(benchmarks/ebpf_cost.py measures it as lost packet throughput).
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
_BPF_ENABLE_STATS = 32
_BPF_STATS_RUN_TIME = 0
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "ppc64le": 361, "s390x": 351,
            "riscv64": 280, "i686": 357, "loongarch64": 280}


@dataclass(frozen=True, slots=True)
class ProgRun:
    """Run-time statistics of one BPF program (cumulative since it was loaded)."""

    run_time_ns: int = 0
    run_cnt: int = 0
    recursion_misses: int = 0


def parse_fdinfo(text: str) -> ProgRun:
    """The run statistics in a BPF program fd's /proc/<pid>/fdinfo text (0 when absent)."""
    vals = {"run_time_ns": 0, "run_cnt": 0, "recursion_misses": 0}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in vals:
            try:
                vals[key] = int(value)
            except ValueError:
                pass
    return ProgRun(vals["run_time_ns"], vals["run_cnt"], vals["recursion_misses"])


def read_prog_run(fd: int) -> ProgRun:
    """Run statistics of this process's BPF program `fd`."""
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            return parse_fdinfo(f.read())
    except OSError:
        return ProgRun()


class RunTimeStats:
    """Keeps the kernel's BPF run-time statistics on between `enable()` and `disable()`."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._sysctl_before: str | None = None
        self.note = ""  # how statistics were enabled, or why they are not

    def enable(self) -> bool:
        fd = _enable_stats_fd()
        if fd is not None:
            self._fd = fd
            self.note = "bpf(BPF_ENABLE_STATS)"
            return True
        try:
            with open(SYSCTL) as f:
                before = f.read().strip()
            if before != "1":
                with open(SYSCTL, "w") as f:
                    f.write("1")
                self._sysctl_before = before
            self.note = "kernel.bpf_stats_enabled"
            return True
        except OSError as exc:
            self.note = (f"probe CPU cost unknown: cannot enable BPF run-time statistics "
                         f"({exc.strerror}); needs root and kernel 5.1+")
            return False

    def disable(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._sysctl_before is not None:
            try:
                with open(SYSCTL, "w") as f:
                    f.write(self._sysctl_before)
            except OSError:
                pass
            self._sysctl_before = None


def _enable_stats_fd() -> int | None:
    nr = _SYS_BPF.get(platform.machine())
    if nr is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 16)()  # union bpf_attr, zero-padded; enable_stats.type first
    attr[0] = _BPF_STATS_RUN_TIME
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_int(_BPF_ENABLE_STATS),
                      ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)))
    return fd if fd >= 0 else None
