"""The load of an experiment: iperf3 clients (and, in a namespace, their servers), or any argv.

iperf3 takes at most 128 parallel streams per client, so N flows are ceil(N/128) clients
on consecutive ports (a server per port). Clients print one JSON document each; a
client that is killed early (the dead-man switch) leaves no figures, not wrong ones.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from nettop.experiment.plan import IPERF3_MAX_PARALLEL, Load


class LoadError(Exception):
    pass


def start_servers(load: Load) -> list[subprocess.Popen[bytes]]:
    """iperf3 servers inside load.server_netns, one per client port; ready when this returns."""
    if not load.server_netns or load.kind == "command":
        return []
    procs = []
    for i in range(load.clients):
        port = load.port + i
        procs.append(subprocess.Popen(["ip", "netns", "exec", load.server_netns, "iperf3", "-s", "-p", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ss = subprocess.run(["ip", "netns", "exec", load.server_netns, "ss", "-ltnH", f"sport = :{port}"],
                                capture_output=True, text=True)
            if ss.stdout.strip():
                break
            time.sleep(0.05)
        else:
            stop(procs)
            raise LoadError(f"iperf3 server on port {port} in {load.server_netns} did not start")
    return procs


class Running:
    """The clients of one phase."""

    def __init__(self, load: Load, target: str, seconds: float) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        if load.kind == "command":
            self.procs.append(subprocess.Popen(list(load.argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True))
            return
        left = load.flows
        for i in range(load.clients):
            n = min(left, IPERF3_MAX_PARALLEL)
            left -= n
            argv = ["iperf3", "-c", target, "-p", str(load.port + i), "-t", f"{seconds:g}", "-J", "-P", str(n)]
            if load.kind == "udp":
                argv += ["-u", "-b", str(load.rate)]
            if load.reverse:
                argv.append("-R")
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        self.json = load.kind != "command"

    def kill(self) -> None:
        stop(self.procs)

    def results(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Each client's JSON (iperf3) once it ends; {} for one that failed or was killed."""
        out = []
        for p in self.procs:
            try:
                stdout, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, _ = p.communicate()
            doc: dict[str, Any] = {}
            if getattr(self, "json", False) and stdout:
                try:
                    parsed = json.loads(stdout)
                    doc = parsed if isinstance(parsed, dict) and "error" not in parsed else {}
                except ValueError:
                    doc = {}
            out.append(doc)
        return out


def stop(procs: list[Any]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError):
            pass
