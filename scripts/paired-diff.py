#!/usr/bin/env python3
"""Per-round differences between libraries from scripts/gpu-calls/paired.sh's run files.

Usage: scripts/paired-diff.py SIZES BASE FOLDER [FOLDER ...]
  SIZES   the train_step sizes, comma-separated (paired.sh's SIZES: tiny,gpt)
  BASE    the label every other label is compared with (paired.sh's RUNS: "label|lib|env;...")
  FOLDER  folders of run files `<round>-<label>.txt` (one paired.sh call each; several calls'
          rounds are pooled, a round being one call's round)

paired.sh runs one process per label in each round, side by side in time, so the difference
of two labels' `<size>_paired_pct` within a round cancels the host's drift between rounds,
which between processes on the shared GPU machine is larger than the libraries' difference. For
each other label and size: the median over rounds of (label - BASE) in percentage points, its
95% interval by the sign test (order statistics of the differences; none under 6 rounds), and
in how many rounds the label was lower. Written in the twentieth session (issue 21: the page
work against bc78f16 on the H100, computed by hand there).
"""
import math
import os
import re
import statistics
import sys


def runs(folders, size):
    """{(folder, round): {label: pct}} from every run file that printed `size`."""
    found = {}
    for folder in folders:
        for name in os.listdir(folder):
            m = re.fullmatch(r"(\d+)-(.+)\.txt", name)
            if not m:
                continue
            text = open(os.path.join(folder, name), errors="replace").read()
            pct = re.search(rf"\b{size}_paired_pct=(-?[0-9.]+)", text)
            if pct:
                found.setdefault((folder, int(m[1])), {})[m[2]] = float(pct[1])
    return found


def sign_interval(diffs):
    """The sign test's 95% interval for the median of sorted `diffs`, or None (too few)."""
    n = len(diffs)
    k = 0
    while sum(math.comb(n, i) for i in range(k + 1)) / 2**n <= 0.025:
        k += 1
    return (diffs[k - 1], diffs[n - k]) if k >= 1 else None


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sizes, base, folders = sys.argv[1].split(","), sys.argv[2], sys.argv[3:]
    for size in sizes:
        rounds = runs(folders, size)
        labels = sorted({label for r in rounds.values() for label in r} - {base})
        for label in labels:
            diffs = sorted(r[label] - r[base] for r in rounds.values() if label in r and base in r)
            if not diffs:
                continue
            ci = sign_interval(diffs)
            interval = f"{ci[0]:+.2f} to {ci[1]:+.2f}" if ci else "none (under 6 rounds)"
            lower = sum(d < 0 for d in diffs)
            print(f"{label} - {base} {size}: median {statistics.median(diffs):+.2f} points over "
                  f"{len(diffs)} rounds, 95% interval {interval}, lower in {lower} of {len(diffs)}")


if __name__ == "__main__":
    main()
