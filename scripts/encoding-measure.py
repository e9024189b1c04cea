#!/usr/bin/env python3
# Usage: flatline export SOAK.flr --csv soak.csv && python3 scripts/encoding-measure.py soak.csv
# (issue #17: choose the next sample encoding by measurement).
# Bytes an hour of a 100 Hz soak under candidate block encodings (per column,
# per block of 50 samples = 0.5 s, as the v2 writer flushes them).
import csv, struct, sys, zlib, lzma, math
rows = list(csv.reader(open(sys.argv[1])))
head, data = rows[0], rows[1:]
cols = list(zip(*data))
def num(s): return float('nan') if s == '' else float(s)
cols = [[num(x) for x in c] for c in cols]
t = cols[0]; dur = t[-1] - t[0]
BLOCK = 50
def varint(n):
    n = (n << 1) ^ (n >> 63)  # zigzag
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n: return bytes(out)
def bits(f): return struct.unpack('<Q', struct.pack('<d', f))[0]
def is_int(v): return not math.isnan(v) and v == int(v) and abs(v) < 2**53
def gorilla(vals):
    # XOR with previous; 1 byte header (leading zeros, length) + meaningful bytes
    out = bytearray(); prev = 0
    for v in vals:
        b = 0x7ff8000000000000 if math.isnan(v) else bits(v)
        x = b ^ prev; prev = b
        if x == 0: out.append(0); continue
        lead = (64 - x.bit_length()) // 8; trail = 0
        while (x >> (8 * trail)) & 0xff == 0: trail += 1
        n = 8 - lead - trail
        out.append((lead << 4) | n); out += (x >> (8 * trail)).to_bytes(n, 'little')
    return bytes(out)
def delta_varint(vals, order):
    out = bytearray(); p1 = p2 = 0
    for v in vals:
        if math.isnan(v): out.append(0x7f); continue  # a reserved code
        n = int(v); d = n - p1
        out += varint(d - p2 if order == 2 else d); p2 = d; p1 = n
    return bytes(out)
def column_block(vals):
    if all(is_int(v) or math.isnan(v) for v in vals):
        return min((delta_varint(vals, 1), delta_varint(vals, 2)), key=len)
    return gorilla(vals)
def raw_float(vals):
    return b''.join(struct.pack('<d', v) for v in vals) if not all(is_int(v) or math.isnan(v) for v in vals) else column_block(vals)
def runs(b):  # collapse runs of equal bytes, as v2 collapses runs of codes
    out = bytearray(); i = 0
    while i < len(b):
        j = i
        while j < len(b) and b[j] == b[i] and j - i < 255: j += 1
        if j - i >= 3: out += bytes([0xff, j - i, b[i]])
        else: out += b[i:j]
        i = j
    return bytes(out)
tns = [round(x * 1e9) for x in t]
res = {}
for name, enc in [('delta+zigzag varint, floats as f64', raw_float), ('delta+zigzag varint, floats Gorilla XOR', column_block)]:
    for post in ['none', 'runs', 'zlib-6', 'lzma']:
        total = 0
        for b0 in range(0, len(t), BLOCK):
            parts = [delta_varint(tns[b0:b0+BLOCK], 2)] + [enc(c[b0:b0+BLOCK]) for c in cols[1:]]
            blob = b''.join(parts)
            if post == 'runs': blob = b''.join(runs(p) for p in parts)
            if post == 'zlib-6': blob = zlib.compress(blob, 6)
            if post == 'lzma': blob = lzma.compress(blob, preset=6)
            total += len(blob) + 8  # frame length and CRC
        res[(name, post)] = total / dur * 3600 / 2**20
for k, v in res.items(): print(f"{v:6.2f} MiB/h  {k[0]}, then {k[1]}")
# Which columns cost most under the best plain scheme
costs = []
for i, c in enumerate(cols[1:], 1):
    n = sum(len(column_block(c[b0:b0+BLOCK])) for b0 in range(0, len(t), BLOCK))
    costs.append((n / dur * 3600 / 2**20, head[i]))
n = sum(len(delta_varint(tns[b0:b0+BLOCK], 2)) for b0 in range(0, len(t), BLOCK))
costs.append((n / dur * 3600 / 2**20, 't_ns (delta of delta)'))
for v, h in sorted(costs, reverse=True)[:8]: print(f"   {v:5.2f} MiB/h {h}")
