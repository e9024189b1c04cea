"""What scripts/prometheus-check.py and scripts/fleet-check.py share: a free
port, Prometheus's query API, a server started on a config, and stopping
everything a check started."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tools(check):
    """The flatline and prometheus binaries a check runs: its arguments, else
    the debug build and the one on PATH; None (said on stderr) without a
    prometheus."""
    flatline = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "debug", "flatline")
    prometheus = sys.argv[2] if len(sys.argv) > 2 else shutil.which("prometheus")
    if not prometheus:
        print(f"{check}: no prometheus binary (apt-get install prometheus)", file=sys.stderr)
        return None
    return flatline, prometheus


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def series(prom, expr):
    """The series an instant query returns (each with `metric` and `value`)."""
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def query(prom, expr):
    """The values an instant query returns."""
    return [float(x["value"][1]) for x in series(prom, expr)]


def start_prometheus(prometheus, config, work, port):
    """A Prometheus server on loopback with `config`, its data and log in `work`."""
    return subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={work}/data",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))


def stop(started, killed):
    """Stops what is still running, newest first: SIGKILL for those `killed`
    says (helpers), SIGINT for the rest (flatline finishes its recording)."""
    for p in reversed(started):
        if p.poll() is None:
            p.send_signal(signal.SIGKILL if killed(p) else signal.SIGINT)
    for p in reversed(started):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
