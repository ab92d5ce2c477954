"""Mutation fuzzing of nettop's parsers, seeded from real captures (docs/bad-input.md).

`mutate` turns a real kernel file into the kinds of damage a captured tree or a typed
value can carry (truncation, lost and repeated lines, extra and missing columns, huge,
negative and non-ASCII numbers, NUL bytes, CPU-count mismatches, another file's
content); `targets` drives every parser with them and checks the contract; `engine` runs
a target for N inputs from a fixed seed and keeps every crash as a regression input.
The CI pass is tests/test_fuzz.py; the long run is benchmarks/fuzz.py.
"""
