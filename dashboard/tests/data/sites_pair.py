"""A leak and its fix, for `flatline compare` by site: the same line
allocates 64 KiB every 50 ms in both; `leak` keeps every block, `fixed`
keeps the last 32 (2 MiB, then flat).

usage: sites_pair.py leak|fixed SECONDS
"""

import sys
import time


def remember(cache, fixed):
    cache.append(bytearray(64 << 10))
    if fixed:
        del cache[:-32]


def churn():
    junk = [str(i) * 3 for i in range(2000)]
    return len(junk)


def main(kind, seconds):
    cache = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        remember(cache, kind == "fixed")
        churn()
        time.sleep(0.05)
    print(f"{kind}: holding {len(cache)} blocks of 64 KiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
