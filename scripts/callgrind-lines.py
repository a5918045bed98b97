#!/usr/bin/env python3
"""The hook's code per launch: distinct 64-byte code lines and instructions of one library, from
a callgrind run with --dump-instr=yes (the method of the README's sixteenth-session table).

Usage: scripts/callgrind-lines.py CALLGRIND.out OBJECT LAUNCHES [MINFRAC]
  OBJECT    a substring of the library's path (libcudablame)
  LAUNCHES  the launches of the run (py_bench.py D N inline c: N + 11,000)
  MINFRAC   an instruction counts as the launch path's when it ran at least MINFRAC * LAUNCHES
            times (0.5)
Prints the hot instructions, the instructions executed per launch and the distinct code lines
they lie on, then the same per function (inlined code counts as its caller's). A run, from the
repository root with the simulated driver as libcuda.so.1 in /tmp/sim (README):
  CUDABLAME_MARKER_GAP_US=1000000 LD_LIBRARY_PATH=/tmp/sim LD_PRELOAD=$PWD/target/release/libcudablame.so \\
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=/tmp/cg.out \\
    $(python3 -c 'import sys; print(sys.executable)') shim-tests/programs/py_bench.py 6 20000 inline c
  scripts/callgrind-lines.py /tmp/cg.out libcudablame 31000
(the marker gap that long keeps the policy's decisions independent of valgrind's slow clock;
under valgrind the clock's slow path, `clock::slow_now_ns`, runs at most launches: leave it out.)
"""
import collections
import re
import sys


def load(path, objsub):
    """Self instructions per code address of the objects whose name holds `objsub`, and the
    function each address belongs to (callgrind's compressed names and subpositions)."""
    names = {"ob": {}, "fn": {}}
    ob = fn = None
    last = 0
    ir, fn_of = collections.Counter(), {}
    skip_next = False

    def resolve(kind, s):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", s)
        if not m:
            return s
        if m.group(2):
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), s)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("ob="):
                ob = resolve("ob", line[3:])
            elif line.startswith("fn="):
                fn = resolve("fn", line[3:])
            elif line.startswith("cob="):
                resolve("ob", line[4:])
            elif line.startswith("cfn="):
                resolve("fn", line[4:])
            elif line.startswith("calls="):
                skip_next = True  # the next line is the call's inclusive cost
            elif line[0] in "0123456789+-*":
                parts = line.split()
                tok = parts[0]
                if tok == "*":
                    a = last
                elif tok[0] in "+-":
                    a = last + int(tok, 0)
                else:
                    a = int(tok, 0)
                last = a
                if skip_next:
                    skip_next = False
                    continue
                if ob and objsub in ob and len(parts) >= 3:
                    ir[a] += int(parts[2])
                    fn_of[a] = fn
    return ir, fn_of


def main():
    path, objsub, launches = sys.argv[1], sys.argv[2], float(sys.argv[3])
    minfrac = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    ir, fn_of = load(path, objsub)
    hot = {a: n for a, n in ir.items() if n >= minfrac * launches}
    print(f"hot instructions {len(hot)}, executed per launch {sum(hot.values()) / launches:.0f}, "
          f"code lines {len({a >> 6 for a in hot})}")
    per = collections.defaultdict(lambda: [0, 0.0, set()])
    for a, n in hot.items():
        p = per[fn_of[a]]
        p[0] += 1
        p[1] += n / launches
        p[2].add(a >> 6)
    for fn, (k, n, lines) in sorted(per.items(), key=lambda x: -len(x[1][2])):
        print(f"{len(lines):4d} lines {k:5d} instructions {n:7.0f} per launch  {(fn or '?')[:100]}")


if __name__ == "__main__":
    main()
