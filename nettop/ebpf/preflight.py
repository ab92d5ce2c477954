"""Can the probes run here? Each check answers with None or one line naming the fix.

The probes are an optional deep view: nettop runs on without them, so what is missing
(bcc, kernel headers, privileges, BTF, a tracepoint) is reported as a sentence a person
can act on, never as an exception. Checks are ordered so the first answer is the one to
fix first.
"""

from __future__ import annotations

import os
import platform

from nettop.ebpf.btf import Btf, BtfError, VMLINUX, read_vmlinux_btf
from nettop.ebpf.program import PROBES, signature_problem

BCC_FIX = "apt-get install python3-bpfcc linux-headers-$(uname -r)"
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


def bcc_problem() -> str | None:
    """None when `import bcc` works (Debian's python3-bpfcc, not PyPI's "bcc")."""
    try:
        import bcc  # noqa: F401
    except ImportError:
        return f"bcc is not installed: {BCC_FIX}"
    except Exception as exc:  # libbcc.so missing or broken: bcc raises OSError and others
        return f"bcc cannot load ({str(exc).splitlines()[0][:80]}): reinstall python3-bpfcc"
    if not hasattr(bcc, "BPF"):
        return ("the 'bcc' Python package found is not BPF Compiler Collection: "
                f"pip uninstall bcc; {BCC_FIX}")
    return None


def parse_cap_eff(status: str) -> int:
    """The CapEff mask from /proc/<pid>/status text (0 when absent)."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            try:
                return int(line.split()[1], 16)
            except (IndexError, ValueError):
                return 0
    return 0


def privilege_problem() -> str | None:
    """None when this process may load and attach tracing BPF programs."""
    if os.geteuid() == 0:
        return None
    try:
        with open("/proc/self/status") as f:
            caps = parse_cap_eff(f.read())
    except OSError:
        caps = 0
    if caps >> CAP_SYS_ADMIN & 1 or (caps >> CAP_BPF & 1 and caps >> CAP_PERFMON & 1):
        return None
    return "eBPF probes need root (or CAP_BPF and CAP_PERFMON): run nettop with sudo"


def headers_problem(release: str | None = None, modules: str = "/lib/modules") -> str | None:
    """None when bcc will find kernel headers to compile against."""
    release = release or platform.release()
    for sub in ("build", "source"):
        if os.path.isdir(os.path.join(modules, release, sub, "include")):
            return None
    if os.path.exists("/sys/kernel/kheaders.tar.xz"):
        return None
    return (f"kernel headers for {release} not found in {modules}/{release}/build: "
            "apt-get install linux-headers-$(uname -r)")


def load_btf(path: str = VMLINUX) -> tuple[Btf | None, str | None]:
    """The running kernel's BTF, or the reason it cannot be used."""
    try:
        return read_vmlinux_btf(path), None
    except FileNotFoundError:
        return None, (f"kernel has no BTF ({path}): the probes need a kernel built with "
                      "CONFIG_DEBUG_INFO_BTF=y")
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    except BtfError as exc:
        return None, f"cannot parse {path}: {exc}"


def tracepoint_problems(btf: Btf, probes: tuple[str, ...],
                        table: dict[str, tuple[str, ...]] = PROBES) -> dict[str, str]:
    """{probe group: why it cannot attach} for the groups in `probes` that cannot."""
    out: dict[str, str] = {}
    for group in probes:
        for tp in table.get(group, ()):
            why = signature_problem(tp, btf.tracepoint_args(tp.partition(":")[2]))
            if why:
                out[group] = f"{why}: the {group} probe is off"
                break
    if "napi" in probes and "napi" not in out:
        for struct_name, member in (("napi_struct", "napi_id"), ("napi_struct", "dev")):
            if btf.member_offset(struct_name, member) is None:
                out["napi"] = (f"kernel BTF has no {struct_name}.{member}: "
                               "the napi probe is off")
                break
    return out

