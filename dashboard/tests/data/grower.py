"""A process whose memory is known: it holds BASE MiB, then grows RATE MiB a
second by the clock for SECS seconds, then holds what it has until killed.

    python3 grower.py RATE SECS [BASE]

Prints "ready" once the base is resident. Used by the Prometheus tests and
by .ci/run's check against a real Prometheus server."""
import sys
import time

rate, secs = float(sys.argv[1]), float(sys.argv[2])
base = int(sys.argv[3]) if len(sys.argv) > 3 else 64
chunk = 64 << 10
keep = [bytearray(b"\x01" * (base << 20))]
print("ready", flush=True)
t0 = time.time()
grown = 0
while True:
    elapsed = min(time.time() - t0, secs)
    want = int(elapsed * rate * (1 << 20) / chunk)
    while grown < want:
        keep.append(bytearray(b"\x01" * chunk))
        grown += 1
    time.sleep(0.02)
