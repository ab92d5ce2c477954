"""The help screen (every key, generated from the bindings), the interface picker, and
the one-line prompt the go-to-time and record keys ask with."""

from __future__ import annotations

from typing import Callable, Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, SelectionList, Static

# Keys Textual provides that the help must list too.
BUILTIN_KEYS = (
    ("tab / shift+tab", "move between panels"),
    ("up / down / pgup / pgdn", "scroll the focused table"),
    ("ctrl+p", "command palette: every action by name, and all themes"),
)
LEGEND = (
    "cpu req>eff: requested affinity > effective affinity (shown when they differ)",
    "irq 40*: kernel-managed IRQ, its affinity cannot be moved",
    "› at the end of a table's header: more columns than the panel holds (z zooms it)",
    "trend: IRQs/s (or packets/s for queues without IRQs) over the last ticks",
    "vertical lines on charts: events (tuning changes, interfaces or IRQs appearing)",
    "summary ●: the interface the default route leaves by (else eth0), always first",
    "summary queue /s cpu: the interface's hottest queue, its IRQs/s (packets/s without IRQs) "
    "and the CPUs serving it (IRQ affinity, else RPS/XPS)",
    "summary strip: each CPU's softirq % as a bar (full at 50%); red: drops or heavy squeeze",
)


KEYS_MAX = 15  # the key column's widest: long key lists wrap in it, descriptions keep room
KEY_NAMES = {"plus": "+", "equals_sign": "=", "minus": "-", "question_mark": "?"}


def key_rows(bindings: Iterable[Binding],
             why_disabled: Callable[[str], str | None] | None = None) -> list[tuple[str, str]]:
    """(keys, what they do), one row per action, in binding order; the long text is the
    binding's tooltip, else its footer description. `why_disabled(action)` gives the
    reason a key does nothing here (tuning in a replay or without root), shown with it."""
    rows: dict[str, tuple[list[str], str]] = {}
    for b in bindings:
        desc = b.tooltip or b.description or b.action
        why = why_disabled(b.action) if why_disabled else None
        if why:
            desc += f" [disabled: {why}]"
        keys, _ = rows.setdefault(b.action, ([], desc))
        for k in b.key.split(","):
            shown = KEY_NAMES.get(k.strip(), k.strip())
            if shown not in keys:
                keys.append(shown)
    return [(" / ".join(keys), desc) for keys, desc in rows.values()]


class HelpScreen(ModalScreen[None]):
    # "dismiss" is Textual's own Screen.action_dismiss: closes with None, the only result
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close help")]

    def __init__(self, bindings: Iterable[Binding],
                 why_disabled: Callable[[str], str | None] | None = None) -> None:
        super().__init__(id="help")
        self._rows = key_rows(bindings, why_disabled) + list(BUILTIN_KEYS)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            # a grid: a description wraps inside its own column (a hanging indent under
            # the descriptions), never back to column 0 under the keys
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", max_width=KEYS_MAX)  # "up / down / pgup / pgdn" wraps too
            grid.add_column(ratio=1, overflow="fold")
            for keys, desc in self._rows:
                grid.add_row(Text(keys), Text(desc))  # Text: no markup ([children=KIND] is text)
            yield Static(grid, id="help-keys")
            legend = Table.grid(padding=(0, 1))
            legend.add_column(no_wrap=True)
            legend.add_column(ratio=1, overflow="fold")
            for line in LEGEND:
                term, _, meaning = line.partition(": ")
                legend.add_row(Text(term + ":"), Text(meaning))
            yield Static(legend, id="help-legend")
            yield Static("escape or ? closes this help", id="help-close")


class InterfacePicker(ModalScreen["frozenset[str] | None"]):
    """Tick the interfaces to show; space toggles, enter applies, escape cancels."""

    BINDINGS = [
        Binding("enter", "apply", "apply", priority=True),
        Binding("escape", "cancel", "cancel"),
        Binding("a", "all", "all"),
    ]

    def __init__(self, names: Iterable[str], shown: Iterable[str]) -> None:
        super().__init__(id="picker")
        self._names = list(names)
        self._shown = set(shown)

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box"):
            yield Static("Interfaces: space toggles, a all, enter applies, escape cancels", id="picker-title")
            yield SelectionList[str](*((n, n, n in self._shown) for n in self._names), id="picker-list")

    def action_apply(self) -> None:
        chosen = self.query_one(SelectionList).selected
        self.dismiss(frozenset(chosen))

    def action_all(self) -> None:
        self.query_one(SelectionList).select_all()

    def action_cancel(self) -> None:
        self.dismiss(None)


class Prompt(ModalScreen["str | None"]):
    """Ask for one line; enter answers, escape cancels. `check` returns a line saying what
    is wrong with the answer (the prompt then stays open and shows it) or None."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, value: str = "", placeholder: str = "",
                 check: Callable[[str], str | None] | None = None, id: str = "prompt") -> None:  # noqa: A002
        super().__init__(id=id)
        self._title = title
        self._value = value
        self._placeholder = placeholder
        self._check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(self._title, id="prompt-title")
            yield Input(self._value, placeholder=self._placeholder, id="prompt-input")
            yield Static("", id="prompt-error")

    def on_mount(self) -> None:
        self.query_one("#prompt-error").display = False
        self.query_one(Input).focus()

    def set_title(self, title: str) -> None:
        """Replace the title (a hint read after the prompt opened); ignored once closed."""
        self._title = title
        if self.is_attached:
            self.query_one("#prompt-title", Static).update(title)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        answer = event.value.strip()
        problem = self._check(answer) if self._check and answer else None
        if problem is not None:
            error = self.query_one("#prompt-error", Static)
            error.update(problem)
            error.display = True
            return
        self.dismiss(answer or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
