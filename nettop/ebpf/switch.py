"""The switch that turns the eBPF probes on and off without stalling anyone.

Compiling the BPF programs takes seconds: `ProbeSwitch` does it on a thread of its own,
neither the UI's nor the sampler's, and hands the running probes to the reader (through
the `attach` callback the live pipeline gives it), which takes their counts on each
tick. The live view's eBPF key only toggles it and reads `state` and `reason`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class ProbeSwitch:
    """Off → compiling → on → off, with the reason when they could not start.

    `attach(probes | None)` hands the running probes to the sampler's reader (or takes
    them away); `changed()` tells the UI to redraw its header. Both are called from the
    switch's own thread."""

    def __init__(self, attach: Callable[[Any], None], changed: Callable[[], object] | None = None,
                 factory: Callable[[], Any] | None = None) -> None:
        self._attach = attach
        self.changed = changed
        self._factory = factory
        self._lock = threading.Lock()
        self.state = "off"  # "off", "compiling", "on", "stopping"
        self.reason: str | None = None  # why the last start failed: one line with the fix
        self.probes: Any = None
        self._thread: threading.Thread | None = None

    def toggle(self) -> str:
        """Start or stop the probes in the background; returns the new state."""
        with self._lock:
            if self.state in ("compiling", "stopping"):
                return self.state
            turning_on = self.state == "off"
            self.state = "compiling" if turning_on else "stopping"
            if turning_on:
                self.reason = None
            self._thread = threading.Thread(target=self._start if turning_on else self._stop,
                                            name="nettop-ebpf", daemon=True)
            self._thread.start()
            return self.state

    def wait(self, timeout: float | None = None) -> None:
        """Until the start or stop under way has finished (tests, and quitting)."""
        t = self._thread
        if t is not None:
            t.join(timeout)

    def _make(self) -> Any:
        """New probes (the factory's, else nettop's), once their preflight says they can run."""
        if self._factory is not None:
            probes = self._factory()
        else:
            from nettop.ebpf import EbpfProbes

            probes = EbpfProbes()
        ok, why = type(probes).available(probes.probes)
        if not ok:
            raise _Unavailable(why)
        return probes

    def _start(self) -> None:
        probes = None
        try:
            probes = self._make()
            if not probes.start():
                reason = "; ".join(probes.errors) or "eBPF probes did not start"
                probes.stop()
                self._finish("off", None, reason)
                return
            self._attach(probes)
            self._finish("on", probes, None)
        except _Unavailable as exc:
            self._finish("off", None, str(exc))
        except Exception as exc:  # noqa: BLE001 - any failure is one line and nettop runs on
            if probes is not None:
                probes.stop()
            self._finish("off", None, f"eBPF probes failed: {exc}".splitlines()[0])

    def _stop(self) -> None:
        probes = self.probes
        self._attach(None)
        if probes is not None:
            probes.stop()
        self._finish("off", None, None)

    def _finish(self, state: str, probes: Any, reason: str | None) -> None:
        with self._lock:
            self.state, self.probes = state, probes
            if reason is not None:
                self.reason = reason
        if self.changed is not None:
            self.changed()

    def stop(self) -> None:
        """On quit: wait for a start under way, then detach and stop."""
        self.wait(30)
        if self.probes is not None:
            self._stop()


class _Unavailable(Exception):
    """Preflight says no (no bcc, headers, privilege, tracepoint): its one line."""


__all__ = ["ProbeSwitch"]
