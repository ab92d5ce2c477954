"""The layer map is a checked contract, and the architecture doc says the same map.

pyproject.toml's `[tool.importlinter]` holds the contracts (layers top to bottom, the
screen stack only in tui/ and cli.py, a model that reads no kernel). `lint-imports` checks
the code against them here, so an upward import fails the suite; a copy of the tree with
one upward import injected shows the check can fail. docs/architecture.md's "may import"
table is compared with what the contracts allow, row by row, and its list of exceptions
with the contracts' ignore_imports. Last, no module imports an underscore name of another
package: what two packages share is public where it lives.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "nettop"
DOC = ROOT / "docs" / "architecture.md"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
SCREEN_OK = {"tui", "cli"}  # the only packages that may import the screen stack


def contracts() -> dict[str, dict]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in cfg["contracts"]}


def layers() -> list[list[str]]:
    """The layers contract's levels, top first, each a list of package names
    (optional layers, written `(name)`, unwrapped)."""
    out = []
    for level in contracts()["layers"]["layers"]:
        assert ":" not in level, "non-independent siblings: teach may_import() what they may import"
        out.append([name.strip().strip("()") for name in level.split("|")])
    return out


def may_import() -> dict[str, set[str]]:
    """What each package may import by the contracts: every package on a lower level, less
    what a forbidden contract takes away from it."""
    levels = layers()
    allowed = {name: {n for lower in levels[i + 1:] for n in lower}
               for i, level in enumerate(levels) for name in level}
    for c in contracts().values():
        if c["type"] != "forbidden":
            continue
        for src in c["source_modules"]:
            package = src.removeprefix("nettop.")
            allowed[package] -= {f.removeprefix("nettop.") for f in c["forbidden_modules"]}
    return allowed


def run_lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: install the test extras (pip install -e '.[test]')"
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)  # ahead of the editable install, so the copy is read
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_every_import_keeps_the_contracts():
    run = run_lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "broken" in run.stdout and " 0 broken" in run.stdout


@pytest.mark.parametrize(("module", "line", "seen"), [
    # a collector reaching up into the recorder: a plain upward import
    ("collectors/softnet.py", "from nettop.record import store", "nettop.collectors.softnet -> nettop.record.store"),
    # the model importing the TUI, lazily inside a function: upward, and screen code
    ("model/counters.py", "def _f():\n    from nettop.tui import format", "nettop.model.counters -> nettop.tui.format"),
    # kernel code importing Textual directly
    ("kernel/routes.py", "import textual", "nettop.kernel.routes -> textual"),
])
def test_an_injected_upward_import_breaks_a_contract(tmp_path, module, line, seen):
    """The check can fail: the same contracts over a copy of the tree with one bad import."""
    shutil.copytree(PKG, tmp_path / "nettop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "nettop" / module
    target.write_text(target.read_text() + "\n\n" + line + "\n")
    run = run_lint_imports(tmp_path, pythonpath=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert seen in run.stdout, run.stdout


def test_every_package_has_its_place_in_the_layers():
    """`exhaustive` makes lint-imports refuse an unplaced package; this says which."""
    found = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {"cli"}
    placed = {name for level in layers() for name in level}
    assert found <= placed, f"give {sorted(found - placed)} a level in pyproject.toml's layers contract"


def test_the_screen_contract_covers_every_package_but_tui_and_cli():
    """A forbidden contract cannot name a module that does not exist yet, so its list is
    kept complete here: a new package (or top-level module) must be added to it."""
    found = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    sources = {s.removeprefix("nettop.") for s in contracts()["screen"]["source_modules"]}
    assert sources == found - SCREEN_OK, "add the new package to the screen contract's source_modules"


def doc_table() -> dict[str, set[str]]:
    """docs/architecture.md's package table: package -> the packages its "may import" cell names."""
    text = DOC.read_text()
    section = text[text.index("## The packages"):text.index("## Why this shape")]
    names = {name for level in layers() for name in level}
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `nettop/(\w+)(?:/|\.py)` \|.*\| ([^|]*) \|$", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"[a-z]+", m.group(2))) & names
    return rows


def test_the_architecture_doc_table_is_the_layers_contract():
    table, allowed = doc_table(), may_import()
    assert set(table) == set(allowed), "the doc's table must have one row per package of the contract"
    wrong = {p: {"doc": sorted(table[p]), "contract": sorted(allowed[p])}
             for p in allowed if table[p] != allowed[p]}
    assert not wrong


def test_the_doc_lists_every_exception_of_the_contracts():
    ignored = {i for c in contracts().values() for i in c.get("ignore_imports", ())}
    text = DOC.read_text()
    section = text[text.index("## The packages"):text.index("## Why this shape")]
    listed = set(re.findall(r"`([\w.*]+ -> [\w.*]+)`", section))
    assert listed == ignored


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Each import in `path` of an underscore name (or module) of another nettop package."""
    mine = path.relative_to(root).with_suffix("").parts[1]  # "tui", "output", ... or "cli"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules, names = [node.module], [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [a.name for a in node.names], []
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] != "nettop" or len(parts) < 2 or parts[1] == mine:
                continue
            private = [p for p in parts[2:] + names if p.startswith("_") and not p.startswith("__")]
            if private:
                found.append(f"{path.relative_to(root)}:{node.lineno} imports {', '.join(private)} from {module}")
    return found


def test_no_module_imports_a_private_name_of_another_package():
    bad = [hit for p in sorted(PKG.rglob("*.py")) for hit in private_imports(p)]
    assert not bad


def test_the_private_import_check_sees_one(tmp_path):
    """The check can fail: a TUI module taking a private helper of output/ is seen, one
    taking a private helper of its own package is not."""
    (tmp_path / "nettop" / "tui").mkdir(parents=True)
    f = tmp_path / "nettop" / "tui" / "x.py"
    f.write_text("from nettop.output.snapshot_json import _iso, build_document\n"
                 "from nettop.tui.tables import _lvl\nimport nettop.record._hidden\n")
    assert private_imports(f, root=tmp_path) == ["nettop/tui/x.py:1 imports _iso from nettop.output.snapshot_json",
                    "nettop/tui/x.py:3 imports _hidden from nettop.record._hidden"]


def kernel_path_literals(path: Path, root: Path = ROOT) -> list[str]:
    """Strings in `path` that spell out a kernel path ("/sys/...", f"/proc/irq/{n}/...")
    instead of joining it to a SysRoot; text that only mentions one ("see /proc/interrupts")
    does not start with it and is left alone."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in parts:
            continue  # seen as the head of its f-string
        head = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else node
        if isinstance(head, ast.Constant) and isinstance(head.value, str) \
                and head.value.startswith(("/sys", "/proc")) and hasattr(node, "lineno"):
            found.append(f"{path.relative_to(root)}:{node.lineno} {head.value!r}")
    return found


def test_actions_build_every_kernel_path_from_a_sysroot(tmp_path):
    bad = [hit for p in sorted((PKG / "actions").glob("*.py")) for hit in kernel_path_literals(p)]
    assert not bad
    probe = tmp_path / "probe.py"  # the check can fail
    probe.write_text('p = f"/sys/class/net/{name}/mtu"\nq = "/proc/irq"\nmsg = "see /proc/interrupts"\n')
    assert kernel_path_literals(probe, root=tmp_path) == ["probe.py:1 '/sys/class/net/'", "probe.py:2 '/proc/irq'"]


def test_the_live_root_is_defined_once():
    """`LIVE` is kernel/sysroot.py's; a second `LIVE = SysRoot("/")` elsewhere drifts from it."""
    defined = [str(p.relative_to(ROOT)) for p in sorted(PKG.rglob("*.py"))
               for node in ast.walk(ast.parse(p.read_text(), str(p)))
               if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LIVE" for t in node.targets)]
    assert defined == ["nettop/kernel/sysroot.py"]
