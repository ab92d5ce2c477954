"""nettop's systemd units: valid for systemd, hardened, and still able to read the host.

PID 1 here is not systemd, so nothing is started: `systemd-analyze verify` checks each
unit as `nettop install-service --dry-run` renders it (its ExecStart pointing at this
venv's real nettop, its Documentation= at the man page setup.sh installed), and
`systemd-analyze security --offline` scores its hardening. What the sandbox lets nettop
read is checked for real: nettop runs under setpriv with exactly the unit's
CapabilityBoundingSet, NoNewPrivileges and MemoryDenyWriteExecute (as PR_SET_MDWE), and
must see what it sees as plain root.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nettop.cli import build_parser
from nettop.units import UNITS, UnitError, quote, render
from test_serve_prometheus import free_port

NETTOP = str(Path(sys.executable).with_name("nettop"))
# man-db finds the venv's nettop(1) from its bin/ on PATH, for Documentation=man:nettop(1)
ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin")


def dry_run(*argv: str) -> str:
    p = subprocess.run([NETTOP, "install-service", "--dry-run", *argv], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def setting(unit: str, key: str) -> str:
    values = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(key + "=")]
    assert len(values) == 1, (key, values)
    return values[0]


def verify(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing (Debian's systemd package)")
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, env=ENV, timeout=120)


@pytest.mark.parametrize("which", sorted(UNITS))
def test_the_unit_passes_systemd_analyze_verify_without_a_warning(tmp_path, which):
    text = dry_run(which)
    assert setting(text, "ExecStart").startswith(NETTOP + f" {which} ")
    p = verify(tmp_path, UNITS[which], text)
    assert p.returncode == 0 and not p.stderr.strip() and not p.stdout.strip(), p.stdout + p.stderr


@pytest.mark.parametrize("broken, words", [
    (("ProtectSystem=strict", "ProtectSystem=strictly"), "protect system"),
    (("RestrictAddressFamilies=AF_UNIX", "RestrictAddressFamilies=AF_UNIXX"), "address family"),
    ((f"ExecStart={NETTOP}", "ExecStart=/nonexistent/nettop"), "not executable"),
])
def test_verify_would_catch_a_broken_unit(tmp_path, broken, words):
    """The check above can fail: the same call on a spoiled unit complains."""
    text = dry_run("record")
    assert broken[0] in text
    p = verify(tmp_path, "nettop-record.service", text.replace(broken[0], broken[1], 1))
    assert words.lower() in (p.stdout + p.stderr).lower(), p.stdout + p.stderr


@pytest.mark.parametrize("which", sorted(UNITS))
def test_the_units_hardening_scores_ok_in_systemd_analyze_security(tmp_path, which):
    path = tmp_path / UNITS[which]
    path.write_text(dry_run(which))
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(path)],
                       capture_output=True, text=True, env=ENV, timeout=120)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", p.stdout)
    assert m, p.stdout[-2000:] + p.stderr
    print(f"\n{UNITS[which]}: exposure {m.group(1)} {m.group(2)}")
    assert float(m.group(1)) <= 3.0, p.stdout[-3000:]
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    for key in ("ProtectSystem=strict", "ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes"):
        assert key in lines
    assert not [line for line in lines if line.startswith(("PrivateNetwork=", "ProcSubset=", "PrivateUsers="))]


# MemoryDenyWriteExecute=yes, as the kernel's own PR_SET_MDWE (6.3+; kept across exec):
# then exec the rest of argv
MDWE = ("import ctypes, os, sys\n"
        "assert ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) == 0, 'PR_SET_MDWE refused'\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n")


def sandbox(unit: str) -> list[str]:
    """The unit's CapabilityBoundingSet, NoNewPrivileges and MemoryDenyWriteExecute, for argv after it."""
    argv = ["setpriv", "--bounding-set", caps_of(unit), "--inh-caps", "-all", "--no-new-privs", "--"]
    if setting(unit, "MemoryDenyWriteExecute") == "yes":
        argv += [sys.executable, "-c", MDWE]
    return argv


def caps_of(unit: str) -> str:
    """setpriv's --bounding-set spelling of the unit's CapabilityBoundingSet."""
    caps = setting(unit, "CapabilityBoundingSet").split()
    return ",".join(["-all"] + [f"+{c.removeprefix('CAP_').lower()}" for c in caps])


def shape(doc: object, path: str = "") -> set[str]:
    """The paths of a snapshot document that hold a value: what nettop could read."""
    if isinstance(doc, dict):
        return set().union(*(shape(v, f"{path}.{k}") for k, v in doc.items())) if doc else set()
    if isinstance(doc, list):
        return shape(doc[0], path + "[]") if doc else set()
    return set() if doc is None else {path}


def snapshot(prefix: list[str]) -> dict:
    p = subprocess.run(prefix + [NETTOP, "snapshot", "--json", "-i", "0.5", "--iface", "eth0", "--iface", "lo",
                                 "--ping", "127.0.0.1", "--ping-interval", "0.05"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("which", sorted(UNITS))
def test_with_the_units_capabilities_nettop_reads_all_it_reads_as_root(which):
    """eth0 (virtio) and lo are only read. Without any capability the ICMP probe fails,
    so the comparison can fail; with the unit's bounding set (and no W+X memory) nothing
    is missing."""
    if os.geteuid() != 0:
        pytest.skip("needs root, as the unit runs")
    unit = dry_run(which)
    full, boxed = snapshot([]), snapshot(sandbox(unit))
    assert boxed["problems"] == full["problems"] == []
    assert shape(boxed) == shape(full), sorted(shape(boxed) ^ shape(full))
    assert boxed["latency"]["127.0.0.1"]["rtt_p50_ms"] is not None
    bare = snapshot(["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs", "--"])
    assert ".latency.127.0.0.1.rtt_p50_ms" in shape(full) - shape(bare) and any("ICMP" in p for p in bare["problems"])


def test_the_sandbox_really_refuses_writable_executable_memory():
    p = subprocess.run(sandbox(dry_run("serve")) + [sys.executable, "-c",
                       "import mmap; mmap.mmap(-1, 4096, prot=mmap.PROT_WRITE | mmap.PROT_EXEC)"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "Permission denied" in p.stderr, p.stderr


def test_the_recorder_records_under_the_units_capabilities(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root, as the unit runs")
    unit = dry_run("record")
    out = tmp_path / "rec.ntr"
    p = subprocess.run(sandbox(unit) + [NETTOP, "record", "-o", str(out), "-i", "0.2", "--duration", "2s", "--ping", "127.0.0.1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    exp = subprocess.run([NETTOP, "export", str(out), "--format", "json"], capture_output=True, text=True, timeout=120)
    assert exp.returncode == 0, exp.stderr
    rows = json.loads(exp.stdout)
    rows = rows["samples"]
    assert len(rows) >= 5 and any(r.get("latency.127.0.0.1.rtt_p99_ms") for r in rows), str(rows)[:1000]


def test_the_record_units_execstart_is_a_valid_nettop_command_line():
    argv = shlex.split(setting(dry_run("record"), "ExecStart"))
    args = build_parser().parse_args(argv[1:])
    assert args.command == "record"
    assert argv[argv.index("--dir") + 1] == "/var/log/nettop" and setting(dry_run("record"), "LogsDirectory") == "nettop"


def test_serve_options_go_into_the_unit_quoted_and_checked(tmp_path):
    text = dry_run("serve", "--listen", "0.0.0.0:9741", "--allow-remote", "--web.config.file", "/etc/nettop/web 1.yml",
                   "--ping", "tcp://db%1:5432")
    start = setting(text, "ExecStart")
    assert start.endswith('--allow-remote --web.config.file "/etc/nettop/web 1.yml" --ping tcp://db%%1:5432'), start
    p = verify(tmp_path, "nettop-serve.service", text.replace("/etc/nettop/web 1.yml", str(tmp_path / "web 1.yml")))
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr
    assert setting(dry_run("serve"), "ExecStart") == f"{NETTOP} serve --listen 127.0.0.1:9741"
    p = subprocess.run([NETTOP, "install-service", "serve", "--dry-run"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "go before the service" in p.stderr, p.stderr


def test_install_writes_the_unit_where_asked_and_fails_in_one_line(tmp_path):
    p = subprocess.run([NETTOP, "install-service", "--unit-dir", str(tmp_path), "record"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "systemctl daemon-reload" in p.stdout, p.stderr
    written = tmp_path / "nettop-record.service"
    assert written.read_text() == dry_run("record") and written.stat().st_mode & 0o777 == 0o644
    p = subprocess.run([NETTOP, "install-service", "--unit-dir", str(tmp_path / "nope"), "serve"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot write" in p.stderr, p.stderr


def test_quoting_and_paths_systemd_cannot_use():
    assert quote("a b") == '"a b"' and quote('say "hi"') == '"say \\"hi\\""' and quote("$HOME%i") == "$$HOME%%i"
    with pytest.raises(UnitError):
        quote("two\nlines")
    with pytest.raises(UnitError):
        render("record", "bin/nettop")
    assert "@" not in render("serve", "/usr/bin/nettop").text.split("[Service]")[1].split("\n#")[0]


def syscall_set(group: str, seen: set[str] | None = None) -> set[str]:
    """The system calls a SystemCallFilter= group allows, nested groups expanded, as systemd lists them."""
    seen = set() if seen is None else seen
    out = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    names: set[str] = set()
    for line in out.stdout.splitlines()[1:]:
        word = line.strip()
        if word.startswith("@") and word not in seen:
            seen.add(word)
            names |= syscall_set(word, seen)
        elif word and not word.startswith(("#", "@")):
            names.add(word)
    return names


def traced(tmp_path: Path, argv: list[str], during: object = None, ok: tuple[int, ...] = (0,)) -> tuple[set[str], set[str]]:
    """The system calls `argv` (and its threads and children) made, and the socket families it opened."""
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: ./setup.sh test installs it")
    out = tmp_path / "strace.txt"
    proc = subprocess.Popen(["strace", "-f", "-qq", "-o", str(out), "--", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if callable(during):
        during()
    assert proc.wait(120) in ok, proc.stderr.read() if proc.stderr else ""
    text = out.read_text()
    return (set(re.findall(r"^\d+\s+([a-z0-9_]+)\(", text, re.M)),
            set(re.findall(r"^\d+\s+socket\((AF_[A-Z0-9]+)", text, re.M)))


def test_nettop_calls_only_what_the_units_system_call_filter_and_address_families_allow(tmp_path):
    """SystemCallFilter=@system-service answers anything else with EPERM, and
    RestrictAddressFamilies refuses other sockets: snapshot with an ICMP probe, record,
    and serve answering an HTTPS scrape with a password stay inside both."""
    from test_serve_webconfig import PASSWORD, fetch, hashed, wait_https, web_config

    unit = dry_run("serve")
    allowed: set[str] = set()
    for group in setting(unit, "SystemCallFilter").split():
        allowed |= syscall_set(group) if group.startswith("@") else {group}
    assert setting(dry_run("record"), "SystemCallFilter") == setting(unit, "SystemCallFilter")
    used, families = traced(tmp_path, [NETTOP, "snapshot", "--json", "-i", "0.5", "--iface", "eth0", "--iface", "lo",
                             "--ping", "127.0.0.1"])
    more, fams = traced(tmp_path, [NETTOP, "record", "-o", str(tmp_path / "r.ntr"), "-i", "0.2", "--duration", "1s",
                                   "--ping", "127.0.0.1"])
    used, families = used | more, families | fams
    web = web_config(tmp_path, {"prometheus": hashed(PASSWORD, 4)})
    port = free_port()

    def scrape() -> None:
        url = f"https://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if fetch(url, tmp_path / "server.crt", ("prometheus", PASSWORD))[0] == 200:
                    return
            except OSError:
                time.sleep(0.3)
        raise AssertionError("no scrape answered")

    more, fams = traced(tmp_path, ["timeout", "-s", "TERM", "8", NETTOP, "serve", "--listen", f"127.0.0.1:{port}",
                              "--iface", "lo", "--web.config.file", str(web)], scrape, ok=(124,))  # timeout's "timed out"
    used, families = used | more, families | fams
    assert len(used) > 40 and {"socket", "sendto", "recvfrom"} <= used, sorted(used)
    assert not used - allowed, f"outside {setting(unit, 'SystemCallFilter')}: {sorted(used - allowed)}"
    assert {"AF_NETLINK", "AF_INET"} <= families, families
    assert families <= set(setting(unit, "RestrictAddressFamilies").split()), families
