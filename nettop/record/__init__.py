"""Recordings: raw snapshots, configuration changes and events in one SQLite file.

`store` owns the file format (docs/recording-format.md), `codec` turns snapshots into
compact rows and back, `recorder` is the headless loop, `replay` feeds the TUI from a
file, `export` and `report` turn a file into CSV/JSON and Markdown. Nothing here
imports Textual, so `nettop --record` runs on a box without a terminal.
"""
