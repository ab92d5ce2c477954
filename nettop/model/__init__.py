"""The model: immutable snapshots, counter arithmetic, rates as pure functions of two
snapshots, the bounded timeline and the sampler thread that fills it."""
