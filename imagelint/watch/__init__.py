"""`imagelint watch`: the soak's measurements kept running on a host, exported where platform teams look.

One loop (:mod:`imagelint.watch.loop`) samples the memory-cgroup population with the soak's sampler,
asks systemd once per period for every service's state and restart counter, follows the journal for
kernel symptoms, and keeps a bounded window of samples for the trend. Each pass produces an immutable
:class:`imagelint.watch.state.WatchState`; the outputs render the latest one:

- :mod:`imagelint.watch.metrics`: Prometheus metric families (``/metrics`` via ``prometheus-client``,
  and the node_exporter textfile, written atomically by :mod:`imagelint.watch.textfile`);
- :mod:`imagelint.watch.npd`: one node-problem-detector check per invocation.

A source that cannot be read (no memory cgroups, no systemd, an unreadable journal) is reported as
``imagelint_source_up{source=...} 0`` with the reason on stderr; the others keep working.
"""
