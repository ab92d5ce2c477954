"""`nettop experiment PLAN.toml`: a tuning matrix under load, and the table the tuning guides print.

plan.py reads and checks the plan, load.py runs iperf3 (or any argv), runner.py applies,
measures and reverts each variant through the journal while recording everything,
measure.py turns a phase's snapshots and probes into figures, table.py the results.
"""
