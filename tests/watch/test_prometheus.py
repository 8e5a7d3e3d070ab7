"""End to end on this kernel: a leaky restarter makes real dying memcgs while `imagelint watch` runs;
Debian's Prometheus scrapes its /metrics and node_exporter exposes its textfile; both outputs pass
`promtool check metrics`.

The machine's own tooling creates and frees a few memory cgroups now and then, so the test judges
rises and slopes with margins, never exact counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.soak.memcg import MemcgLab, need_v1_memory
from tests.watch.procs import (
    IMAGELINT,
    free_port,
    http_get,
    need_binary,
    process,
    prometheus,
    promtool,
    query,
    scalar,
    wait_for,
)

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.serial, pytest.mark.cgroup_v1]


@pytest.fixture
def leak() -> Iterator[MemcgLab]:
    need_v1_memory()
    lab = MemcgLab("watch")
    try:
        yield lab
    finally:
        lab.cleanup()
        assert not lab.parent.exists() and not lab.scratch.exists()


def test_prometheus_sees_dying_count_and_slope_rise(tmp_path: Path, leak: MemcgLab) -> None:
    need_binary("prometheus", "prometheus")
    exporter = need_binary("prometheus-node-exporter", "prometheus-node-exporter")
    port = free_port()
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    watch = [
        IMAGELINT, "watch", f"--listen=127.0.0.1:{port}", f"--textfile={textdir}",
        "--interval=1s", "--window=10m", "--walk-every=5s", "--judge-every=3s",
        f"--journal-dir={tmp_path / 'no-journal'}",
    ]  # fmt: skip
    with process(watch, tmp_path / "watch.log") as proc, prometheus(tmp_path, [f"127.0.0.1:{port}"]) as prom:
        wait_for("the watch to serve", lambda: proc.poll() is None and "imagelint_memcg_dying" in http_get(
            f"http://127.0.0.1:{port}/metrics"))  # fmt: skip
        up = wait_for("a scrape", lambda: scalar(prom, 'up{job="imagelint"}'))
        assert up == 1.0
        before = wait_for("the first dying count", lambda: scalar(prom, "imagelint_memcg_dying"))
        flat = scalar(prom, "imagelint_memcg_dying_slope_per_hour")

        leak.start(period=0.5)  # one leaked memcg per 0.5 s: 7,200 per hour
        risen = wait_for(
            "the dying count to rise by 20",
            lambda: (v := scalar(prom, "imagelint_memcg_dying")) is not None and v >= before + 20 and v,
            timeout=90,
        )
        slope = wait_for(
            "a significant slope above 1,000/h",
            lambda: (
                (s := scalar(prom, "imagelint_memcg_dying_slope_per_hour")) is not None
                and s > 1000
                and (scalar(prom, "imagelint_memcg_dying_slope_p_value") or 1.0) < 0.01
                and s
            ),
            timeout=90,
        )
        assert risen >= before + 20 and slope > (flat or 0.0)
        assert leak.errors == []
        # the soak rule over the window agrees, through the one verdict function
        wait_for(
            "IL401 to fail over the window",
            lambda: scalar(prom, 'imagelint_verdict{rule="IL401",outcome="fail"}') == 1.0,
            timeout=60,
        )
        sources = {r["metric"]["source"]: r["value"][1] for r in query(prom, "imagelint_source_up")}
        assert sources["cgroups"] == sources["memory_stat"] == "1"
        assert sources["journal"] == "0"  # the directory given does not exist: said, not fatal
        walk = scalar(prom, "imagelint_memory_stat_walk_seconds")
        assert walk is not None and walk > 0

        body = http_get(f"http://127.0.0.1:{port}/metrics")
        checked = promtool("check", "metrics", stdin=body)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        # the textfile: node_exporter reads it, promtool accepts it
        prom_file = textdir / "imagelint.prom"
        assert prom_file.is_file() and [p.name for p in textdir.iterdir()] == ["imagelint.prom"]
        checked = promtool("check", "metrics", stdin=prom_file.read_text())
        assert checked.returncode == 0, checked.stdout + checked.stderr
        nport = free_port()
        argv = [
            exporter, f"--web.listen-address=127.0.0.1:{nport}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={textdir}",
        ]  # fmt: skip
        with process(argv, tmp_path / "node-exporter.log"):
            url = f"http://127.0.0.1:{nport}/metrics"
            exposed = wait_for(
                "node_exporter to serve the textfile",
                lambda: (t := http_get(url)) and "imagelint_memcg_dying " in t and t,
            )
        assert "node_textfile_scrape_error 0" in exposed
        dying_line = next(ln for ln in exposed.splitlines() if ln.startswith("imagelint_memcg_dying "))
        # a number, not the rise again: the kernel frees dying memcgs whenever it reclaims, so the count
        # is not monotonic (the rise was judged above, on what Prometheus scraped)
        assert float(dying_line.split()[1]) > 0
        assert "process_cpu_seconds_total" not in prom_file.read_text()  # node_exporter has its own
    assert proc.returncode is not None
