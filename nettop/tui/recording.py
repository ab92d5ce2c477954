"""How the header names the file the record key writes to.

The recording itself is the pipeline's (`nettop.pipeline.tap.RecordingTap`, written on
the sampler thread); the live view only starts, stops and shows it (record_keys.py).
"""

from __future__ import annotations

import os


def display_path(path: str) -> str:
    """The path as the header shows it: relative to the current directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


__all__ = ["display_path"]
