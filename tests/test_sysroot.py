"""SysRoot.live: the running kernel whatever spelling of `/` names it, never a tree."""

from __future__ import annotations

import os

from nettop.kernel.sysroot import SysRoot


def test_live_is_any_path_that_resolves_to_the_root_and_follows_the_working_directory(tmp_path, monkeypatch):
    link = tmp_path / "slash"
    os.symlink("/", link)
    tree = tmp_path / "tree"
    tree.mkdir()
    assert SysRoot("/").live and SysRoot("//").live and SysRoot("/proc/..").live and SysRoot(str(link)).live
    assert not SysRoot(str(tree)).live and not SysRoot(str(tree)).live  # asked twice: the same answer
    monkeypatch.chdir("/")
    assert SysRoot(".").live
    monkeypatch.chdir(tree)
    assert not SysRoot(".").live  # relative: resolved where the process is now


def test_read_head_is_the_text_before_the_stop_of_the_live_kernel_and_of_a_tree(tmp_path):
    import pytest
    live = SysRoot("/")
    head = live.read_head("proc/stat", "\nintr")
    assert head.startswith("cpu ") and "intr" not in head and head.count("\ncpu") >= 1
    (tmp_path / "f").write_bytes(b"a b\nintr 1 2\nctxt 3\n")
    (tmp_path / "g").write_bytes(b"a b\n")
    tree = SysRoot(str(tmp_path))
    assert tree.read_head("f", "\nintr") == "a b"
    assert tree.read_head("g", "\nintr") == "a b\n"  # no stop: the whole text
    with pytest.raises(FileNotFoundError):
        tree.read_head("missing", "\nintr")
