#!/usr/bin/env python3
"""What a scrape of `--prometheus` costs, and whether scrapes get through a
crowd: one or more flatline binaries measured in the same run, so their
figures can be compared as ratios on a noisy machine.

For each binary, and for each door (plain HTTP; TLS with basic auth, the
test certificates), a headless idle soak serves /metrics and this script:

- cost: N scrapes one after another, each on a new connection (the worst
  case: a TLS handshake each), and N on one kept-alive connection (what
  Prometheus does); the server's CPU time for them (utime+stime from /proc,
  less what it spends idle over the same time) divided by N;
- crowd: IDLE connections opened and held (half say nothing, half send the
  start of a request line and stop), then N scrapes: how many are answered;
- burst: 50 scrapers at once, 10 scrapes each: how many are answered.

    scripts/scrape-bench.py [--runs K] NAME=FLATLINE [NAME=FLATLINE ...]

Prints one table of medians over K runs (default 3).
"""
import base64
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TLS = os.path.join(ROOT, "dashboard", "tests", "data", "tls")
USER, PASSWORD = "prometheus", "bench"
N = 500
IDLE = 300
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Client:
    def __init__(self, port, tls):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=os.path.join(TLS, "ca.pem")) if tls else None
        auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.auth = f"Authorization: Basic {auth}\r\n" if tls else ""

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        if self.ctx:
            s = self.ctx.wrap_socket(s, server_hostname="127.0.0.1")
        return s

    def request(self, close):
        c = "Connection: close\r\n" if close else ""
        return f"GET /metrics HTTP/1.1\r\nHost: x\r\n{c}{self.auth}\r\n".encode()

    def scrape(self):
        """One scrape on a new connection: True when answered 200."""
        try:
            s = self.connect()
            s.sendall(self.request(True))
            data = b""
            while True:
                b = s.recv(1 << 16)
                if not b:
                    break
                data += b
            s.close()
            return data.startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    @staticmethod
    def more(s):
        b = s.recv(1 << 16)
        if not b:
            raise OSError("closed")
        return b

    def scrape_on(self, s, buf):
        """One scrape on kept-alive `s` (a server that closes after each
        answer makes the caller connect again)."""
        s.sendall(self.request(False))
        while b"\r\n\r\n" not in buf[0]:
            buf[0] += self.more(s)
        head, rest = buf[0].split(b"\r\n\r\n", 1)
        length = int([l.split(b":")[1] for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length")][0])
        while len(rest) < length:
            rest += self.more(s)
        buf[0] = rest[length:]
        return head.startswith(b"HTTP/1.1 200")


def start(flatline, work, tls):
    port_sock = socket.socket()
    port_sock.bind(("127.0.0.1", 0))
    port = port_sock.getsockname()[1]
    port_sock.close()
    args = [flatline, "soak", "--workload", "idle", "--hz", "10", "--seconds", "600",
            "--out", os.path.join(work, f"s{time.time_ns()}.flr"),
            "--prometheus", f"127.0.0.1:{port}"]
    if tls:
        hashed = subprocess.run([flatline, "hash-password"], input=PASSWORD + "\n",
                                capture_output=True, text=True, check=True).stdout.strip()
        web = os.path.join(work, "web.yml")
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {TLS}/server.pem\n"
                    f"  key_file: {TLS}/server-key.pem\n"
                    f"basic_auth_users:\n  {USER}: '{hashed}'\n")
        args += ["--web-config", web]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Client(port, tls)
    for _ in range(200):
        if c.scrape():
            return p, c
        time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"{flatline} does not serve")


def one_run(flatline, tls):
    out = {}
    with tempfile.TemporaryDirectory() as work:
        p, c = start(flatline, work, tls)
        try:
            time.sleep(1)
            # Idle CPU rate.
            a, t = cpu_s(p.pid), time.time()
            time.sleep(3)
            idle_rate = (cpu_s(p.pid) - a) / (time.time() - t)
            # New connection per scrape.
            a, t = cpu_s(p.pid), time.time()
            ok = sum(c.scrape() for _ in range(N))
            dt = time.time() - t
            out["ms/scrape, new conn"] = 1000 * max(0.0, cpu_s(p.pid) - a - idle_rate * dt) / N
            out["answered, new conn"] = ok / N
            # Kept alive.
            s, buf = c.connect(), [b""]
            a, t = cpu_s(p.pid), time.time()
            ok = 0
            for _ in range(N):
                try:
                    ok += c.scrape_on(s, buf)
                except OSError:
                    s.close()
                    s, buf = c.connect(), [b""]
                    ok += c.scrape_on(s, buf)
            dt = time.time() - t
            s.close()
            out["ms/scrape, kept alive"] = 1000 * max(0.0, cpu_s(p.pid) - a - idle_rate * dt) / N
            # A crowd of idle and slow connections.
            held = []
            for i in range(IDLE):
                try:
                    h = socket.create_connection(("127.0.0.1", c.port), timeout=5)
                    if i % 2:
                        h.sendall(b"GET /metr")
                    held.append(h)
                except OSError:
                    pass
            out[f"answered with {IDLE} idle held"] = sum(c.scrape() for _ in range(100)) / 100
            for h in held:
                h.close()
            time.sleep(2.5)
            # A burst: 50 scrapers at once.
            results = []
            lock = threading.Lock()

            def scraper():
                r = [c.scrape() for _ in range(10)]
                with lock:
                    results.extend(r)
            threads = [threading.Thread(target=scraper) for _ in range(50)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            out["answered, 50 at once"] = sum(results) / len(results)
            with open(f"/proc/{p.pid}/status") as f:
                rss = [l for l in f if l.startswith("VmRSS")][0].split()[1]
            out["server RSS MiB"] = int(rss) / 1024
        finally:
            p.kill()
            p.wait()
    return out


def main():
    args = sys.argv[1:]
    runs = 3
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    binaries = [a.split("=", 1) for a in args]
    rows = {}
    for _ in range(runs):
        for name, path in binaries:
            for tls in (False, True):
                if tls and name.endswith("(no door)"):
                    continue
                try:
                    r = one_run(path, tls)
                except RuntimeError as e:
                    print(e, file=sys.stderr)
                    continue
                key = f"{name} {'TLS+auth' if tls else 'plain'}"
                for k, v in r.items():
                    rows.setdefault(key, {}).setdefault(k, []).append(v)
    cols = list(next(iter(rows.values())).keys())
    print("| server | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for key, r in rows.items():
        cells = []
        for c in cols:
            m = statistics.median(r[c])
            cells.append(f"{100 * m:.1f} %" if c.startswith("answered") else f"{m:.3f}")
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(f"medians of {runs} runs; N = {N} scrapes")


if __name__ == "__main__":
    main()
