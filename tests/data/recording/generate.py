"""Write a recording fixture with the nettop of another checkout: formatN.nettop and its
digests (tests/test_record_format2.py replays it with today's reader).

    python tests/data/recording/generate.py CHECKOUT VERSION

130 samples of a generated 4-CPU host (tests/treegen.py of CHECKOUT, its counters at
second k for sample k, each CPU's softirq share moving), read by that checkout's
HostReader on a clock that steps 1 s per read; the host is renamed at sample 100 (a new
configuration). Digests are of the snapshots themselves (repr), so any later codec must
give back the same objects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import tempfile
from pathlib import Path

checkout, version = Path(sys.argv[1]).resolve(), int(sys.argv[2])
sys.path[:0] = [str(checkout), str(checkout / "tests")]

from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import SysRoot  # noqa: E402
from nettop.record.store import SCHEMA_VERSION, Writer  # noqa: E402
from stepped_clock import SteppedClock  # noqa: E402
from treegen import generate_tree  # noqa: E402

assert SCHEMA_VERSION == version, f"{checkout} writes format {SCHEMA_VERSION}, not {version}"
here = Path(__file__).resolve().parent
out = here / f"format{version}.nettop"
for f in here.glob(f"format{version}.nettop*"):
    f.unlink()
digests = []
with tempfile.TemporaryDirectory() as tmp:
    tree = Path(tmp) / "gen4"
    generate_tree(tree, cpus=4, irqs=64, queues=4, step=0, wave=True)
    reader = HostReader(SysRoot(str(tree)), clock=SteppedClock(1.0))
    writer = Writer(str(out), {"host": "gen4", "kernel": reader.kernel, "interval_s": 1.0})
    for k in range(130):
        generate_tree(tree, cpus=4, irqs=64, queues=4, step=k, wave=True)
        snap = reader.read()
        if k >= 100:
            snap = dataclasses.replace(snap, host="gen4-renamed")
        writer.add_sample(snap)
        digests.append(hashlib.sha1(repr(snap).encode()).hexdigest())
    writer.close()
    reader.close()
(here / f"format{version}.sha1.json").write_text(json.dumps(digests, indent=0) + "\n")
print(f"{out}: {len(digests)} samples, format {version}")
