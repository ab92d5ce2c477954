"""Fixtures of the real-driver tier's guest (tests/vm/realdrv.py boots it).

The NICs are brought up once per session. One recorder, started before the first
change and stopped by the last test, records the whole sequence of changes with the
journal the tests' Tuner writes, as `nettop record` would; the file lands in the share
that comes back to the host (/tmp/vmout), where tests/test_vm_realdrv.py replays it.
Each test adds rows to EFFECTS, printed at the end as tab-separated EFFECT lines that
benchmarks/effects.py turns into the effects table.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import kernel_view as kv  # noqa: E402

from nettop.actions import Journal, Tuner  # noqa: E402
from nettop.collectors.host import HostReader  # noqa: E402
from nettop.kernel.sysroot import LIVE  # noqa: E402
from nettop.record.recorder import Recorder  # noqa: E402

EFFECTS: list[tuple[str, ...]] = []
OUT = Path("/tmp/vmout")
RECORDING = "realdrv.nettop"


def effect(action: str, figure: str, before: str, after: str, independent: str) -> None:
    EFFECTS.append((action, figure, before, after, independent))


NIC_DRIVERS: dict[str, str] = {}  # ifname -> driver, printed as NIC lines for benchmarks/effects.py


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    for ifname, driver in sorted(NIC_DRIVERS.items()):
        terminalreporter.write_line(f"NIC\t{ifname}\t{driver}")
    for row in EFFECTS:
        terminalreporter.write_line("EFFECT\t" + "\t".join(row))


@pytest.fixture(scope="session")
def nics() -> kv.Nics:
    if os.environ.get("NETTOP_IN_REALDRV") != "1":
        pytest.fail("tests/vm_realdrv runs in the real-driver guest only (tests/test_vm_realdrv.py)")
    found = kv.bring_up()
    for ifname in (found.virtio, found.e1000e):
        try:
            NIC_DRIVERS[ifname] = os.path.basename(os.readlink(f"/sys/class/net/{ifname}/device/driver"))
        except OSError:
            NIC_DRIVERS[ifname] = "unknown driver"
    return found


@pytest.fixture(scope="session")
def journal_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("journal") / "journal.jsonl")


@pytest.fixture
def tuner(journal_path: str) -> Tuner:
    return Tuner(Journal(journal_path), read_only=None)


class Recording:
    """A Recorder on its own thread; `stop()` returns the file's path."""

    def __init__(self, nics: kv.Nics, journal: str) -> None:
        # SQLite cannot lock a file on the 9p share: record on the guest's tmpfs, copy at stop
        self.path = f"/tmp/{RECORDING}"
        self.reader = HostReader(LIVE, [nics.virtio, nics.e1000e])
        self.rec = Recorder(self.reader, self.path, interval=1.0, meta={"host": "realdrv-guest"},
                            journal=journal, out=open(os.devnull, "w"))
        self.thread = threading.Thread(target=self.rec.run, daemon=True)
        self.thread.start()

    def stop(self) -> str:
        if self.thread.is_alive():
            self.rec.request_stop()
            self.thread.join(30)
            self.reader.close()
            if OUT.is_dir():
                shutil.copyfile(self.path, OUT / RECORDING)
        return self.path


@pytest.fixture(scope="session")
def recording(nics: kv.Nics, journal_path: str) -> Iterator[Recording]:
    rec = Recording(nics, journal_path)
    yield rec
    rec.stop()
