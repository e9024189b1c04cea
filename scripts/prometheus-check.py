#!/usr/bin/env python3
"""flatline's exporter against a real Prometheus server.

Starts a helper process that grows at a known rate, a headless
`flatline watch --prometheus --web-config` of it (TLS with the test
certificates, basic auth with a hash `flatline hash-password` made), and a
Prometheus server on loopback that scrapes it every second over TLS with the
password (`tls_config`, `basic_auth`), and once more without the password;
then asks Prometheus's HTTP API, with PromQL, whether what it gathered is
right:

- the scrape without the password is refused (its `up` is 0, and a direct
  request gets 401),

- mem.rss's value agrees with /proc within 2 %,
- its slope (flatline's, and PromQL's deriv()) with the truth within 15 %,
- its verdict series says `linear`;
- every query of assets/grafana-flatline.json is valid PromQL, and those
  that show this process's memory return it.

Then a `flatline watch --sites --prometheus` of a Python job that leaks at
one line (dashboard/tests/data/sites_job.py, line 23), scraped by a second
Prometheus that evaluates the shipped rules (assets/prometheus/flatline-
rules.yml, with FlatlineGrowth's 10-minute hold cut to none so the check
does not wait for it): 30 s in, `flatline_growth_bytes_per_second` holds a
series with the job's pid and that line, and FlatlineGrowth fires with a
summary that names the process and the line.

Everything it started is stopped at the end, pass or fail.

    scripts/prometheus-check.py [FLATLINE] [PROMETHEUS]
"""
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from prom_helpers import tools, free_port, query, series, start_prometheus, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROWER = os.path.join(ROOT, "dashboard", "tests", "data", "grower.py")
SITES_JOB = os.path.join(ROOT, "dashboard", "tests", "data", "sites_job.py")
RULES = os.path.join(ROOT, "assets", "prometheus", "flatline-rules.yml")
# The line sites_job.py keeps its memory at (`keep()`).
LEAK_LINE = "sites_job.py:23"
GRAFANA = os.path.join(ROOT, "assets", "grafana-flatline.json")
TLS = os.path.join(ROOT, "dashboard", "tests", "data", "tls")
USER, PASSWORD = "prometheus", "correct horse battery staple"
# Panels that must show data for one growing process (by title).
MUST_SHOW = {
    "Growths: who grows, in what memory, how fast, when it reaches its limit, at which line",
    "Growing channels (verdict linear or staircase)",
    "Host memory per node",
    "Slope of host memory",
    "PSS per process (ranks and workers)",
    "The watcher's own health",
}
RATE_MIB_S = 0.5  # over a 128 MiB base: a scrape's lag is well under 2 %
BASE_MIB = 128
WAIT_S = 40


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def children(pid):
    """The pids of a process's children."""
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def alerts(prom, name):
    """The alerts of that name Prometheus holds, each as its state, labels and annotations."""
    url = f"http://127.0.0.1:{prom}/api/v1/alerts"
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    return [a for a in body["data"]["alerts"] if a["labels"].get("alertname") == name]


def check_growth_alert(flatline, prometheus, work):
    """A watched leak's growth series and the shipped rule's alert that names its line."""
    port, prom = free_port(), free_port()
    watch = subprocess.Popen(
        [flatline, "watch", "--headless", "--sites", "--hz", "10",
         "--out", os.path.join(work, "sites.flr"), "--prometheus", f"127.0.0.1:{port}",
         "--", sys.executable, SITES_JOB, "bytes", "120"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "watch-sites.log"), "w"))
    started = [watch]
    try:
        rules = os.path.join(work, "rules.yml")
        with open(RULES) as f:
            text = f.read()
        head, tail = text.split("- alert: FlatlineGrowth", 1)
        tail = tail.replace("for: 10m", "for: 0s", 1)
        with open(rules, "w") as f:
            f.write(head + "- alert: FlatlineGrowth" + tail)
        config = os.path.join(work, "prometheus-sites.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: ['{rules}']\n"
                    "scrape_configs:\n  - job_name: flatline\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        data = os.path.join(work, "sites-data")
        os.mkdir(data)
        server = start_prometheus(prometheus, config, data, prom)
        started.append(server)
        t0 = time.time()
        time.sleep(30)
        growth, firing = [], []
        while time.time() - t0 < 90:
            try:
                growth = series(prom, "flatline_growth_bytes_per_second")
                firing = [a for a in alerts(prom, "FlatlineGrowth") if a["state"] == "firing"]
            except (OSError, RuntimeError):
                pass
            if any(LEAK_LINE in g["metric"].get("site", "") for g in growth) and firing:
                break
            time.sleep(2)
        kids = children(watch.pid)
        ok = True
        lines = [g["metric"] for g in growth if LEAK_LINE in g["metric"].get("site", "")]
        print(f"growth series at {LEAK_LINE} after {time.time() - t0:.0f} s: {lines}")
        ok &= bool(lines) and all(int(m["pid"]) in kids for m in lines)
        if lines and not all(int(m["pid"]) in kids for m in lines):
            print(f"their pid is not the job's ({kids})")
        for a in firing:
            print(f"FlatlineGrowth fires: {a['annotations'].get('summary')!r}")
            print(f"  {a['annotations'].get('description')!r}")
        named = [a for a in firing
                 if LEAK_LINE in a["annotations"].get("summary", "")
                 and a["labels"].get("pid", "") in a["annotations"].get("summary", "")
                 and a["labels"].get("process")
                 and a["labels"]["process"] in a["annotations"].get("summary", "")]
        ok &= bool(named)
        if not named:
            print("no FlatlineGrowth alert names the process and the line")
            with open(os.path.join(work, "watch-sites.log")) as f:
                sys.stderr.write(f.read()[-2000:])
        return ok
    finally:
        stop(started, lambda p: False)


def main():
    found = tools("prometheus-check")
    if not found:
        return 2
    flatline, prometheus = found
    work = tempfile.mkdtemp(prefix="flatline-prom-")
    started = []
    try:
        grower = subprocess.Popen(
            [sys.executable, GROWER, str(RATE_MIB_S), "3600", str(BASE_MIB)],
            stdout=subprocess.PIPE, text=True)
        started.append(grower)
        assert grower.stdout.readline().strip() == "ready"
        port, prom = free_port(), free_port()
        hashed = subprocess.run([flatline, "hash-password"], input=PASSWORD + "\n",
                                capture_output=True, text=True, check=True).stdout.strip()
        web = os.path.join(work, "web.yml")
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {TLS}/server.pem\n"
                    f"  key_file: {TLS}/server-key.pem\n"
                    f"basic_auth_users:\n  {USER}: '{hashed}'\n")
        watch = subprocess.Popen(
            [flatline, "watch", "--headless", "--pid", str(grower.pid), "--hz", "10",
             "--seconds", str(WAIT_S + 60), "--out", os.path.join(work, "w.flr"),
             "--prometheus", f"127.0.0.1:{port}", "--web-config", web],
            stdout=subprocess.DEVNULL)
        started.append(watch)
        config = os.path.join(work, "prometheus.yml")
        tls_scrape = (f"    scheme: https\n    tls_config:\n      ca_file: {TLS}/ca.pem\n"
                      f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        with open(config, "w") as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: flatline\n"
                f"    basic_auth:\n      username: {USER}\n      password: '{PASSWORD}'\n"
                + tls_scrape
                + "  - job_name: without-password\n" + tls_scrape)
        server = start_prometheus(prometheus, config, work, prom)
        started.append(server)
        rss = 'channel="mem.rss"'
        t0 = time.time()
        verdict = []
        while time.time() - t0 < WAIT_S + 30:
            time.sleep(2)
            try:
                verdict = query(prom, f'flatline_channel_verdict{{{rss},verdict="linear"}}')
            except (OSError, RuntimeError):
                continue
            if verdict == [1.0] and time.time() - t0 >= WAIT_S:
                break
        ok = True
        print(f"verdict linear: {verdict}")
        ok &= verdict == [1.0]
        value = query(prom, f"flatline_channel_value{{{rss}}}")
        truth = vm_rss(grower.pid)
        err = abs(value[0] / truth - 1) if value else float("inf")
        print(f"value {value} against /proc {truth}: {100 * err:.2f} % off")
        ok &= err < 0.02
        want = RATE_MIB_S * 1048576
        for name, expr in [
            ("flatline's slope", f"flatline_channel_slope_per_second{{{rss}}}"),
            ("PromQL deriv()", f"deriv(flatline_channel_value{{{rss}}}[20s])"),
        ]:
            got = query(prom, expr)
            err = abs(got[0] / want - 1) if got else float("inf")
            print(f"{name} {got} against {want:.0f} B/s: {100 * err:.1f} % off")
            ok &= err < 0.15
        up = query(prom, 'up{job="flatline"}')
        print(f"up over TLS with the password: {up}")
        ok &= up == [1.0]
        refused = query(prom, 'up{job="without-password"}')
        print(f"up over TLS without the password: {refused}")
        ok &= refused == [0.0]
        ctx = ssl.create_default_context(cafile=os.path.join(TLS, "ca.pem"))
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx, timeout=5)
            print("a request without the password was answered")
            ok = False
        except urllib.error.HTTPError as e:
            print(f"a request without the password: {e.code}")
            ok &= e.code == 401
        with open(GRAFANA) as f:
            panels = json.load(f)["panels"]
        for p in panels:
            for t in p.get("targets", []):
                expr = t["expr"].replace("$host", ".*")
                try:
                    got = query(prom, expr)
                except (OSError, RuntimeError) as e:
                    print(f"grafana panel {p['title']!r}: {expr}: {e}")
                    ok = False
                    continue
                if p["title"] in MUST_SHOW and t["refId"] == "A" and not got:
                    print(f"grafana panel {p['title']!r} shows nothing: {expr}")
                    ok = False
        print(f"grafana: {len(panels)} panels' queries checked")
        ok &= check_growth_alert(flatline, prometheus, work)
        print("prometheus-check:", "passed" if ok else "FAILED")
        if not ok:
            with open(os.path.join(work, "prometheus.log")) as f:
                sys.stderr.write(f.read()[-3000:])
        return 0 if ok else 1
    finally:
        stop(started, lambda p: p is started[0])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
