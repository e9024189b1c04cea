#!/usr/bin/env python3
"""`watch --otlp` against an OTLP/HTTP receiver that decodes with
OpenTelemetry's own `opentelemetry-proto` (PyPI).

Makes a venv with opentelemetry-proto, starts a receiver on loopback, and
watches `dashboard/tests/data/grower.py` (0.5 MiB/s over 64 MiB) for 32 s at
10 Hz with `--otlp http://127.0.0.1:PORT --otlp-every 1 --label run=otlp-check`.
Eight seconds in, the receiver stops for ten seconds, then starts again on
the same port. Then:

- the names arrive: `process.memory.usage` (mem.rss, with `process.pid`),
  `flatline.channel.value` (tree.pss), `flatline.channel.verdict`,
  `flatline.channel.slope`; the resource has `service.name` flatline,
  `host.name`, `process.pid` and the label `run`;
- each `process.memory.usage` point of the watched pid is within one
  reading of what the recording holds for mem.rss at its time (`export
  --csv`, on the header's wall clock);
- the watch kept sampling through the outage (no gap over 0.5 s in the
  recording), said it once on stderr and once that it was back, and the
  exports made while the receiver was away arrived after it came back (the
  queue holds them all), none dropped.

Then, configured by OpenTelemetry's variables alone (a bare `--otlp`:
`OTEL_EXPORTER_OTLP_ENDPOINT=https://127.0.0.1:PORT`, `…_CERTIFICATE` the
test CA, `…_HEADERS=authorization=Bearer%20…`, `…_COMPRESSION=gzip`), a
watch of the same grower sends to a TLS receiver that answers 401 to any
request without that header:

- every request carries the header and is gzipped; metric points arrive,
  the growth's `flatline.growth.rate` among them, and log records decode
  (`opentelemetry-proto`'s logs service) with the headline's and the
  growth's, their fields as attributes;
- with the wrong certificate (a root that did not sign the receiver's)
  the TLS failure is said once, plainly, and sampling goes on (the
  recording has no gap); with a wrong header the 401 is said once.

    python3 scripts/otlp-check.py target/debug/flatline
"""
import gzip
import ssl
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROWER = os.path.join(ROOT, "dashboard", "tests", "data", "grower.py")
TLS = os.path.join(ROOT, "dashboard", "tests", "data", "tls")
TOKEN = "Bearer otlp-check s3cret"
WATCH_S = 32
DOWN_AT, DOWN_FOR = 8, 10


def fail(msg):
    sys.exit(f"otlp-check: {msg}")


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"{' '.join(map(str, args))} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def venv(work):
    env = os.path.join(work, "venv")
    run(sys.executable, "-m", "venv", env)
    run(os.path.join(env, "bin", "pip"), "install", "-q", "opentelemetry-proto")
    site = run(os.path.join(env, "bin", "python"), "-c",
               "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    sys.path.insert(0, site)
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as svc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs
    svc.logs = logs
    return svc


class Receiver:
    """An OTLP/HTTP metrics receiver: each request decoded as it arrives,
    kept with the time it came."""

    def __init__(self, svc, port, tls=False, token=None):
        self.svc, self.port, self.got, self.server = svc, port, [], None
        self.tls, self.token = tls, token
        # Logs requests, and each request's headers (authorization, encoding).
        self.logs, self.seen = [], []

    def start(self):
        recv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recv.seen.append((self.path, self.headers.get("Authorization"),
                                  self.headers.get("Content-Encoding")))
                if recv.token is not None and self.headers.get("Authorization") != recv.token:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/logs":
                    req = recv.svc.logs.ExportLogsServiceRequest()
                    req.ParseFromString(body)
                    recv.logs.append(req)
                    out = recv.svc.logs.ExportLogsServiceResponse().SerializeToString()
                else:
                    req = recv.svc.ExportMetricsServiceRequest()
                    req.ParseFromString(body)
                    recv.got.append((time.time(), self.path, self.headers["Content-Type"], req))
                    out = recv.svc.ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(TLS, "server.pem"), os.path.join(TLS, "server-key.pem"))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def attrs(kvs):
    out = {}
    for kv in kvs:
        v = kv.value
        out[kv.key] = v.string_value if v.HasField("string_value") else v.int_value
    return out


def watch_env(flatline, work, name, env, seconds):
    """A watch of the grower with a bare `--otlp`, configured by `env`: its
    recording and what it said on stderr."""
    rec = os.path.join(work, f"{name}.flr")
    out = subprocess.run(
        [flatline, "watch", "--headless", "--hz", "10", "--seconds", str(seconds),
         "--otlp", "--otlp-every", "1", "--out", rec, "--",
         sys.executable, GROWER, "0.5", str(seconds + 30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **env}, timeout=seconds + 60)
    if out.returncode != 0:
        fail(f"the {name} watch failed ({out.returncode}):\n{out.stderr}")
    rows = list(csv.reader(io.StringIO(run(flatline, "export", rec, "--csv", "-"))))
    times = [float(r[0]) for r in rows[1:]]
    gap = max(b - a for a, b in zip(times, times[1:]))
    if gap > 0.5:
        fail(f"the {name} watch's recording has a gap of {gap:.2f} s: sampling waited")
    return out.stderr, len(times)


def check_tls(flatline, work, svc):
    """OTLP over TLS with a header and gzip, configured by the environment alone."""
    recv = Receiver(svc, 0, tls=True, token=TOKEN)
    recv.start()
    base = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"https://127.0.0.1:{recv.port}",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": os.path.join(TLS, "ca.pem"),
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=" + TOKEN.replace(" ", "%20"),
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    }
    try:
        said, samples = watch_env(flatline, work, "tls", base, 40)
        if not recv.got:
            fail(f"no metrics arrived over TLS:\n{said}")
        bad = [h for h in recv.seen if h[1] != TOKEN or h[2] != "gzip"]
        if bad:
            fail(f"{len(bad)} of {len(recv.seen)} requests lacked the header or gzip: {bad[:3]}")
        names = {m.name for _, _, _, req in recv.got
                 for m in req.resource_metrics[0].scope_metrics[0].metrics}
        if "flatline.growth.rate" not in names:
            fail(f"no flatline.growth.rate among {sorted(names)}")
        records = [r for req in recv.logs for rl in req.resource_logs
                   for sl in rl.scope_logs for r in sl.log_records]
        kinds = {}
        for r in records:
            a = attrs(r.attributes)
            kinds.setdefault(a.get("flatline.kind"), (r.severity_text, r.body.string_value, a))
        for want in ("headline", "growth"):
            if want not in kinds:
                fail(f"no {want} log record among {sorted(k or '' for k in kinds)}")
        g = kinds["growth"][2]
        if g.get("flatline.channel") != "mem.rss" or not g.get("process.pid"):
            fail(f"the growth record's fields: {g}")
        print(f"otlp-check: TLS from the environment alone: {len(recv.got)} metric exports and "
              f"{len(records)} log records, every one of {len(recv.seen)} requests with the "
              f"header and gzipped; records {sorted(k for k in kinds if k)}; the growth's: "
              f"{kinds['growth'][0]} {kinds['growth'][1]!r}")
        # The wrong root: said once, and sampling goes on.
        wrong = {**base, "OTEL_EXPORTER_OTLP_CERTIFICATE": os.path.join(TLS, "client.pem")}
        before = len(recv.seen)
        said, samples = watch_env(flatline, work, "wrong-ca", wrong, 8)
        if len(recv.seen) != before:
            fail("a request was answered through the wrong certificate")
        if said.count("does not take the metrics") != 1 or "TLS" not in said:
            fail(f"the TLS failure is not said once, plainly:\n{said}")
        print(f"otlp-check: the wrong certificate: {said.strip().splitlines()[-1][:200]!r}; "
              f"{samples} samples recorded")
        # The wrong header: the 401 said once.
        wrong = {**base, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20wrong"}
        said, samples = watch_env(flatline, work, "wrong-header", wrong, 6)
        if said.count("refused flatline's credentials") != 1 or "401" not in said:
            fail(f"the 401 is not said once:\n{said}")
        print("otlp-check: a wrong header: the 401 said once")
    finally:
        recv.stop()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    flatline = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="flatline-otlp-")
    watch = None
    try:
        svc = venv(work)
        recv = Receiver(svc, 0)
        recv.start()
        rec = os.path.join(work, "grow.flr")
        log = open(os.path.join(work, "watch.log"), "w+")
        watch = subprocess.Popen(
            [flatline, "watch", "--headless", "--hz", "10", "--seconds", str(WATCH_S),
             "--otlp", f"http://127.0.0.1:{recv.port}", "--otlp-every", "1",
             "--label", "run=otlp-check", "--out", rec, "--", sys.executable, GROWER, "0.5", "60"],
            stdout=subprocess.DEVNULL, stderr=log)
        time.sleep(DOWN_AT)
        recv.stop()
        down = (time.time(), time.time() + DOWN_FOR)
        time.sleep(DOWN_FOR)
        recv.start()
        if watch.wait(timeout=WATCH_S + 60) != 0:
            log.seek(0)
            fail(f"the watch failed ({watch.returncode}):\n{log.read()}")
        watch = None
        time.sleep(1)
        recv.stop()
        log.seek(0)
        said = log.read()

        got = recv.got
        if not got:
            fail(f"no export arrived:\n{said}")
        paths = {p for _, p, _, _ in got}
        types = {t for _, _, t, _ in got}
        assert paths == {"/v1/metrics"} and types == {"application/x-protobuf"}, (paths, types)
        report = json.loads(run(flatline, "report", rec, "--format", "json"))
        started_s = report["recording"]["started_unix_ms"] / 1000
        pid = int(report["recording"].get("pid") or 0) or None
        res = attrs(got[0][3].resource_metrics[0].resource.attributes)
        for k in ("service.name", "host.name", "process.pid", "run"):
            if k not in res:
                fail(f"no resource attribute {k}: {res}")
        assert res["service.name"] == "flatline" and res["run"] == "otlp-check", res
        pid = res["process.pid"]

        names = set()
        rss = []
        for _, _, _, req in got:
            for m in req.resource_metrics[0].scope_metrics[0].metrics:
                names.add(m.name)
                for p in m.gauge.data_points:
                    a = attrs(p.attributes)
                    if m.name == "process.memory.usage" and a.get("flatline.channel") == "mem.rss":
                        assert a.get("process.pid") == pid, a
                        assert m.unit == "By", m.unit
                        rss.append((p.time_unix_nano / 1e9, p.as_double))
        for want in ("process.memory.usage", "flatline.channel.value", "flatline.channel.verdict",
                     "flatline.channel.slope", "flatline.samples", "flatline.otlp.dropped_exports"):
            if want not in names:
                fail(f"no {want} among {sorted(names)}")

        rows = list(csv.reader(io.StringIO(run(flatline, "export", rec, "--csv", "-"))))
        k = rows[0].index("mem.rss")
        column = [(float(r[0]), float(r[k])) for r in rows[1:] if r[k]]
        times = [t for t, _ in column]
        gaps = max(b - a for a, b in zip(times, times[1:]))
        if gaps > 0.5:
            fail(f"the recording has a gap of {gaps:.2f} s: sampling waited")
        off = 0
        for t_wall, v in rss:
            t = t_wall - started_s
            i = min(range(len(times)), key=lambda j: abs(times[j] - t))
            near = [column[j][1] for j in range(max(0, i - 1), min(len(column), i + 2))]
            if v not in near:
                off += 1
                print(f"otlp-check: mem.rss {v} at {t:.2f} s; the recording has {near}")
        if off:
            fail(f"{off} of {len(rss)} mem.rss points are not within one reading of the recording")

        if len(re.findall(r"does not take the metrics", said)) != 1:
            fail(f"the outage is not said once:\n{said}")
        if len(re.findall(r"takes the metrics again", said)) != 1:
            fail(f"the return is not said once:\n{said}")
        made_down = [t for t, _ in rss if down[0] + 1 <= t <= down[1] - 1]
        late = [arr for arr, _, _, req in got if arr > down[1]]
        if len(made_down) < DOWN_FOR - 4:
            fail(f"only {len(made_down)} exports made during the outage arrived")
        dropped = [p.as_double for _, _, _, req in got
                   for m in req.resource_metrics[0].scope_metrics[0].metrics
                   if m.name == "flatline.otlp.dropped_exports" for p in m.gauge.data_points]
        if dropped[-1] != 0:
            fail(f"{dropped[-1]} exports dropped")
        print(f"otlp-check: {len(got)} exports, {len(names)} metric names; mem.rss in "
              f"{len(rss)} points, each within one reading of the recording; "
              f"{len(made_down)} made while the receiver was away arrived after it came back "
              f"({len(late)} exports late or after), none dropped; no gap in sampling "
              f"(largest {gaps * 1000:.0f} ms)")
        check_tls(flatline, work, svc)
    finally:
        if watch is not None:
            watch.kill()
            watch.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("otlp-check: ok")


if __name__ == "__main__":
    main()
