"""`build`, the column-by-column maker of many frozen rows, for the collectors.

It lives in `nettop/model/rows.py`: the model's per-CPU tables (`model/cpu_table.py`)
make their rows with it when a row is first asked for, and the model may not import a
collector. The readers that build rows at once (irq_sysfs) keep importing it from here.
"""

from __future__ import annotations

from nettop.model.rows import build

__all__ = ["build"]
