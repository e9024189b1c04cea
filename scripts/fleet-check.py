#!/usr/bin/env python3
"""Four watchers stand in for four nodes of one job; one rank leaks.

Starts four helper processes (ranks 0-3: RANK and WORLD_SIZE in their
environment, as torchrun sets them), rank 2 growing 1 MiB a second and the
others holding; a headless `flatline watch --pid` of each, serving /metrics
on a port of its own and writing its recording; and a real Prometheus that
scrapes all four every second as job `flatline` with the shipped rules
(assets/prometheus/flatline-rules.yml) evaluated every second. Then:

- the rank-outlier alert (pending: it holds 10 minutes before it fires)
  is there for rank 2 and for no other rank;
- every watcher's series carry its rank, read from its process's
  environment;
- `flatline fleet` over the four recordings names rank 2 first, and only
  rank 2.

Everything it started is stopped at the end, pass or fail.

    scripts/fleet-check.py [FLATLINE] [PROMETHEUS]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from prom_helpers import tools, free_port, series, start_prometheus, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROWER = os.path.join(ROOT, "dashboard", "tests", "data", "grower.py")
RULES = os.path.join(ROOT, "assets", "prometheus", "flatline-rules.yml")
RANKS, LEAKER = 4, 2
WATCH_S = 50


def main():
    found = tools("fleet-check")
    if not found:
        return 2
    flatline, prometheus = found
    work = tempfile.mkdtemp(prefix="flatline-fleet-")
    started = []
    try:
        ports = []
        for rank in range(RANKS):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(RANKS))
            rate = "1.0" if rank == LEAKER else "0"
            grower = subprocess.Popen([sys.executable, GROWER, rate, "3600", "64"],
                                      stdout=subprocess.PIPE, text=True, env=env)
            started.append(grower)
            assert grower.stdout.readline().strip() == "ready"
            port = free_port()
            ports.append(port)
            watch = subprocess.Popen(
                [flatline, "watch", "--headless", "--pid", str(grower.pid), "--hz", "10",
                 "--seconds", str(WATCH_S), "--out", os.path.join(work, f"rank-{rank}.flr"),
                 "--prometheus", f"127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started.append(watch)
        prom = free_port()
        config = os.path.join(work, "prometheus.yml")
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {RULES}\n"
                    "scrape_configs:\n  - job_name: flatline\n"
                    f"    static_configs:\n      - targets: [{targets}]\n")
        server = start_prometheus(prometheus, config, work, prom)
        started.append(server)
        t0 = time.time()
        alerts = []
        while time.time() - t0 < WATCH_S - 5:
            time.sleep(2)
            try:
                alerts = series(prom, 'ALERTS{alertname="FlatlineRankOutlier"}')
            except (OSError, RuntimeError):
                continue
            # Wait a little past the first, so a wrong rank has time to show.
            if alerts and time.time() - t0 >= 30:
                break
        ok = True
        ranks = sorted({a["metric"].get("rank") for a in alerts})
        chans = sorted({a["metric"].get("channel") for a in alerts})
        print(f"rank-outlier alerts: ranks {ranks}, channels {chans}, "
              f"states {sorted({a['metric'].get('alertstate') for a in alerts})}")
        ok &= ranks == [str(LEAKER)]
        labelled = sorted({s["metric"].get("rank") for s in series(prom, "flatline_samples_total")})
        print(f"ranks on the watchers' series (from RANK): {labelled}")
        ok &= labelled == [str(r) for r in range(RANKS)]
        # The watchers end at --seconds; their recordings are whole then.
        for p in started:
            if p.args[0] == flatline:
                p.wait(timeout=WATCH_S + 30)
        fleet = subprocess.run([flatline, "fleet", work, "--format", "json"],
                               capture_output=True, text=True)
        v = json.loads(fleet.stdout)
        named = [o["labels"].get("rank") for o in v["outliers"]]
        print(f"flatline fleet: {v['headline']!r}; outliers' ranks {sorted(set(named))}")
        ok &= fleet.returncode == 0 and bool(named) and set(named) == {str(LEAKER)}
        ok &= v["headline"].startswith(f"rank {LEAKER} of {RANKS}")
        print("fleet-check:", "passed" if ok else "FAILED")
        if not ok:
            with open(os.path.join(work, "prometheus.log")) as f:
                sys.stderr.write(f.read()[-3000:])
        return 0 if ok else 1
    finally:
        stop(started, lambda p: p.args[0] == sys.executable)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
