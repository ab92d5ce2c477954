"""`--root ARCHIVE`: a `nettop capture` file or a plain tarball of /proc and /sys, opened
safely (nothing written outside a private directory)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from treegen import LINK_RX_BYTES_RATE, generate_tree
from nettop.cli import main
from nettop.capture.tree import TreeWriter


def run(capsys, *argv: str):  # type: ignore[no-untyped-def]
    capsys.readouterr()
    rc = main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_a_plain_tarball_of_a_tree_is_opened_since_boot(tmp_path, capsys):
    tree = generate_tree(tmp_path / "host", cpus=4, irqs=12, queues=4)
    arc = tmp_path / "host.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
    rc, out, err = run(capsys, "snapshot", "--json", "--root", str(arc))
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["host"] == "gen4" and doc["rates_basis"] == "since_boot"
    assert doc["interfaces"]["eth0"]["rx_bytes_per_s"] > 0


def test_a_two_capture_archive_gives_rates_between_its_captures(tmp_path, capsys):
    """The archive layout `nettop capture --twice` writes, from two treegen trees copied by
    the capture's own TreeWriter (as it copies the live host)."""
    top = tmp_path / "arc/nettop-capture"
    for d, step in (("1", 0), ("2", 10)):
        src = generate_tree(tmp_path / f"src{d}", cpus=4, irqs=12, queues=4, step=step)
        w = TreeWriter(top / d, str(src))
        w.capture()
        assert not (top / d / "sys/devices/pci0000:80/0000:81:00.0/net/eth0/address").exists()
        assert (top / d / "sys/class/net/eth0").is_symlink()
    (top / "capture.json").write_text(json.dumps({"format": "nettop.capture/1", "captures": []}))
    arc = tmp_path / "c.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(top), arcname="nettop-capture")
    rc, out, err = run(capsys, "snapshot", "--json", "--root", str(arc))
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["rates_basis"] == "between_captures" and doc["interval_s"] == 10.0
    assert doc["interfaces"]["eth0"]["rx_bytes_per_s"] == LINK_RX_BYTES_RATE
    assert len(doc["interfaces"]["eth0"]["queues"]) == 4
    rc, out, err = run(capsys, "doctor", "--root", str(arc))
    assert "judged on two captures 10.00 s apart" in out


def test_a_hostile_archive_writes_nothing_outside(tmp_path, capsys):
    tree = generate_tree(tmp_path / "host", cpus=2, irqs=8, queues=2)
    arc = tmp_path / "bad.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(str(tree), arcname="host")
        for name in ("../escaped", "/tmp/abs-escaped"):
            data = b"x"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("host/proc/evil")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../../../etc/passwd"
        tar.addfile(link)
    rc, out, err = run(capsys, "snapshot", "--json", "--root", str(arc))
    assert rc == 0, err
    assert not (tmp_path.parent / "escaped").exists() and not Path("/tmp/abs-escaped").exists()


def test_an_archive_without_a_tree_is_one_line(tmp_path, capsys):
    arc = tmp_path / "empty.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        info = tarfile.TarInfo("readme")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SystemExit) as e:
        main(["snapshot", "--root", str(arc)])
    assert e.value.code == 2
    assert "holds no tree" in capsys.readouterr().err
