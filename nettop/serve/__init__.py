"""`nettop serve`: the figures only nettop computes, as Prometheus counters and gauges.

Headless (no Textual): the sampler reads the host into snapshots as for `record`, the
doctor watches the same timeline, and each scrape of /metrics renders the latest
snapshot (exposition.py, metrics.py). Prometheus computes the rates; nettop exports
the kernel's counters as they are, so any window and any aggregation works.
"""
