"""The layers stay layers: nothing below the TUI imports Textual.

nettop runs headless (`record`, `snapshot`, `report`, `set`, and the serve/doctor
commands) on hosts where a full-screen stack is dead weight, and the collectors, the
model, the recorder and the actions are meant to be read and tested without a screen.
Two checks: a static one over every import statement of every module (also those inside
functions, which a lazy import would hide from a runtime check), and a runtime one that
runs headless commands and looks at `sys.modules`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "nettop"
# Packages that must never reach the screen stack; `nettop.cli` may, lazily, for the
# commands that open it (the live view and replay).
HEADLESS = ("kernel", "model", "collectors", "output", "record", "actions", "ping", "ebpf", "doctor", "serve", "fleet", "experiment",
            "pipeline", "capture")
SCREEN = ("textual", "nettop.tui", "plotext.")  # plotext itself is allowed in the Markdown report


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every module an import statement in `path` names, resolved to absolute names."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PKG.rglob("*.py")}


def test_the_graph_sees_the_tui_importing_textual():
    """The check can fail: the TUI's own modules are seen importing Textual."""
    g = graph()
    assert any(name.startswith("textual") for name in g["nettop.tui.app"])
    assert "nettop.tui.app" in g["nettop.cli"]


@pytest.mark.parametrize("package", HEADLESS)
def test_no_headless_module_imports_the_screen_stack(package):
    g = graph()
    members = {m for m in g if m == f"nettop.{package}" or m.startswith(f"nettop.{package}.")}
    assert members, f"nettop.{package} has no modules: the layout changed, update HEADLESS"
    bad = {m: sorted(i for i in g[m] if i.startswith(SCREEN) or i == "textual") for m in members}
    assert not {m: b for m, b in bad.items() if b}


def test_headless_modules_import_only_headless_nettop_modules_at_all():
    """Transitively too: a headless module may import another nettop module only if that
    one is headless (or the package root), so no chain through cli reaches the TUI."""
    g = graph()
    allowed = tuple(f"nettop.{p}" for p in HEADLESS)
    for mod, deps in g.items():
        if not mod.startswith(allowed):
            continue
        for dep in deps:
            if dep.startswith("nettop.") and not dep.startswith(allowed):
                pytest.fail(f"{mod} imports {dep}, which is not a headless package")


def test_headless_commands_run_without_loading_textual(tmp_path):
    """At run time: the snapshot, record, export, report, doctor and serve paths, in one process."""
    rec = tmp_path / "r.ntrec"
    script = f"""
import contextlib, io, json, sys
from nettop import cli
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    codes = [cli.main(["snapshot", "--json", "--interval", "0.2"]),
             cli.main(["record", "-o", {str(rec)!r}, "--interval", "0.2", "--duration", "0.6"]),
             cli.main(["export", {str(rec)!r}, "--format", "json"]),
             cli.main(["report", {str(rec)!r}, "--no-plots"]),
             cli.main(["journal"]),
             cli.main(["doctor", "--json", "--seconds", "1", "--interval", "0.5"])]
    from nettop.collectors.host import HostReader
    from nettop.serve.server import Exporter
    with HostReader() as r:
        ex = Exporter(r, 1.0)
        ex.observe(r.read())
        codes.append(0 if "nettop_softirq_net_rx_total" in (ex.render() or "") else 1)
print(json.dumps({{"codes": codes, "loaded": sorted(m for m in sys.modules
                                                    if m.split(".")[0] == "textual"
                                                    or m.startswith("nettop.tui"))}}))
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path),
                                           "NETTOP_STATE_DIR": str(tmp_path / "state")})
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout.strip().splitlines()[-1])
    assert doc["codes"][:4] == [0, 0, 0, 0], doc
    assert doc["codes"][5] in (0, 1, 2, 3), doc  # doctor: the worst severity found
    assert doc["codes"][6] == 0, doc  # serve's exporter rendered /metrics
    assert doc["loaded"] == []
