"""What nettop's eBPF probes cost a packet flood: packets/s with the probes off and on.

Builds its own veth lab (tests/lab.py), floods it with iperf3 UDP (`-u -b 0 -l 1200`,
client on CPU 0, server on CPU 1) and alternates three modes in every round, in
alternating order so drift in the machine's speed favours none: probes off, probes on
(all groups, run-time statistics on, take() every second as nettop does), and probes on
without run-time statistics. The rate is the packets/s the sender pushed through the
pair after a warm-up (the sender's CPU also runs the whole receive path, so it is what
the probes slow down); received packets/s are printed too. Prints each round, the
medians, the drop in % and the probes' own kernel CPU cost.

    sudo .venv/bin/python benchmarks/ebpf_cost.py [--rounds 6] [--seconds 3] [--gro]

--gro turns GRO and UDP GRO forwarding on at the peer, so packets go through veth's own
NAPI instead of the per-CPU backlog (see tests/test_ebpf_lab.py). Target: drop <= 5 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import lab as _lab  # noqa: E402
from nettop.ebpf import EbpfProbes, to_json  # noqa: E402


# Seconds at the start of each flood left out of the packet rate: the probes spend the
# first interval of a flood fully attached before they pick their duty (see duty.py).
WARM_S = 2.0


def flood(lab: _lab.VethLab, seconds: float, port: int,
          probes: EbpfProbes | None = None, costs: list | None = None) -> tuple[float, float]:
    """(sent packets/s after the first WARM_S seconds, received packets/s overall) of
    one iperf3 UDP flood through the lab. With `probes`, take() is called every second
    meanwhile, as nettop's sampler does, and the cost part of each sample taken after
    the warm-up is appended to `costs`."""
    lab.iperf3_server(port)
    cli = lab.iperf3_client(seconds + WARM_S, port=port,
                            extra=["-u", "-b", "0", "-l", "1200", "-A", "0,1"])
    t0 = time.monotonic()
    while probes is not None and cli.poll() is None:
        time.sleep(1.0)
        j = to_json(probes.take())
        if costs is not None and cli.poll() is None and time.monotonic() - t0 > WARM_S + 0.5:
            costs.append({**j["cost"], "duty": j["duty"]})
    out, err = cli.communicate(timeout=seconds + 30)
    if cli.returncode != 0:
        raise RuntimeError(f"iperf3 failed: {err.strip() or out[-300:]}")
    report = json.loads(out)
    steady = [i["sum"] for i in report["intervals"] if i["sum"]["start"] >= WARM_S - 0.01]
    sent = sum(i["packets"] for i in steady) / sum(i["seconds"] for i in steady)
    end = report["end"]["sum"]
    return sent, (end["packets"] - end.get("lost_packets", 0)) / end["seconds"]


def run_on(lab: _lab.VethLab, seconds: float, port: int, measure: bool) -> tuple[
        tuple[float, float], dict]:
    probes = EbpfProbes(measure_cost=measure)
    if not probes.start():
        raise RuntimeError(f"probes did not start: {'; '.join(probes.errors)}")
    try:
        probes.take()
        costs: list[dict] = []
        pps = flood(lab, seconds, port, probes, costs)
        return pps, {"cpu_us_per_s": statistics.median(c["cpu_us_per_s"] for c in costs),
                     "events_per_s": statistics.median(c["events_per_s"] for c in costs),
                     "duty": max(c["duty"] for c in costs)}
    finally:
        probes.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--gro", action="store_true", help="use veth's NAPI (GRO on the peer)")
    args = ap.parse_args()
    ok, why = EbpfProbes.available()
    if not ok:
        print(f"ebpf_cost: {why}", file=sys.stderr)
        return 2
    res: dict[str, list[tuple[float, float]]] = {"off": [], "on": [], "on-nostats": []}
    costs: list[dict] = []
    port = 5301
    with _lab.veth_lab() as lab:
        if args.gro:
            lab.ns_run(["ethtool", "-K", lab.peer_if, "gro", "on",
                        "rx-udp-gro-forwarding", "on"])
        flood(lab, 1.0, port)  # warm-up: ARP, page cache, CPU frequency
        for r in range(args.rounds):
            # Alternate the order so drift of the machine's speed favours neither side.
            order = ["off", "on", "on-nostats"] if r % 2 == 0 else ["on-nostats", "on", "off"]
            for mode in order:
                port += 1
                if mode == "off":
                    res[mode].append(flood(lab, args.seconds, port))
                else:
                    pps, cost = run_on(lab, args.seconds, port, measure=(mode == "on"))
                    res[mode].append(pps)
                    if mode == "on":
                        costs.append(cost)
            print(f"round {r + 1}: sent pkt/s  off {res['off'][-1][0]:8.0f}  "
                  f"on {res['on'][-1][0]:8.0f}  on-nostats {res['on-nostats'][-1][0]:8.0f}  "
                  f"| probes {costs[-1]['cpu_us_per_s']:6.0f} us/s CPU for "
                  f"{costs[-1]['events_per_s']:7.0f} events/s, duty 1/{costs[-1]['duty']}",
                  flush=True)
    print(f"mode: {'veth NAPI (GRO on peer)' if args.gro else 'per-CPU backlog (veth default)'}"
          f", {args.rounds} rounds of {args.seconds:g} s after {WARM_S:g} s of warm-up, "
          "iperf3 -u -b 0 -l 1200")
    med = {m: (statistics.median(p[0] for p in v), statistics.median(p[1] for p in v))
           for m, v in res.items()}
    for m, label in (("off", "probes off"), ("on", "probes on, cost measured"),
                     ("on-nostats", "probes on, cost not measured")):
        sent, recv = med[m]
        drop = 100.0 * (med["off"][0] - sent) / med["off"][0]
        print(f"{label:30s} sent {sent:9.0f} pkt/s  received {recv:9.0f} pkt/s"
              + ("" if m == "off" else f"  drop {drop:+5.1f} % (target <= 5 %)"))
    per_event = statistics.median(
        c["cpu_us_per_s"] * 1000.0 / c["events_per_s"] for c in costs if c["events_per_s"])
    print(f"probes' own kernel CPU: median {statistics.median(c['cpu_us_per_s'] for c in costs):.0f}"
          f" us/s, ~{per_event:.0f} ns per event (run-time statistics on)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
