#!/usr/bin/env python3
"""What `--otlp` and a scraped `/debug/pprof/heap` cost a watch: flatline's
own CPU (its utime + stime, not its job's) over the same job, with and
without them, in alternating runs.

Each run watches `dashboard/tests/data/sites_job.py bytes` (a Python job
keeping 64 KiB every 50 ms) with `--headless --sites --hz 10 --prometheus
127.0.0.1:0` for SECONDS; the runs "with" add `--otlp` to a receiver here
(which answers 200 to everything) at its default 10 s and fetch
`/debug/pprof/heap` every 15 s, as a Parca or Pyroscope scraper would.
Prints each run's CPU as % of one core and the medians' difference.

With `tls` last, the whole exporter is measured against none: the runs
"without" have no `--prometheus` and no `--otlp`; the runs "with" serve
`/metrics` (its growth series and the answer made each second) and send
OTLP over TLS to a receiver on the test certificates, configured as a
user would (`OTEL_EXPORTER_OTLP_CERTIFICATE`, `…_HEADERS`,
`…_COMPRESSION=gzip`), log records included.

    python3 scripts/export-overhead.py target/release/flatline [SECONDS] [RUNS] [tls]
"""
import ssl
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(ROOT, "dashboard", "tests", "data", "sites_job.py")
TLS_DIR = os.path.join(ROOT, "dashboard", "tests", "data", "tls")
TICK = os.sysconf("SC_CLK_TCK")


class Ok(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(flatline, seconds, extras, port, tls=False):
    work = tempfile.mkdtemp(prefix="flatline-overhead-")
    args = [flatline, "watch", "--headless", "--sites", "--hz", "10", "--out", os.path.join(work, "w.flr")]
    env = dict(os.environ)
    if not tls or extras:
        args += ["--prometheus", "127.0.0.1:0"]
    if extras and tls:
        args += ["--otlp", f"https://127.0.0.1:{port}"]
        env.update({"OTEL_EXPORTER_OTLP_CERTIFICATE": os.path.join(TLS_DIR, "ca.pem"),
                    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20overhead",
                    "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})
    elif extras:
        args += ["--otlp", f"http://127.0.0.1:{port}"]
    args += ["--", sys.executable, JOB, "bytes", str(seconds + 30)]
    log = open(os.path.join(work, "log"), "w+")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)
    url = None
    for _ in range(100):
        time.sleep(0.1)
        log.seek(0)
        m = re.search(r"heap profile at (http://\S+)", log.read())
        if m:
            url = m.group(1)
            break
    time.sleep(3)  # past its start
    c0, t0 = cpu_s(p.pid), time.monotonic()
    next_scrape = t0
    while time.monotonic() - t0 < seconds:
        if extras and url and time.monotonic() >= next_scrape:
            urllib.request.urlopen(url, timeout=5).read()
            next_scrape += 15
        time.sleep(0.2)
    c1, t1 = cpu_s(p.pid), time.monotonic()
    p.terminate()
    p.wait()
    return 100 * (c1 - c0) / (t1 - t0)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    flatline = os.path.abspath(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    tls = len(sys.argv) > 4 and sys.argv[4] == "tls"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(TLS_DIR, "server.pem"), os.path.join(TLS_DIR, "server-key.pem"))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    without, with_ = [], []
    for k in range(runs):
        without.append(one(flatline, seconds, False, port, tls))
        with_.append(one(flatline, seconds, True, port, tls))
        print(f"run {k + 1}: without {without[-1]:.2f} % of a core, with {with_[-1]:.2f} %", flush=True)
    a, b = statistics.median(without), statistics.median(with_)
    what = ("--prometheus, OTLP over TLS and /debug/pprof/heap every 15 s" if tls
            else "--otlp and /debug/pprof/heap every 15 s")
    print(f"median: without {a:.2f} %, with {what} {b:.2f} %: "
          f"{b - a:+.2f} % of a core")


if __name__ == "__main__":
    main()
