"""The VM tier: boot Debian's stock kernel under qemu and run tests/vm inside it.

This machine's kernel has no fq_codel, fq, cake or netdevsim, and its veth/virtio devices
take no coalescing or ring changes; Debian's kernel with netdevsim (built for it by
tests/vm/build.sh) has all of them. One boot runs the whole tests/vm directory; its
pytest summary is checked here, and its output is shown when anything fails. Skips, with
the reason, only where the guest cannot be built or booted (not root, not Debian/amd64).
"""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from vm import guest

pytestmark = pytest.mark.vm


@pytest.mark.timeout(2700)  # build ~1.5 min on a clean machine, boot + tests a few minutes under TCG
def test_the_vm_tier_passes_in_a_stock_debian_kernel():
    reason = guest.why_not()
    if reason:
        pytest.skip(reason)
    try:
        work = guest.build()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is missing after the build")
    run = guest.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                     "tests/vm"], work=work, env={"NETTOP_IN_VM": "1"})
    summary = re.findall(r"^=*\s*(\d+ (?:passed|failed|errors?)\b.*?) in [0-9.]+s", run.output, re.M)
    assert run.rc == 0 and summary, f"guest exit {run.rc}:\n{run.output[-6000:]}"
    assert "failed" not in summary[-1] and "error" not in summary[-1], run.output[-6000:]
    passed = int(re.search(r"(\d+) passed", summary[-1]).group(1))  # type: ignore[union-attr]
    assert passed >= 10, f"only {passed} guest tests ran: {summary[-1]}"
    assert "skipped" not in summary[-1], f"guest skipped tests: {summary[-1]}\n{run.output[-3000:]}"
