"""`nettop record --dir`: one file per period, retention, SIGHUP, a full disk, a deleted directory."""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from nettop.collectors.host import HostReader
from nettop.record.rotate import RETRY_S, DirWriter, Rotation
from nettop.record.series import Recordings, listing
from nettop.record.store import Reader, RecordingError

NETTOP = [sys.executable, "-m", "nettop.cli"]
T0 = 1_800_000_000.0  # a multiple of every period used here: files start on a boundary


class FakeClock:
    """The recorder's clocks, moved by the test: `step` moves only the wall clock."""

    def __init__(self, wall: float = T0, mono: float = 5000.0) -> None:
        self.t_wall, self.t_mono = wall, mono

    def wall(self) -> float:
        return self.t_wall

    def mono(self) -> float:
        return self.t_mono

    def tick(self, s: float = 1.0) -> None:
        self.t_wall += s
        self.t_mono += s


@pytest.fixture(scope="module")
def base():
    with HostReader() as r:
        return r.read()


def _snap(base, clock: FakeClock, i: int):
    """A real host snapshot stamped with the fake clocks, its lo counters moving."""
    lo = base.links.get("lo") or next(iter(base.links.values()))
    link = dataclasses.replace(lo, rx_bytes=lo.rx_bytes + i * 1000)
    return dataclasses.replace(base, t_wall=clock.wall(), t_mono=clock.mono(), links={**base.links, lo.name: link})


def _run(writer: DirWriter, base, clock: FakeClock, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        writer.add_sample(_snap(base, clock, i), [])
        clock.tick()


def test_one_file_per_period_each_replayable_on_its_own(tmp_path, base):
    clock = FakeClock()
    w = DirWriter(Rotation(str(tmp_path / "rec"), period=10.0), {"host": "h", "interval_s": 1.0},
                  clock=clock, out=io.StringIO(), err=io.StringIO())
    _run(w, base, clock, 35)
    w.close()
    files = listing(str(tmp_path / "rec"))
    assert [e.seq for e in files] == [1, 2, 3, 4]
    counts = []
    for e in files:
        r = Reader(e.path)  # each file alone: its own schema, meta and key sample
        assert r.warnings == [] and r.meta["file_seq"] == str(e.seq)
        counts.append(len(list(r.snapshots())))
        r.close()
    assert counts == [10, 10, 10, 5] and w.samples == 35 and w.lost == 0
    assert os.path.basename(files[0].path) == "nettop-000001-20270115T080000Z.nettop"
    assert oct(os.stat(files[0].path).st_mode & 0o777) == "0o600"


def test_hup_closes_the_file_and_opens_the_next(tmp_path, base):
    clock = FakeClock()
    w = DirWriter(Rotation(str(tmp_path), period=3600.0), {}, clock=clock, out=io.StringIO(), err=io.StringIO())
    _run(w, base, clock, 3)
    w.hup.set()
    _run(w, base, clock, 2, start=3)
    w.close()
    assert [len(Reader(e.path)) for e in listing(str(tmp_path))] == [3, 2]


def test_a_new_recorder_goes_on_with_the_next_sequence_number(tmp_path, base):
    for _ in range(2):
        clock = FakeClock()  # the same wall time twice: only the sequence tells them apart
        w = DirWriter(Rotation(str(tmp_path)), {}, clock=clock, out=io.StringIO(), err=io.StringIO())
        _run(w, base, clock, 2)
        w.close()
    assert [e.seq for e in listing(str(tmp_path))] == [1, 2]


def test_a_second_recorder_into_the_same_directory_is_one_line(tmp_path, base):
    first = DirWriter(Rotation(str(tmp_path)), {}, clock=FakeClock(), out=io.StringIO(), err=io.StringIO())
    with pytest.raises(RecordingError) as err:
        DirWriter(Rotation(str(tmp_path)), {}, clock=FakeClock(), out=io.StringIO(), err=io.StringIO())
    assert str(err.value) == (f"another nettop (pid {os.getpid()}) is recording into {tmp_path}; "
                              "stop it or choose another --dir")
    first.close()
    DirWriter(Rotation(str(tmp_path)), {}, clock=FakeClock(), out=io.StringIO(), err=io.StringIO()).close()
    assert [e.seq for e in listing(str(tmp_path))] == [1, 2]


def test_keep_size_deletes_the_oldest_first_never_the_current(tmp_path, base):
    clock = FakeClock()
    out = io.StringIO()
    w = DirWriter(Rotation(str(tmp_path), period=5.0, keep_size=1), {}, clock=clock, out=out, err=io.StringIO())
    _run(w, base, clock, 23)
    left = listing(str(tmp_path))
    assert [e.path for e in left] == [w.path]  # 1 byte: only the file being written stays
    assert len(w.removed) == 4 and w.removed == sorted(w.removed)
    assert "beyond --keep-size" in out.getvalue()
    w.close()


def test_keep_size_keeps_the_newest_files_that_fit(tmp_path, base):
    clock = FakeClock()
    w = DirWriter(Rotation(str(tmp_path), period=5.0), {}, clock=clock, out=io.StringIO(), err=io.StringIO())
    _run(w, base, clock, 20)
    w.close()
    sizes = [os.path.getsize(e.path) for e in listing(str(tmp_path))]
    assert len(sizes) == 4
    empty = tmp_path / "empty"
    empty.mkdir()
    DirWriter(Rotation(str(empty)), {}, clock=clock, out=io.StringIO(), err=io.StringIO()).close()
    new_file = sum(os.path.getsize(e.path) for e in listing(str(empty)))
    clock.tick(1)
    budget = sum(sizes[2:]) + new_file + min(sizes) // 2  # files 3, 4 and the new one fit; 2 does not
    w = DirWriter(Rotation(str(tmp_path), period=5.0, keep_size=budget), {}, clock=clock,
                  out=io.StringIO(), err=io.StringIO())
    names = [os.path.basename(p) for p in w.removed]
    assert names[0].startswith("nettop-000001-") and names[1].startswith("nettop-000002-")
    assert [e.seq for e in listing(str(tmp_path))] == [3, 4, 5]
    w.close()


def test_keep_age_deletes_files_older_than_it(tmp_path, base):
    clock = FakeClock()
    w = DirWriter(Rotation(str(tmp_path), period=5.0), {}, clock=clock, out=io.StringIO(), err=io.StringIO())
    _run(w, base, clock, 15)
    w.close()
    files = listing(str(tmp_path))
    for age_h, e in zip((50, 30, 1), files):  # modification times 50 h, 30 h and 1 h before "now"
        os.utime(e.path, (clock.wall() - age_h * 3600,) * 2)
    w = DirWriter(Rotation(str(tmp_path), period=5.0, keep_age=86400.0), {}, clock=clock,
                  out=io.StringIO(), err=io.StringIO())
    assert [e.seq for e in listing(str(tmp_path))] == [3, 4]
    w.close()


def test_a_wall_clock_stepped_back_does_not_make_a_file_twice_as_long(tmp_path, base):
    clock = FakeClock()
    w = DirWriter(Rotation(str(tmp_path), period=10.0), {}, clock=clock, out=io.StringIO(), err=io.StringIO())
    _run(w, base, clock, 5)
    clock.t_wall -= 3600  # NTP steps the clock back an hour mid-file
    _run(w, base, clock, 15, start=5)
    w.close()
    counts = [len(Reader(e.path)) for e in listing(str(tmp_path))]
    assert counts[0] == 10 and sum(counts) == 20  # the monotonic clock ends the period


@pytest.mark.parametrize("args,words", [
    (["--keep", "7x"], "duration '7x' is not a duration"),
    (["--keep-size", "2Q"], "size '2Q' is not a size"),
    (["--period", "0s"], "must be positive"),
])
def test_bad_values_are_one_line(tmp_path, args, words):
    p = subprocess.run([*NETTOP, "record", "--dir", str(tmp_path), *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr


@pytest.mark.parametrize("args,line", [
    (["-o", "x.nettop", "--keep", "7d"], "nettop: --keep needs --dir DIR (a single -o FILE is never rotated)\n"),
    (["--dir", "d", "--max-size", "1G"], "nettop: --max-size stops a single file; with --dir use --keep-size\n"),
    (["--dir", "d", "--period", "0.5"], "nettop: --period must be at least 1 s\n"),
])
def test_options_that_do_not_go_together_are_one_line(tmp_path, args, line):
    p = subprocess.run([*NETTOP, "record", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (p.returncode, p.stderr) == (2, line)
    assert os.listdir(tmp_path) == []


def test_a_dir_that_is_a_file_is_one_line(tmp_path):
    f = tmp_path / "plain"
    f.write_text("x")
    p = subprocess.run([*NETTOP, "record", "--dir", str(f)], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (1, f"nettop: {f} is not a directory; give --dir a directory\n")


def test_a_dir_without_permission_is_one_line(tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the recorder as nobody")
    top = tempfile.mkdtemp(prefix="nettop-perm-", dir="/tmp")  # pytest's own tmp is 0700: nobody cannot reach it
    d = os.path.join(top, "locked")
    os.mkdir(d, 0o755)
    os.chmod(top, 0o755)
    try:
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *NETTOP,
                            "record", "--dir", d, "--iface", "lo"],
                           capture_output=True, text=True, timeout=60, cwd="/", env={**os.environ, "HOME": "/nonexistent"})
        left = os.listdir(d)
    finally:
        shutil.rmtree(top)
    if "No module named" in p.stderr or "Permission denied: '" in p.stderr:
        pytest.skip(f"nobody cannot run this checkout: {p.stderr.strip()[-120:]}")
    assert p.returncode == 1 and p.stderr == (
        f"nettop: no permission to write in {d}; run as its owner or choose another --dir\n"), p.stderr
    assert left == []


def _wait(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _samples(directory):
    r = Recordings(str(directory))
    try:
        return list(r.snapshots()), r.files, r.warnings
    finally:
        r.close()


def _no_gap(snaps, interval):
    """Consecutive samples, in recorded order, never further apart than a few intervals."""
    gaps = [b.t_mono - a.t_mono for a, b in zip(snaps, snaps[1:])]
    return all(0 < g < interval * 6 for g in gaps), max(gaps, default=0)


def test_sighup_to_the_recorder_starts_the_next_file_and_loses_no_sample(tmp_path):
    d = tmp_path / "rec"
    p = subprocess.Popen([*NETTOP, "record", "--dir", str(d), "-i", "0.1", "--iface", "lo"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: d.is_dir() and len(listing(str(d))) == 1 and len(Reader(listing(str(d))[0].path)) >= 5)
        p.send_signal(signal.SIGHUP)
        assert _wait(lambda: len(listing(str(d))) == 2 and len(Reader(listing(str(d))[1].path)) >= 5)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and err == "", err
    snaps, files, warnings = _samples(d)
    assert len(files) == 2 and warnings == []
    ok, worst = _no_gap(snaps, 0.1)
    assert ok, worst


def _fill(path) -> None:
    """Fill the file system of `path` to its last block."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_kill_9_at_random_moments_leaves_a_directory_that_replays(tmp_path):
    import random
    rnd = random.Random(28)
    d = tmp_path / "rec"
    for _ in range(6):
        p = subprocess.Popen([*NETTOP, "record", "--dir", str(d), "-i", "0.1", "--iface", "lo", "--period", "1s"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(1.0, 3.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
    (d / "nettop-000999-20270115T080000Z.nettop.4242.new").write_bytes(b"half")  # as a kill mid-creation leaves
    w = DirWriter(Rotation(str(d)), {}, out=io.StringIO(), err=io.StringIO())
    w.close()
    assert not [n for n in os.listdir(d) if ".new" in n]
    r = Recordings(str(d))
    assert r.warnings == [] and len(r.files) >= 3  # a kill before the first file leaves none: fine
    assert len(list(r.snapshots())) == len(r) >= 10
    r.close()


@pytest.fixture
def small_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_at_a_rotation_drops_samples_keeps_every_file_and_recovers(small_fs, base):
    clock = FakeClock()
    err = io.StringIO()
    d = small_fs / "rec"
    w = DirWriter(Rotation(str(d), period=10.0), {}, clock=clock, out=io.StringIO(), err=err)
    _run(w, base, clock, 8)
    filler = small_fs / "filler"
    _fill(filler)
    _run(w, base, clock, 30, start=8)  # the rotation at sample 10 cannot create its file
    assert w.lost >= 20
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "samples are dropped until it can write again" in lines[0], lines
    assert "Traceback" not in err.getvalue()
    filler.unlink()
    clock.tick(RETRY_S)
    _run(w, base, clock, 5, start=38)
    w.close()
    lines = err.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("nettop: recording again into "), lines
    files = listing(str(d))
    first = Reader(files[0].path)
    assert len(first) >= 8 and first.warnings == [] and len(list(first.snapshots())) == len(first)
    assert sum(len(Reader(e.path)) for e in files[1:]) == 5  # every sample after the space came back
    assert w.samples + w.lost == 43
    assert not [n for n in os.listdir(d) if n.endswith(".new")]


def test_a_recorder_on_a_full_disk_keeps_running_with_one_line(small_fs):
    d = small_fs / "rec"
    p = subprocess.Popen([*NETTOP, "record", "--dir", str(d), "-i", "0.1", "--period", "2s"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: d.is_dir() and len(listing(str(d))) >= 1, 60)
        _fill(small_fs / "filler")
        time.sleep(5)  # at least two rotations on a full disk
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert err.count("\n") == 1 and "disk is full" in err and "Traceback" not in err, err
    for e in listing(str(d)):
        r = Reader(e.path)
        assert len(list(r.snapshots())) == len(r)


def test_the_directory_deleted_under_the_recorder_is_made_again_and_no_sample_lost(tmp_path, base):
    clock = FakeClock()
    err = io.StringIO()
    d = tmp_path / "rec"
    w = DirWriter(Rotation(str(d), period=3600.0), {}, clock=clock, out=io.StringIO(), err=err)
    _run(w, base, clock, 6)
    first = w.path
    shutil.rmtree(d)
    _run(w, base, clock, 4, start=6)
    w.close()
    assert err.getvalue() == (f"nettop: {first} was deleted while recording; making {d} again and saving the file\n")
    files = listing(str(d))
    assert files[0].path == first and [len(Reader(e.path)) for e in files] == [6, 4]
    snaps, _, warnings = _samples(d)
    assert warnings == [] and len(snaps) == 10


def test_the_file_being_written_deleted_alone_is_saved_again(tmp_path, base):
    clock = FakeClock()
    err = io.StringIO()
    w = DirWriter(Rotation(str(tmp_path), period=3600.0), {}, clock=clock, out=io.StringIO(), err=err)
    _run(w, base, clock, 3)
    first = w.path
    os.unlink(first)  # a careless clean-up, the directory stays
    _run(w, base, clock, 2, start=3)
    w.close()
    assert err.getvalue().count("\n") == 1 and "was deleted while recording" in err.getvalue()
    assert [(e.path == first, len(Reader(e.path))) for e in listing(str(tmp_path))] == [(True, 3), (False, 2)]


def test_a_running_recorder_survives_its_directory_deleted(tmp_path):
    d = tmp_path / "rec"
    p = subprocess.Popen([*NETTOP, "record", "--dir", str(d), "-i", "0.1", "--iface", "lo"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: d.is_dir() and len(listing(str(d))) == 1 and len(Reader(listing(str(d))[0].path)) >= 5)
        shutil.rmtree(d)
        assert _wait(lambda: d.is_dir() and len(listing(str(d))) == 2 and len(Reader(listing(str(d))[1].path)) >= 5)
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert err.count("\n") == 1 and "was deleted while recording" in err and "Traceback" not in err, err
    snaps, files, warnings = _samples(d)
    assert len(files) == 2 and warnings == []
    ok, worst = _no_gap(snaps, 0.1)
    assert ok, worst
