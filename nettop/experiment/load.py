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
        self._done: list[tuple[str, str]] | None = None
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

    def ended(self) -> bool:
        return bool(self.procs) and all(p.poll() is not None for p in self.procs)

    def _outputs(self, timeout: float) -> list[tuple[str, str]]:
        """(stdout, stderr) of each client, read once: results() and why() both need them."""
        if self._done is None:
            done = []
            for p in self.procs:
                try:
                    stdout, stderr = p.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    p.kill()
                    stdout, stderr = p.communicate()
                except ValueError:  # streams already closed by stop()
                    stdout, stderr = "", ""
                done.append((stdout or "", stderr or ""))
            self._done = done
        return self._done

    def why(self) -> str:
        """One line on why the clients ended: iperf3's own error ("unable to connect to
        server: Connection refused"), else the first line a client wrote to stderr, else
        the exit status. Call it once ended() is true."""
        outs = self._outputs(5)
        for (stdout, stderr), p in zip(outs, self.procs):
            try:
                doc = json.loads(stdout) if stdout.lstrip().startswith("{") else {}
            except ValueError:
                doc = {}
            err = doc.get("error") if isinstance(doc, dict) else None
            line = str(err) if err else next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
            if line or p.returncode:
                text = f"{p.args[0] if isinstance(p.args, list) else 'the load'}: {line or f'exit status {p.returncode}'}"
                return text if len(text) <= 200 else text[:199] + "…"
        return "the load's commands exited without an error"

    def results(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Each client's JSON (iperf3) once it ends; {} for one that failed or was killed."""
        out = []
        for stdout, _ in self._outputs(timeout):
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
