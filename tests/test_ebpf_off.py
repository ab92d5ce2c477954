"""The probes' graceful-off paths: no bcc, not root, a missing tracepoint, not started.

Each path must give one line naming what is missing and the fix, and nettop must run
on: available() answers, start() returns False without raising, take() returns an
empty sample carrying the errors. "No bcc" and "not root" run in a child Python so the
test process keeps its bcc and its root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nettop.ebpf import EbpfProbes, to_json
from nettop.ebpf.program import PROBES

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, os, sys
{prelude}
from nettop.ebpf import EbpfProbes, to_json
ok, why = EbpfProbes.available()
p = EbpfProbes()
started = p.start()
print(json.dumps({{"ok": ok, "why": why, "started": started, "errors": list(p.errors),
                  "take": to_json(p.take())["errors"], "running": p.running}}))
"""


def _child(prelude: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD.format(prelude=prelude)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_bcc_available_says_how_to_install_it_and_start_does_not_raise():
    # A None entry in sys.modules makes `import bcc` raise ImportError, as on a host
    # without python3-bpfcc.
    r = _child("sys.modules['bcc'] = None")
    assert r["ok"] is False
    assert r["why"] == ("bcc is not installed: apt-get install python3-bpfcc "
                        "linux-headers-$(uname -r)")
    assert r["started"] is False and r["running"] is False
    assert r["errors"] == [r["why"]] and r["take"] == [r["why"]]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_not_root_says_to_run_with_sudo():
    r = _child("os.seteuid(65534)")
    assert r["ok"] is False
    assert r["why"].startswith("eBPF probes need root") and "sudo" in r["why"]
    assert r["started"] is False and r["errors"] == [r["why"]]


class _GoneNapi(EbpfProbes):
    PROBES = {**PROBES, "napi": ("napi:napi_poll_gone",)}


_ok, _why = EbpfProbes.available()


@pytest.mark.skipif(not _ok, reason=_why)
def test_a_missing_tracepoint_turns_off_only_its_probe():
    ok, why = _GoneNapi.available()
    assert ok is False
    assert why == "tracepoint napi:napi_poll_gone missing on this kernel: the napi probe is off"
    assert _GoneNapi.available(("softirq",)) == (True, "eBPF probes available: softirq")
    probes = _GoneNapi(("napi", "softirq"))
    try:
        assert probes.start() is True
        assert probes.attached == ("softirq",)
        assert probes.errors == (why,)
        sample = probes.take()
        assert sample.probes == ("softirq",) and sample.napi == ()
        assert sample.errors == (why,)
    finally:
        probes.stop()


def test_only_missing_tracepoints_means_nothing_starts():
    probes = _GoneNapi(("napi",))
    if not _ok:
        pytest.skip(_why)
    assert probes.start() is False and not probes.running
    assert probes.errors == ("tracepoint napi:napi_poll_gone missing on this kernel: "
                             "the napi probe is off",)


def test_take_before_start_is_an_empty_sample_with_a_reason():
    s = EbpfProbes().take()
    assert s.napi == () and s.drops == () and s.errors == ("eBPF probes are not running",)
    assert to_json(s)["errors"] == ["eBPF probes are not running"]


def test_unknown_probe_names_are_ignored():
    assert EbpfProbes(("napi", "bogus")).probes == ("napi",)


@pytest.mark.skipif(not _ok, reason=_why)
def test_start_compiles_from_a_worker_thread_and_stop_is_idempotent():
    probes = EbpfProbes(("hardirq",))
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(probes.start()))
    t.start()
    t.join(timeout=120)
    try:
        assert result == [True] and probes.running and probes.errors == ()
        assert probes.start() is True  # already running: no second load
    finally:
        probes.stop()
        probes.stop()
    assert not probes.running
