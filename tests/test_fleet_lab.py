"""`nettop persist` round trips on the veth lab, through each engine that re-applies it.

RPS, XPS, a qdisc, txqueuelen, an offload and two sysctls are set with `nettop set`;
each format is persisted; `nettop restore` puts the host back; then each artifact is
applied by the engine it is written for — procps `sysctl -p`, systemd-udevd's own
link-setup builtin (`udevadm test-builtin net_setup_link`), the unit's ExecStart run
directly, tuned's two plugins as tuned runs them ([sysctl] written to /proc/sys, the
[script] called with `start`), `ansible-playbook -c local`, `sh` — and the state is read
back with the kernel's own files, tc and ethtool, not with nettop. The two sysctls are
put back whatever happens.
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

BIN = Path(sys.executable).parent
NETTOP = str(BIN / "nettop")
SYSCTLS = ("net.core.netdev_budget", "net.core.netdev_max_backlog")


def proc_sys(name: str) -> str:
    return Path("/proc/sys", *name.split(".")).read_text().strip()


def run(argv: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, f"{shlex.join(argv)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def state(ifname: str) -> dict[str, str]:
    """What the kernel says, read without nettop."""
    q = f"/sys/class/net/{ifname}/queues"
    root = next(x for x in json.loads(subprocess.run(["tc", "-j", "qdisc", "show", "dev", ifname], check=True,
                                                     capture_output=True, text=True).stdout) if x.get("root"))
    gro = subprocess.run(["ethtool", "-k", ifname], check=True, capture_output=True, text=True).stdout
    return {
        "rps rx-0": Path(f"{q}/rx-0/rps_cpus").read_text().strip(),
        "xps tx-1": Path(f"{q}/tx-1/xps_cpus").read_text().strip(),
        "qdisc": f"{root['kind']} {root.get('options', {}).get('limit', '')}".strip(),
        "txqueuelen": Path(f"/sys/class/net/{ifname}/tx_queue_len").read_text().strip(),
        "gro": "on" if "generic-receive-offload: on" in gro else "off",
        **{name: proc_sys(name) for name in SYSCTLS},
    }


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "NETTOP_STATE_DIR": str(tmp_path / "state"), "PATH": f"{BIN}:{os.environ['PATH']}"}


@pytest.fixture
def sysctls_kept():
    was = {n: proc_sys(n) for n in SYSCTLS}
    yield was
    for n, v in was.items():
        if proc_sys(n) != v:
            Path("/proc/sys", *n.split(".")).write_text(v)


def test_every_persist_format_round_trips_through_its_engine(veth_lab, tmp_path, env, sysctls_kept):
    for tool in ("udevadm", "sysctl"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: ./setup.sh test installs it")
    if not (BIN / "ansible-playbook").exists():
        pytest.fail("ansible-playbook is missing from .venv: ./setup.sh test installs ansible-core")
    ifname = veth_lab.host_if
    found = state(ifname)
    budget, backlog = (int(sysctls_kept[n]) for n in SYSCTLS)
    for line in (f"rps {ifname} 0 1", f"xps {ifname} 1 1", f"qdisc {ifname} pfifo limit=500 -y",
                 f"txqueuelen {ifname} 2345", f"features {ifname} gro={'off' if found['gro'] == 'on' else 'on'}",
                 f"sysctl {SYSCTLS[0]} {budget + 100}", f"sysctl {SYSCTLS[1]} {backlog + 1000}"):
        run([NETTOP, "set", *line.split()], env)
    tuned = state(ifname)
    assert all(tuned[k] != found[k] for k in found), (found, tuned)

    out = tmp_path / "out"
    for fmt in ("sysctl", "udev", "systemd", "tuned", "ansible", "script"):
        extra = ["--install-dir", str(tmp_path / "installed")] if fmt in ("systemd", "ansible") else []
        run([NETTOP, "persist", "--format", fmt, "-o", str(out / fmt), *extra], env)
    run([NETTOP, "restore"], env)
    assert state(ifname) == found

    def check(subset: tuple[str, ...], how: str) -> None:
        now = state(ifname)
        assert {k: now[k] for k in subset} == {k: tuned[k] for k in subset}, (how, now, tuned)
        assert {k: now[k] for k in now if k not in subset} == {k: found[k] for k in now if k not in subset}, how

    def back_to_found() -> None:
        run([NETTOP, "restore"], env)
        now = state(ifname)
        # what an engine wrote outside nettop's journal goes back by hand
        if now["txqueuelen"] != found["txqueuelen"]:
            run(["ip", "link", "set", ifname, "txqueuelen", found["txqueuelen"]], env)
        if now["gro"] != found["gro"]:
            run(["ethtool", "-K", ifname, "gro", found["gro"]], env)
        for n in SYSCTLS:
            if proc_sys(n) != found[n]:
                Path("/proc/sys", *n.split(".")).write_text(found[n])
        assert state(ifname) == found

    everything = tuple(found)

    # sysctl.d: procps applies it
    run(["sysctl", "-q", "-p", str(out / "sysctl" / "99-nettop.conf")], env)
    check(SYSCTLS, "sysctl -p")
    back_to_found()

    # .link: systemd-udevd's own builtin applies it to the device
    links = sorted((out / "udev").glob("*.link"))
    assert [p.name for p in links] == [f"10-nettop-{ifname}.link"]
    run_dir = Path("/run/systemd/network")
    run_dir.mkdir(parents=True, exist_ok=True)
    installed = run_dir / links[0].name
    shutil.copy(links[0], installed)
    try:
        p = run(["udevadm", "test-builtin", "net_setup_link", f"/sys/class/net/{ifname}"], env)
        assert str(installed) in p.stdout + p.stderr, p.stderr
    finally:
        installed.unlink()
    check(("txqueuelen", "gro"), "udevadm net_setup_link")
    back_to_found()

    # systemd: the unit's ExecStart, run as systemd would
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(out / "systemd" / "nettop-apply.service")
    argv = shlex.split(unit["Service"]["ExecStart"])
    assert argv[1:3] == ["apply", "--yes"] and argv[3] == str(tmp_path / "installed" / "plan.json")
    (tmp_path / "installed").mkdir()
    shutil.copy(out / "systemd" / "plan.json", tmp_path / "installed" / "plan.json")
    run(argv, env)
    check(everything, "systemd ExecStart")
    back_to_found()

    # tuned: the [sysctl] plugin writes /proc/sys, the [script] plugin runs the script with start
    prof = out / "tuned" / "nettop"
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(prof / "tuned.conf")
    for name, value in conf["sysctl"].items():
        Path("/proc/sys", *name.split(".")).write_text(value)
    script = conf["script"]["script"].replace("${i:PROFILE_DIR}", str(prof))
    run([script, "start"], env)
    check(everything, "tuned")
    back_to_found()

    # ansible: the playbook on localhost, without installing the unit on this machine
    run([str(BIN / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(out / "ansible" / "playbook.yml"),
         "-e", f"nettop_dir={tmp_path / 'ansible-installed'}", "-e", "nettop_install_unit=false",
         "-e", "ansible_become=false", "-e", f"ansible_python_interpreter={sys.executable}"],
        {**env, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
         "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-tmp")})
    check(everything, "ansible-playbook")
    back_to_found()

    # script: one self-contained file
    run(["sh", str(out / "script" / "nettop-apply.sh")], env)
    check(everything, "sh nettop-apply.sh")
    again = run(["sh", str(out / "script" / "nettop-apply.sh")], env)
    assert "nothing to apply" in again.stdout
    back_to_found()


def test_apply_refuses_another_layout_and_a_missing_nic_in_one_line(veth_lab, tmp_path, env):
    ifname = veth_lab.host_if
    run([NETTOP, "set", "txqueuelen", ifname, "1500"], env)
    run([NETTOP, "persist", "--format", "systemd", "-o", str(tmp_path / "p")], env)
    run([NETTOP, "restore"], env)
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())

    wide = dict(plan, cpus_online=list(range(64)), numa_nodes=2)
    (tmp_path / "wide.json").write_text(json.dumps(wide))
    p = run([NETTOP, "apply", str(tmp_path / "wide.json")], env, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "64 CPUs on 2 NUMA" in p.stderr, p.stderr

    gone = json.loads(json.dumps(plan))
    gone["interfaces"][ifname]["mac"] = "02:00:00:00:00:01"
    gone["interfaces"][ifname]["driver"] = "ixgbe"
    (tmp_path / "gone.json").write_text(json.dumps(gone))
    p = run([NETTOP, "apply", str(tmp_path / "gone.json")], env, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not on this host" in p.stderr, p.stderr

    hw = json.loads(json.dumps(plan))
    hw["interfaces"][ifname].update(bus_info="0000:81:00.0", driver="mlx5_core")
    (tmp_path / "hw.json").write_text(json.dumps(hw))
    p = run([NETTOP, "apply", str(tmp_path / "hw.json")], env, check=False)
    assert p.returncode == 2 and "PCI 0000:81:00.0" in p.stderr, p.stderr
    assert Path(f"/sys/class/net/{ifname}/tx_queue_len").read_text().strip() == "1000"


def test_apply_finds_a_renamed_interface_by_its_mac(veth_lab, tmp_path, env):
    ifname = veth_lab.host_if
    run([NETTOP, "set", "txqueuelen", ifname, "1500"], env)
    run([NETTOP, "persist", "--format", "systemd", "-o", str(tmp_path / "p")], env)
    run([NETTOP, "restore"], env)
    new = ifname[:-1] + "r"
    run(["ip", "link", "set", ifname, "down"], env)
    run(["ip", "link", "set", ifname, "name", new], env)
    try:
        p = run([NETTOP, "apply", "--yes", str(tmp_path / "p" / "plan.json")], env)
        assert f"{ifname} = {new} (MAC" in p.stdout, p.stdout
        assert Path(f"/sys/class/net/{new}/tx_queue_len").read_text().strip() == "1500"
        run([NETTOP, "restore"], env)
        assert Path(f"/sys/class/net/{new}/tx_queue_len").read_text().strip() == "1000"
    finally:
        run(["ip", "link", "set", new, "name", ifname], env, check=False)


@pytest.mark.parametrize("text, words", [
    ("", "not JSON"),
    ("[]", "not a nettop plan"),
    ('{"nettop_plan": 99}', "version 99"),
    ('{"nettop_plan": 1, "cpus_online": "0-3", "interfaces": {}, "items": [], "numa_nodes": 1}', "cpus_online"),
    ('{"nettop_plan": 1, "cpus_online": [0], "interfaces": {}, "items": [{"kind": "mtu"}], "numa_nodes": 1}',
     "params"),
    ('{"nettop_plan": 1, "cpus_online": [0], "interfaces": {}, "numa_nodes": 1, '
     '"items": [{"kind": "mtu", "params": {"ifname": "x"}, "value": 1, "iface": "x"}]}', "does not describe"),
    ("\xff\xfe", "not JSON"),
    ("[" * 100000, "not JSON"),
])
def test_bad_plan_files_are_one_line(tmp_path, env, text, words):
    f = tmp_path / "plan.json"
    f.write_text(text, encoding="utf-8", errors="surrogateescape")
    p = run([NETTOP, "apply", "--dry-run", str(f)], env, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr


def test_persist_with_nothing_changed_says_so(tmp_path, env):
    p = run([NETTOP, "persist", "--format", "script", "-o", str(tmp_path / "o")], env, check=False)
    assert p.returncode == 1 and "nothing to persist" in p.stderr and not (tmp_path / "o").exists()
