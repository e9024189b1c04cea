"""Reads a recording and plots one channel with matplotlib, as in a
notebook: `python python/examples/plot_channel.py REC CHANNEL OUT.png`."""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import flatline

path, name, out = sys.argv[1:4]
rec = flatline.read(path)
ch = rec[name]
report = rec.report()

fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
ax.plot(ch.times, ch.values / 2**20, lw=1.2)
for m in rec.markers:
    ax.axvline(m["t"], color="grey", lw=0.6, ls=":")
ax.set_xlabel("seconds since the start")
ax.set_ylabel(f"{name} (MiB)")
ax.set_title(report["headline"].split(". ")[0] + ".", fontsize=9, loc="left")
fig.tight_layout()
fig.savefig(out)
print(f"{name}: {report['channels'][name]['verdict']}, {len(ch)} samples; wrote {out}")
