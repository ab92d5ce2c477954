"""`nettop persist --format F`: a plan written as the artifacts each engine re-applies at boot.

- sysctl:  a sysctl.d file (the sysctl items; the rest listed in comments);
- udev:    systemd .link files, one per NIC (matched by driver + PCI path, or MAC), for
           what systemd-udevd sets when the device appears: txqueuelen, MTU, rings,
           channels, coalescing and offloads (systemd >= 250 for coalescing);
- systemd: a oneshot unit that runs `nettop apply --yes` on plan.json at boot: IRQ
           affinity, RPS, XPS, qdiscs and BQL have no persistent configuration of their own;
- tuned:   a tuned profile: [sysctl] for the sysctls, [script] running nettop apply for
           the rest;
- ansible: a playbook that copies plan.json, installs the unit and applies the plan now;
- script:  one self-contained sh file with the plan inside, for cron, rc.local or ssh.

Every artifact names the host and time it was exported from and how each interface is
matched. Output files are written into a directory; nothing is installed.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Callable

from nettop.fleet.plan import Iface, Item, TuningPlan

FORMATS = ("sysctl", "udev", "systemd", "tuned", "ansible", "script")
DEFAULT_INSTALL_DIR = "/etc/nettop"
UNIT = "nettop-apply.service"

# ethtool key -> systemd.link(5) setting
LINK_KEYS: dict[str, dict[str, str]] = {
    "rings": {"rx": "RxBufferSize", "tx": "TxBufferSize", "rx-mini": "RxMiniBufferSize",
              "rx-jumbo": "RxJumboBufferSize"},
    "channels": {"rx": "RxChannels", "tx": "TxChannels", "other": "OtherChannels", "combined": "CombinedChannels"},
    "coalesce": {"adaptive-rx": "UseAdaptiveRxCoalesce", "adaptive-tx": "UseAdaptiveTxCoalesce",
                 "rx-usecs": "RxCoalesceSec", "rx-frames": "RxMaxCoalescedFrames",
                 "rx-usecs-irq": "RxCoalesceIrqSec", "rx-frames-irq": "RxMaxCoalescedIrqFrames",
                 "tx-usecs": "TxCoalesceSec", "tx-frames": "TxMaxCoalescedFrames",
                 "tx-usecs-irq": "TxCoalesceIrqSec", "tx-frames-irq": "TxMaxCoalescedIrqFrames",
                 "stats-block-usecs": "StatisticsBlockCoalesceSec", "pkt-rate-low": "CoalescePacketRateLow",
                 "pkt-rate-high": "CoalescePacketRateHigh", "sample-interval": "CoalescePacketRateSampleIntervalSec",
                 "rx-usecs-low": "RxCoalesceLowSec", "rx-frames-low": "RxMaxCoalescedLowFrames",
                 "tx-usecs-low": "TxCoalesceLowSec", "tx-frames-low": "TxMaxCoalescedLowFrames",
                 "rx-usecs-high": "RxCoalesceHighSec", "rx-frames-high": "RxMaxCoalescedHighFrames",
                 "tx-usecs-high": "TxCoalesceHighSec", "tx-frames-high": "TxMaxCoalescedHighFrames"},
    "features": {"gro": "GenericReceiveOffload", "gso": "GenericSegmentationOffload",
                 "tso": "TCPSegmentationOffload", "lro": "LargeReceiveOffload", "rx": "ReceiveChecksumOffload",
                 "tx": "TransmitChecksumOffload", "rxvlan": "ReceiveVLANCTAGHardwareAcceleration",
                 "txvlan": "TransmitVLANCTAGHardwareAcceleration", "ntuple": "NTupleFilter",
                 "rx-vlan-filter": "ReceiveVLANCTAGFilter", "gro-hw": "GenericReceiveOffloadHardware"},
}


def _header(plan: TuningPlan, comment: str = "#") -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(plan.created))
    return (f"{comment} nettop persist: exported from {plan.host} ({plan.kernel}) at {when}\n"
            f"{comment} {len(plan.cpus_online)} CPUs online, {plan.numa_nodes} NUMA node(s)\n")


def _matching(iface: Iface) -> str:
    if iface.hardware:
        return f"{iface.name}: driver {iface.driver}, PCI {iface.bus_info}, MAC {iface.mac}"
    return f"{iface.name}: {iface.driver or 'virtual'}, MAC {iface.mac} (no PCI path)"


def _link_value(kind: str, key: str, v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if kind == "coalesce" and key.endswith("usecs") or key == "sample-interval":
        return f"{v}us"
    return str(v)


def sysctl_conf(plan: TuningPlan) -> str:
    out = [_header(plan) + "# apply now: sysctl -p THIS_FILE; at boot: put it in /etc/sysctl.d/\n"]
    rest = []
    for it in plan.items:
        if it.kind == "sysctl":
            out.append(f"{it.params['name']} = {it.value}\n")
        else:
            rest.append(it)
    if rest:
        out.append("\n# not sysctls (persist them with --format systemd, tuned, ansible or script):\n")
        out += [f"#   {it.text}\n" for it in rest]
    return "".join(out)


def link_files(plan: TuningPlan) -> dict[str, str]:
    """One .link file per interface with something .link can hold; plus NOTES for the rest."""
    files: dict[str, str] = {}
    rest: list[Item] = []
    by_iface: dict[str, list[str]] = {}
    for it in plan.items:
        lines: list[str] = []
        if it.kind == "txqueuelen":
            lines = [f"TransmitQueueLength={it.value}"]
        elif it.kind == "mtu":
            lines = [f"MTUBytes={it.value}"]
        elif it.kind in LINK_KEYS and isinstance(it.value, dict):
            keys = LINK_KEYS[it.kind]
            if all(k in keys for k in it.value):
                lines = [f"{keys[k]}={_link_value(it.kind, k, v)}" for k, v in it.value.items()]
        if lines and it.iface:
            by_iface.setdefault(it.iface, []).extend(lines)
        else:
            rest.append(it)
    for name, lines in by_iface.items():
        iface = plan.interfaces[name]
        match = ["[Match]"]
        if iface.hardware:
            match += [f"Path=pci-{iface.bus_info}", f"Driver={iface.driver}"]
        elif iface.mac:
            match += [f"MACAddress={iface.mac}"]
        else:
            match += [f"OriginalName={name}"]
        # the first matching .link file wins: keep Debian's 99-default.link naming with it
        link = ["[Link]", "NamePolicy=keep kernel database onboard slot path",
                "AlternativeNamesPolicy=database onboard slot path"]
        if iface.hardware:
            link.append("MACAddressPolicy=persistent")
        files[f"10-nettop-{name}.link"] = (_header(plan) + f"# matches {_matching(iface)}\n"
                                           "# install in /etc/systemd/network/; applied when the device appears\n"
                                           + "\n".join(match) + "\n\n" + "\n".join(link + lines) + "\n")
    if rest:
        files["NOTES"] = (_header(plan) + "# not expressible in a .link file (use --format systemd for these):\n"
                          + "".join(f"#   {it.text}\n" for it in rest))
    return files


def unit(plan: TuningPlan, nettop: str, install_dir: str) -> str:
    argv = [nettop, "apply", "--yes", os.path.join(install_dir, "plan.json")]
    return (_header(plan)
            + "".join(f"# interface {_matching(i)}\n" for i in plan.interfaces.values())
            + "[Unit]\nDescription=Re-apply nettop's network tuning (IRQ affinity, RPS/XPS, qdiscs, sysctls)\n"
            "After=network-pre.target systemd-udev-settle.service\nWants=network-pre.target\n"
            "Before=network.target\n# irqbalance would move the IRQs back: order after it, or mask it\n"
            "After=irqbalance.service\n\n"
            "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
            f"ExecStart={shlex.join(argv)}\n\n[Install]\nWantedBy=multi-user.target\n")


def tuned_conf(plan: TuningPlan) -> str:
    sysctls = [it for it in plan.items if it.kind == "sysctl"]
    out = [_header(plan), "[main]\n", f"summary=nettop tuning exported from {plan.host}\n"]
    if sysctls:
        out.append("\n[sysctl]\n")
        out += [f"{it.params['name']}={it.value}\n" for it in sysctls]
    out.append("\n[script]\nscript=${i:PROFILE_DIR}/nettop-apply.sh\n")
    return "".join(out)


def tuned_script(nettop: str) -> str:
    return ("#!/bin/sh\n# tuned's script plugin calls this with start or stop\n"
            'here=$(dirname "$0")\n'
            f'[ "$1" = start ] || exit 0\nexec {shlex.quote(nettop)} apply --yes "$here/plan.json"\n')


def playbook(plan: TuningPlan, nettop: str, install_dir: str) -> str:
    ifaces = "".join(f"#   {_matching(i)}\n" for i in plan.interfaces.values())
    return (_header(plan) + ifaces
            + "# run: ansible-playbook -i INVENTORY playbook.yml  (nettop installed on each host)\n"
            "- name: nettop tuning\n  hosts: all\n  become: true\n  vars:\n"
            f"    nettop_bin: {nettop}\n    nettop_dir: {install_dir}\n"
            "    nettop_install_unit: true\n    nettop_unit_dir: /etc/systemd/system\n"
            "  tasks:\n"
            "    - name: plan directory\n      ansible.builtin.file:\n"
            "        path: \"{{ nettop_dir }}\"\n        state: directory\n        mode: \"0755\"\n"
            "    - name: the plan\n      ansible.builtin.copy:\n        src: plan.json\n"
            "        dest: \"{{ nettop_dir }}/plan.json\"\n        mode: \"0644\"\n"
            "    - name: check the plan against this host (refuses other hardware)\n"
            "      ansible.builtin.command:\n"
            "        argv: [\"{{ nettop_bin }}\", apply, --dry-run, \"{{ nettop_dir }}/plan.json\"]\n"
            "      changed_when: false\n"
            "    - name: the boot-time unit\n      ansible.builtin.template:\n"
            f"        src: {UNIT}.j2\n        dest: \"{{{{ nettop_unit_dir }}}}/{UNIT}\"\n        mode: \"0644\"\n"
            "      when: nettop_install_unit | bool\n"
            "    - name: enable it\n      ansible.builtin.systemd:\n"
            f"        name: {UNIT}\n        enabled: true\n        daemon_reload: true\n"
            "      when: nettop_install_unit | bool\n"
            "    - name: apply now\n      ansible.builtin.command:\n"
            "        argv: [\"{{ nettop_bin }}\", apply, --yes, \"{{ nettop_dir }}/plan.json\"]\n"
            "      register: nettop_apply\n"
            "      changed_when: \"'applied ' in nettop_apply.stdout\"\n")


def script(plan: TuningPlan, nettop: str) -> str:
    body = plan.to_json()
    marker = "NETTOP_PLAN_END"
    while marker in body:
        marker += "_"
    return ("#!/bin/sh\n" + _header(plan)
            + "".join(f"# interface {_matching(i)}\n" for i in plan.interfaces.values())
            + "# run as root: sh THIS_FILE [--dry-run]; every change is journaled (nettop undo / restore)\n"
            "set -eu\n"
            f"exec {shlex.quote(nettop)} apply --yes \"$@\" - <<'{marker}'\n{body}{marker}\n")


def write(plan: TuningPlan, fmt: str, out_dir: str, nettop: str, install_dir: str = DEFAULT_INSTALL_DIR) -> list[Path]:
    """Write the artifacts of `fmt` into out_dir; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    makers: dict[str, Callable[[], dict[str, str]]] = {
        "sysctl": lambda: {"99-nettop.conf": sysctl_conf(plan)},
        "udev": lambda: link_files(plan),
        "systemd": lambda: {UNIT: unit(plan, nettop, install_dir), "plan.json": plan.to_json()},
        "tuned": lambda: {"nettop/tuned.conf": tuned_conf(plan), "nettop/nettop-apply.sh": tuned_script(nettop),
                          "nettop/plan.json": _without_sysctls(plan).to_json()},
        "ansible": lambda: {"playbook.yml": playbook(plan, nettop, install_dir), "plan.json": plan.to_json(),
                            f"{UNIT}.j2": unit(plan, "{{ nettop_bin }}", "{{ nettop_dir }}")},
        "script": lambda: {"nettop-apply.sh": script(plan, nettop)},
    }
    files = makers[fmt]()
    paths = []
    for name, text in files.items():
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if name.endswith(".sh"):
            p.chmod(0o755)
        paths.append(p)
    return paths


def _without_sysctls(plan: TuningPlan) -> TuningPlan:
    from dataclasses import replace

    return replace(plan, items=tuple(it for it in plan.items if it.kind != "sysctl"))
