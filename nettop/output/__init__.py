"""What the headless commands print: the snapshot JSON document, the plain text
report, and the before/after comparison of a change."""
