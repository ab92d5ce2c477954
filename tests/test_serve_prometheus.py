"""`nettop serve` scraped by a real Prometheus server (Debian's `prometheus`), on the veth lab.

The test starts `nettop serve` for the lab's interface and a Prometheus on free local
ports (scrape interval 1 s, its own config and TSDB in tmp), sends steady iperf3 UDP
traffic through the veth, and compares PromQL `rate(...[10s])` with nettop's own rates
(HostReader + compute_rates) over the same 10 s. `promtool check metrics` judges the
exposition. Both servers are killed even when the test fails.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from nettop.collectors.host import HostReader
from nettop.kernel.sysroot import LIVE
from nettop.model.rates import compute_rates
from nettop.serve.exposition import Family, escape_label, render
from nettop.serve.server import ServeError, parse_listen

NETTOP = str(Path(sys.executable).with_name("nettop"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(url: str, proc: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            get(url, timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {seconds:g} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def promql(port: int, query: str, at: float) -> float:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    doc = json.loads(get(url))
    assert doc["status"] == "success", doc
    result = doc["data"]["result"]
    assert len(result) == 1, (query, result)
    return float(result[0]["value"][1])


def promtool_check(text: str) -> None:
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p.stdout + p.stderr


@pytest.fixture
def prometheus_bin():
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.fail("Debian's prometheus package is missing: ./setup.sh test installs it")
    return shutil.which("prometheus")


@pytest.mark.lab
@pytest.mark.timeout(180)
def test_promql_rates_over_10s_of_veth_traffic_equal_nettops_own(veth_lab, tmp_path, prometheus_bin):
    lab = veth_lab
    nport, pport = free_port(), free_port()
    serve = subprocess.Popen([NETTOP, "serve", "--listen", f"127.0.0.1:{nport}", "-i", "1", "--iface", lab.host_if,
                              "--ping", lab.peer_ip, "--ping-interval", "0.1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    conf = tmp_path / "prometheus.yml"
    conf.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"scrape_configs:\n  - job_name: nettop\n    static_configs:\n      - targets: ['127.0.0.1:{nport}']\n")
    prom = subprocess.Popen([prometheus_bin, f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{pport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(f"http://127.0.0.1:{nport}/metrics", serve)
        wait_for(f"http://127.0.0.1:{pport}/-/ready", prom)
        lab.iperf3_server()
        load = lab.iperf3_client(22, extra=["-u", "-b", "200M", "-l", "1400"])
        time.sleep(6)  # steady: the ramp is outside the window
        with HostReader(LIVE, [lab.host_if]) as r:
            a = r.read()
            time.sleep(10)
            b = r.read()
        ours = compute_rates(a, b).links[lab.host_if]
        time.sleep(3)  # the scrapes of the window's end are in Prometheus now
        sel = f'{{iface="{lab.host_if}"}}'
        theirs_bytes = promql(pport, f"rate(nettop_iface_transmit_bytes_total{sel}[10s])", b.t_wall)
        theirs_pkts = promql(pport, f"rate(nettop_iface_transmit_packets_total{sel}[10s])", b.t_wall)
        load.wait(30)
        print(f"\ntx bytes/s: PromQL {theirs_bytes:,.0f} nettop {ours.tx_bytes_per_s:,.0f}; "
              f"tx packets/s: PromQL {theirs_pkts:,.0f} nettop {ours.tx_packets_per_s:,.0f}")
        assert ours.tx_bytes_per_s and ours.tx_bytes_per_s > 5e6, ours  # the traffic was there
        assert abs(theirs_bytes - ours.tx_bytes_per_s) <= 0.02 * ours.tx_bytes_per_s, (theirs_bytes, ours)
        assert ours.tx_packets_per_s is not None
        assert abs(theirs_pkts - ours.tx_packets_per_s) <= 0.02 * ours.tx_packets_per_s, (theirs_pkts, ours)
        # the prober's histogram: ~10 probes/s, none lost, RTT quantile answers
        probes = promql(pport, f'rate(nettop_ping_probes_total{{target="{lab.peer_ip}"}}[10s])', b.t_wall)
        assert 8 <= probes <= 12, probes
        p99 = promql(pport, f'histogram_quantile(0.99, rate(nettop_ping_rtt_seconds_bucket{{target="{lab.peer_ip}"}}[10s]))',
                     b.t_wall)
        assert 0 < p99 < 0.1, p99
        assert promql(pport, 'up{job="nettop"}', b.t_wall) == 1
        promtool_check(get(f"http://127.0.0.1:{nport}/metrics"))
    finally:
        stop(prom)
        stop(serve)


@pytest.mark.lab
def test_per_cpu_irq_series_are_opt_in_and_pass_promtool(tmp_path):
    """eth0 (virtio, real MSI-X IRQs) only read: its queue IRQs per CPU appear with the flag."""
    if shutil.which("promtool") is None:
        pytest.fail("Debian's prometheus package is missing: ./setup.sh test installs it")
    from nettop.serve.metrics import Options, snapshot_families
    from nettop.serve.exposition import series_count

    with HostReader(LIVE) as r:
        snap = r.read()
    plain = snapshot_families(snap)
    wide = snapshot_families(snap, Options(per_cpu_irqs=True))
    irqs = sum(len(q.irqs) for m in snap.queue_maps.values() for q in m.queues)
    if irqs == 0:
        pytest.skip("no queue IRQs on this host")
    assert series_count(wide) - series_count(plain) == irqs * len(snap.interrupts.cpus)
    promtool_check(render(plain))
    promtool_check(render(wide))


def test_label_values_are_escaped_and_promtool_accepts_them():
    fam = Family("nettop_test_total", "counter", 'help with \\ and\nnewline')
    fam.add({"iface": 'we"ird\\na\nme'}, 3)
    text = render([fam])
    assert 'iface="we\\"ird\\\\na\\nme"' in text
    assert escape_label("é") == "é"
    if shutil.which("promtool"):
        promtool_check(text)


@pytest.mark.parametrize("text, allow, want", [
    ("127.0.0.1:9741", False, ("127.0.0.1", 9741)),
    ("localhost:80", False, ("127.0.0.1", 80)),
    ("[::1]:9741", False, ("::1", 9741)),
    ("0.0.0.0:9741", True, ("0.0.0.0", 9741)),
])
def test_listen_addresses(text, allow, want):
    got = parse_listen(text, allow)
    assert (got.host, got.port) == want


@pytest.mark.parametrize("text, allow, words", [
    ("0.0.0.0:9741", False, "--allow-remote"),
    ("[::]:9741", False, "--allow-remote"),
    ("127.0.0.1", False, "ADDRESS:PORT"),
    ("127.0.0.1:0", False, "1 to 65535"),
    ("127.0.0.1:７", False, "1 to 65535"),
    ("host.example:9741", False, "not an IP address"),
])
def test_bad_listen_addresses_are_one_line(text, allow, words):
    with pytest.raises(ServeError) as exc:
        parse_listen(text, allow)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_the_cli_refuses_a_remote_bind_without_the_flag_in_one_line():
    p = subprocess.run([NETTOP, "serve", "--listen", "0.0.0.0:9741"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--allow-remote" in p.stderr, p.stderr


def test_a_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([NETTOP, "serve", "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True,
                           timeout=60)
    assert p.returncode == 2 and "in use" in p.stderr and p.stderr.count("\n") == 1, p.stderr
