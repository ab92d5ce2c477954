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
