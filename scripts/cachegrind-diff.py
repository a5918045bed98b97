#!/usr/bin/env python3
"""Per-function cost of the hook from two cachegrind runs of one benchmark, without and with the
library: each function's event totals in the second minus the first, divided by the ops.

Usage: scripts/cachegrind-diff.py WITHOUT.out WITH.out OPS [SORT_EVENT [ROWS]]
  SORT_EVENT  one of Ir I1mr D1mr D1mw DLmr DLmw ILmr (default DLmr); ROWS (default 40).
The first row is the total. With `--LL=2097152,16,64` the "L" events stand for the H200 host's
L2: ILmr the code lines, DLmr and DLmw the data lines, that one launch missed (docs/history.md,
Performance, thirteenth session, for the command lines: `py_bench.py ... inline c` with
BENCH_POLLUTE_KB=3072 BENCH_POLLUTE_CODE=1; 24,000 ops for `6 13000`).
Pages instead of lines (docs/history.md, Performance, nineteenth session): caches shaped as TLBs,
`--I1=262144,64,4096 --D1=262144,64,4096 --LL=8388608,16,4096` (4 KiB "lines", the last level
2,048 pages), with BENCH_POLLUTE_PAGES=4096 (`py_bench.py 6 3000 inline c`: 14,000 ops): then
ILmr and DLmr + DLmw are the code and data pages one launch missed.
"""
import collections
import sys

COLUMNS = ["Ir", "I1mr", "D1mr", "D1mw", "DLmr", "DLmw", "ILmr"]


def load(path):
    """Event names and per-function totals of one cachegrind output file."""
    events, totals, fn = None, collections.defaultdict(collections.Counter), None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line[:1].isdigit() and events:
                values = line.split()[1:]
                for name, v in zip(events, values):
                    totals[fn][name] += int(v)
    return totals


def main():
    without, with_, ops = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    sort = sys.argv[4] if len(sys.argv) > 4 else "DLmr"
    rows = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    diffs = []
    for fn in set(without) | set(with_):
        d = [(with_[fn][c] - without[fn][c]) / ops for c in COLUMNS]
        diffs.append((d, fn))
    diffs.sort(key=lambda r: -abs(r[0][COLUMNS.index(sort)]))
    print(" ".join(f"{c:>7}" for c in COLUMNS))
    total = [sum(d[i] for d, _ in diffs) for i in range(len(COLUMNS))]
    print(" ".join(f"{v:7.1f}" for v in total), "TOTAL")
    for d, fn in diffs[:rows]:
        print(" ".join(f"{v:7.1f}" for v in d), (fn or "?")[:110])


if __name__ == "__main__":
    main()
