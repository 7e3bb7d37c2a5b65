#!/usr/bin/env python3
"""The kernels of an Nsight Compute raw CSV page, summed by name, most time first.

usage: kernel_summary.py NCU.csv [TOP]

NCU.csv is `ncu --csv --page raw --print-units base --metrics gpu__time_duration.sum,
dram__bytes_read.sum,dram__bytes_write.sum --log-file NCU.csv PROGRAM`: a header row, a row of
units, then one row per kernel launch (ncu's own "==PROF==" lines and the program's output are
skipped). Prints a table of the TOP (default 20) kernel names by total duration: launches,
total ms, mean µs, DRAM GB moved and GB/s, the rest summed; then "top: NAME TOTAL ms (SHARE%)"
for the first two, which gpu-check's note reads. Exits 1 when the file holds no launch.
"""
import collections
import csv
import sys

NAME = "Kernel Name"
TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def launches(path):
    """(name, ns, bytes) of every launch row of the CSV page."""
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    rows = list(csv.reader(lines))
    header = next((r for r in rows if NAME in r and TIME in r), None)
    if header is None:
        return []
    at = {k: header.index(k) for k in (NAME, TIME, READ, WRITE) if k in header}
    out = []
    for r in rows:
        if len(r) != len(header) or r is header:
            continue
        ns = number(r[at[TIME]])
        if ns is None:
            continue  # the units row
        moved = sum(number(r[at[k]]) or 0.0 for k in (READ, WRITE) if k in at)
        out.append((r[at[NAME]], ns, moved))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    rows = launches(sys.argv[1])
    if not rows:
        print(f"no kernel launch in {sys.argv[1]}")
        return 1
    by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for name, ns, moved in rows:
        entry = by_name[name]
        entry[0] += 1
        entry[1] += ns
        entry[2] += moved
    total = sum(v[1] for v in by_name.values())
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    print(f"{len(rows)} launches of {len(by_name)} kernels, {total / 1e6:.2f} ms in all")
    print(f"{'launches':>8} {'total ms':>9} {'mean us':>9} {'GB':>8} {'GB/s':>8}  kernel")
    for name, (count, ns, moved) in ranked[:top]:
        print(f"{count:8d} {ns / 1e6:9.3f} {ns / count / 1e3:9.2f} {moved / 1e9:8.3f} "
              f"{moved / ns if ns else 0.0:8.1f}  {name[:100]}")
    rest = ranked[top:]
    if rest:
        print(f"{sum(v[0] for _, v in rest):8d} {sum(v[1] for _, v in rest) / 1e6:9.3f} "
              f"{'':9} {'':8} {'':8}  {len(rest)} other kernels")
    for name, (_, ns, _) in ranked[:2]:
        print(f"top: {name[:60]} {ns / 1e6:.2f} ms ({100 * ns / total:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
