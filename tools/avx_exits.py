#!/usr/bin/env python3
"""avx_exits.py BINARY... - fails when a function of BINARY that uses the
upper halves of the vector registers (ymm/zmm) leaves them dirty on its way
into other code: a tail call (jmp to another function) or a call reached
from its last ymm/zmm instruction without a vzeroupper between them.

Why: with the upper halves dirty, every SSE instruction after it pays for
them (on the EPYC VM, tunebench's SSE loops ran about twice as slow after a
bf16 cast: the optimizer's passes on ResNet-50's weights 17 -> 30 ms).
GCC 12 puts a vzeroupper before a function's returns and calls, but not
before a tail call it makes out of target("avx512f") code (cast.c's
bf16_avx512 into bf16_generic). Calls to functions that are themselves
AVX code (the same target) are fine and skipped: their names are listed
as wide too.

Needs objdump (binutils). Exit 0: clean; 1: the offenders listed.
"""
import re
import subprocess
import sys

FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")
WIDE = re.compile(r"%[yz]mm")
TARGET = re.compile(r"<([^>+]+)>$")  # a whole function, no +offset


def functions(binary):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], check=True,
                         capture_output=True, text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
        elif cur is not None and "\t" in line:
            funcs[cur].append(line.split("\t", 1)[1].strip())
    return funcs


def offenders(funcs):
    wide = {f for f, ins in funcs.items() if any(WIDE.search(i) for i in ins)}
    bad = []
    for f in sorted(wide):
        ins = funcs[f]
        for k, i in enumerate(ins):
            op = i.split()[0] if i else ""
            if op not in ("jmp", "call"):
                continue
            m = TARGET.search(i)
            if not m or m.group(1) == f or m.group(1).split("@")[0] in wide:
                continue
            # back through the code before it, to a vzeroupper (clean) or a
            # ymm/zmm instruction (dirty); an unconditional jump or a return
            # ends the straight line the exit is reached by
            for j in range(k - 1, -1, -1):
                p = ins[j]
                if p.startswith("vzeroupper"):
                    break
                if WIDE.search(p):
                    bad.append(f"{f}: {i} (after {p})")
                    break
                if p.startswith(("ret", "jmp ")):
                    break
    return bad


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bad = []
    for b in sys.argv[1:]:
        bad += [f"{b}: {x}" for x in offenders(functions(b))]
    for x in bad:
        print("dirty upper state on exit:", x)
    print(f"avx_exits: {len(bad)} exit(s) without vzeroupper")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
