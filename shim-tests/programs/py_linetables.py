"""Prints line tables of real code objects with the line of every instruction range, for the
unit test of cudablame's PyCode_Addr2Line (src/stack/python.rs, line_tables_match_cpython).

Usage: python3.X py_linetables.py >> src/stack/python_linetables.txt
One record per code object: VERSION NAME CO_FIRSTLINENO LINETABLE_HEX START:END:LINE... (LINE "-"
when the range has no line).
"""
import sys
import types

VERSION = "%d.%d" % sys.version_info[:2]

# Shapes the encoders treat specially: long jumps forward (varints, several 3.10 pairs), jumps
# backward (loops, arguments on earlier lines), long single-line runs, handlers, comprehensions.
SOURCE = (
    "def jumps(x):\n"
    "    a = x + 1\n"
    + "\n" * 300
    + "    b = (a +\n"
    "         x)\n"
    + "\n" * 70
    + "    for i in range(3):\n"
    "        a += i\n"
    "    try:\n"
    "        c = [y * 2 for y in range(a)\n"
    "             if y % 3]\n"
    "    except ValueError as e:\n"
    "        c = str(e)\n"
    "    return f(\n"
    "        a,\n"
    "        b,\n"
    "    ).g(c, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22])\n"
    "\n"
    "class K:\n"
    "    def m(self, x):\n"
    "        while x:\n"
    "            x -= 1\n"
    "        with open('f') as fh:\n"
    "            return fh.read()\n"
)


def code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from code_objects(c)


def emit(code):
    ranges = " ".join(
        "%d:%d:%s" % (s, e, "-" if line is None else line) for s, e, line in code.co_lines() if e > s
    )
    print(VERSION, code.co_name, code.co_firstlineno, code.co_linetable.hex(), ranges)


def main():
    emit_all = list(code_objects(compile(SOURCE, "<crafted>", "exec")))
    import threading

    with open(threading.__file__) as f:
        emit_all += list(code_objects(compile(f.read(), threading.__file__, "exec")))[:40]
    for c in emit_all:
        emit(c)


if __name__ == "__main__":
    main()
