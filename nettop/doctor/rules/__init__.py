"""Rule families; each module's `RULES` is a tuple of functions Context -> findings."""
