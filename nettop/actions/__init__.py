"""Tuning actions: validated, journaled, undoable changes to the host's network settings.

Import the setting modules so their kinds are registered for journal replay.
"""

from __future__ import annotations

from nettop.actions import bql, ethtool, irq, link, qdisc, rps_xps, sysctl  # noqa: F401  (registers kinds)
from nettop.actions.base import ActionError, Change, Plan, Result, Setting
from nettop.actions.journal import Journal
from nettop.actions.tuner import Drift, NeedsConfirm, Tuner, read_only_reason

__all__ = ["ActionError", "Change", "Drift", "Journal", "NeedsConfirm", "Plan", "Result",
           "Setting", "Tuner", "read_only_reason"]
