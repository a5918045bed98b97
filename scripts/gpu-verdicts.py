#!/usr/bin/env python3
"""Default-configuration verdicts by fault kind, from gpu-check logs (issue 21, goal 5: how often
each kind of fault is still `exact` by default).

Usage: scripts/gpu-verdicts.py GPU-CHECK-LOG...   (gpu-check.sh's gpu-check.log, one per lane)

Each case of a log is a `PASS|FAIL|SKIP NAME` line followed by the report's `error: CODE-NAME`
and `culprit: [VERDICT] ...` lines. A case is counted by the error it reported:
`CUDA_ERROR_ASSERT` (device-side asserts), `CUDA_ERROR_ILLEGAL_ADDRESS`, anything else; cases
whose name holds `every` ran with `CUDABLAME_MARKERS=every` and are counted apart. Prints one line
per kind: `KIND: E of N exact`.
"""
import re
import sys


def verdicts(paths):
    """(case, error, exact) for every case with a culprit line, in log order."""
    rows = []
    for path in paths:
        name = err = None
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"(PASS|FAIL|SKIP) (\S+)", line)
                if m:
                    name, err = m.group(2), None
                    continue
                m = re.match(r"\s+error: (\S+)", line)
                if m and name:
                    err = m.group(1)
                    continue
                m = re.match(r"\s+culprit: \[(.*?)\]", line)
                if m and name:
                    rows.append((name, err or "", "exact" in m.group(1)))
                    name = None
    return rows


def kind(name, err):
    if "every" in name:
        return "every (CUDABLAME_MARKERS=every)"
    if "ASSERT" in err:
        return "device-side assert"
    if "ILLEGAL_ADDRESS" in err:
        return "illegal address"
    return "other fault"


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    tally = {}
    for name, err, exact in verdicts(sys.argv[1:]):
        e, n = tally.get(kind(name, err), (0, 0))
        tally[kind(name, err)] = (e + exact, n + 1)
    for k in ["device-side assert", "illegal address", "other fault", "every (CUDABLAME_MARKERS=every)"]:
        if k in tally:
            print(f"{k}: {tally[k][0]} of {tally[k][1]} exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
