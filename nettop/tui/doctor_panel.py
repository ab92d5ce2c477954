"""The findings panel (key 7): the doctor's findings live, their fixes one Enter away.

Live, the source's `Watch` evaluates the rules on the sampler thread at each tick (and
puts appear/resolve events on the timeline). In a replay there is no Watch: the replay
judges its newest points on its playback thread, so the panel shows the findings as
they were at that moment. Either way the panel only reads `source.findings()`. Enter on a finding opens the tuning
prompt with its fix prefilled (a multi-line fix, one line per Enter); once the samples
after the change have settled, the panel shows whether the finding resolved, with its
figures before and after. `x` dismisses a finding for this session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.binding import Binding, BindingType

from nettop.doctor import DoctorConfig, Finding
from nettop.doctor.watch import Verdict, Watch
from nettop.model.timeline import Point
from nettop.tui.tables import Cell, LiveTable
from nettop.tui.tuning import TuningMixin
from nettop.tui.widgets import EmptyState, Panel

NO_FINDINGS = "no finding: none of the doctor's rules (docs/doctor.md) sees anything to fix"
SEVERITY_LEVEL = {"crit": "hot", "warn": "warm", "info": ""}

DOCTOR_BINDINGS = [
    Binding("7", "doctor_panel", "findings", show=False,
            tooltip="go to the findings panel: problems the tuning guides name, with their fix (Enter)"),
]


class FindingsTable(LiveTable):
    COLUMNS = (("sev", "sev", 4), ("id", "finding", 26), ("what", "what", 64), ("fix", "fix (Enter)", 44))
    LEFT = frozenset({"sev", "id", "what", "fix"})
    BINDINGS: ClassVar[list[BindingType]] = [
        *LiveTable.BINDINGS,
        Binding("enter", "fix", "fix", tooltip="prefill this finding's fix in the tuning prompt"),
        Binding("x", "dismiss", "dismiss", tooltip="hide this finding for the rest of the session"),
    ]

    def selected(self) -> str | None:
        keys = self.row_keys()
        return keys[self.cursor] if 0 <= self.cursor < len(keys) else None

    def action_fix(self) -> None:
        key = self.selected()
        if key is not None:
            cast("DoctorMixin", self.app).doctor_fix(key.split("|", 1)[-1])

    def action_dismiss(self) -> None:
        key = self.selected()
        if key is not None:
            cast("DoctorMixin", self.app).doctor_dismiss(key.split("|", 1)[-1])

    @staticmethod
    def finding_cells(f: Finding, step: int) -> tuple[Cell, ...]:
        if f.fix:
            fix = f.fix[min(step, len(f.fix) - 1)].removeprefix("nettop set ")
            if len(f.fix) > 1:
                fix = f"[{min(step, len(f.fix) - 1) + 1}/{len(f.fix)}] {fix}"
        else:
            fix = f"run: {f.command}" if f.command else "–"
        return ((f.severity.label, SEVERITY_LEVEL[f.severity.label]), (f.id, ""),
                (f"{f.title} · {'; '.join(f.evidence[:2])}", ""), (fix, "" if f.fix else "muted"))

    @staticmethod
    def verdict_cells(v: Verdict) -> tuple[Cell, ...]:
        mark = "…" if v.resolved is None else ("ok" if v.resolved else "NOT")
        level = "muted" if v.resolved is None else ("" if v.resolved else "hot")
        return ((mark, level), (v.finding_id, "muted"), (v.text(), level), (v.fix, "muted"))


class DoctorPanel(Panel):
    """The findings panel; its own height in the stacked (small terminal) layout. Hidden
    until 7 is pressed (the header carries the count): the grid of a large terminal has
    no cell for a seventh panel, so there 7 zooms it."""

    DEFAULT_CSS = """
    DoctorPanel { height: 10; }
    """

    def on_mount(self) -> None:
        self.display = False


def doctor_panel() -> Panel:
    return DoctorPanel("7 findings", EmptyState(NO_FINDINGS, id="doctor-empty"), FindingsTable(id="findings-table"),
                 id="doctor")


class DoctorMixin(TuningMixin):
    """The findings panel's drawing and keys. A fix is applied as the tuning keys apply a
    line (`TuningMixin.run_tuning`, the one workflow); needs from the app `zoomed`,
    `action_panel` and `action_zoom` besides the drawing state."""

    _doctor_dismissed: set[str]
    _doctor_steps: dict[str, int]
    _doctor_shown: list[Finding]
    zoomed: str | None

    if TYPE_CHECKING:
        def action_panel(self, name: str) -> None: ...
        def action_zoom(self) -> None: ...

    def _doctor_watch(self) -> Watch | None:
        return self.source.doctor

    def _doctor_config(self) -> DoctorConfig:
        """Live, the Watch's; in replay, the one the recording was judged by."""
        watch = self._doctor_watch()
        if watch is not None:
            return watch.config
        return self.source.doctor_config

    def doctor_findings(self, point: Point | None = None) -> list[Finding]:
        """What the panel shows: the source's findings at its newest point, less the dismissed."""
        if not hasattr(self, "_doctor_dismissed"):
            self._doctor_dismissed, self._doctor_steps, self._doctor_shown = set(), {}, []
        found = self.source.findings()
        return [f for f in found if f.id not in self._doctor_dismissed]

    def doctor_header(self) -> str | None:
        """"findings 2 (1 crit)" for the header; None before the first evaluation."""
        shown = getattr(self, "_doctor_shown", None)
        if shown is None:
            return None
        crit = sum(1 for f in shown if f.severity.label == "crit")
        return f"findings {len(shown)}" + (f" ({crit} crit)" if crit else "")

    def _draw_doctor(self, point: Point) -> None:
        found = self.doctor_findings(point)
        self._doctor_shown = found
        watch = self._doctor_watch()
        verdicts = list(watch.verdicts.values()) if watch is not None else []
        table = self._one("#findings-table", FindingsTable)
        rows = [(f"f|{f.id}", FindingsTable.finding_cells(f, self._doctor_steps.get(f.id, 0))) for f in found]
        rows += [(f"v|{v.finding_id}", FindingsTable.verdict_cells(v)) for v in verdicts]
        table.sync(rows)
        empty = self._one("#doctor-empty", EmptyState)
        empty.display = not rows
        table.display = bool(rows)
        target = self._doctor_config().describe()
        self._one("#doctor", Panel).set_status(
            " · ".join(x for x in (self.doctor_header() or "", target,
                                   "as recorded" if self.replaying else "") if x))

    def action_doctor_panel(self) -> None:
        self.query_one("#doctor", Panel).display = True
        self.action_panel("doctor")
        if self.zoomed is None and self.screen.has_class("-wide") and self.screen.has_class("-tall"):
            self.action_zoom()  # the grid has no cell for it

    def doctor_fix(self, finding_id: str) -> None:
        f = next((x for x in getattr(self, "_doctor_shown", []) if x.id == finding_id), None)
        if f is None:
            return
        if not f.fix:
            self.notify(f"nettop does not change this itself: {f.command or 'no fix known'}",
                        timeout=10)
            return
        if self._refuse():
            return
        from nettop.tui.screens import Prompt
        from nettop.tui.tuning import check_line

        step = min(self._doctor_steps.get(f.id, 0), len(f.fix) - 1)
        line = f.fix[step].removeprefix("nettop set ")
        title = f"nettop set … (fix for {f.id}" + (f", line {step + 1} of {len(f.fix)})" if len(f.fix) > 1 else ")")

        def done(answer: str | None) -> None:
            if not answer:
                return
            self._doctor_steps[f.id] = step + 1
            watch = self._doctor_watch()
            latest = self.latest
            if watch is not None and step + 1 >= len(f.fix):
                watch.applied(f, answer, latest.snapshot.t_wall if latest is not None else f.window[1])
            self.run_tuning(answer)  # the same workflow as the tuning keys and `nettop set`

        self.push_screen(Prompt(title, line, "e.g. sysctl net.core.netdev_budget 600", check=check_line,
                                id="tune-prompt"), callback=done)

    def doctor_dismiss(self, finding_id: str) -> None:
        self._doctor_dismissed.add(finding_id)
        watch = self._doctor_watch()
        if watch is not None:
            watch.dismiss(finding_id)
        if self.latest is not None:
            self._draw_doctor(self.latest)
        self.notify(f"{finding_id} dismissed for this session", timeout=3)
