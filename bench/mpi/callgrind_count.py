#!/usr/bin/env python3
"""Totals of a callgrind profile for bench/rate-instr.sh.

    callgrind_count.py FILE [FUNCTION ...]

Prints "total IR", "locked IR" (instructions executed that carry a lock
prefix or are an exchange with memory, i.e. the atomic read-modify-writes)
and, for each FUNCTION named, "fn NAME IR" with its inclusive count (NAME, else
PMPI_NAME when NAME is not in the profile).

The profile must have been made with `--dump-instr=yes --dump-line=no`, so
that costs are per instruction address (object-relative, as objdump prints
them). Locked instructions are found by disassembling each object with
objdump.
"""
import re
import subprocess
import sys
from collections import defaultdict


def parse(path):
    names = {"ob": {}, "fn": {}, "cob": {}, "cfn": {}}
    # cob/cfn share the id spaces of ob/fn
    def name(kind, rest):
        space = {"cob": "ob", "cfn": "fn"}.get(kind, kind)
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", rest.strip())
        if not m:
            return rest.strip()
        i, n = m.group(1), m.group(2)
        if n is not None:
            names[space][i] = n
        return names[space].get(i, "?")

    self_cost = defaultdict(int)  # (ob, addr) -> Ir
    fn_incl = defaultdict(int)  # fn name -> inclusive Ir
    total = 0
    ob = fn = None
    last = 0
    call_next = False

    def pos(tok):
        nonlocal last
        if tok == "*":
            return last
        if tok.startswith("+"):
            last = last + int(tok[1:], 0)
        elif tok.startswith("-"):
            last = last - int(tok[1:], 0)
        else:
            last = int(tok, 0)
        return last

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                a = pos(parts[0])
                ir = int(parts[1]) if len(parts) > 1 else 0
                if call_next:
                    fn_incl[fn] += ir
                    call_next = False
                else:
                    self_cost[(ob, a)] += ir
                    fn_incl[fn] += ir
                    total += ir
                continue
            key, _, rest = line.partition("=")
            if key == "ob":
                ob = name("ob", rest)
            elif key == "fn":
                fn = name("fn", rest)
            elif key in ("cob", "cfn"):
                name(key, rest)
            elif key == "calls":
                # the next cost line is the call's inclusive cost; its first
                # token is the call site (a position like any other)
                call_next = True
            elif key in ("fl", "fi", "fe", "cfi", "cfl"):
                pass
    return total, self_cost, fn_incl


LOCKED = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")


def locked_addrs(obj):
    try:
        out = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", obj],
            capture_output=True, text=True, check=False,
        ).stdout
    except OSError:
        return set()
    addrs = set()
    for line in out.splitlines():
        m = LOCKED.match(line)
        if not m:
            continue
        ins = m.group(2).strip()
        if ins.startswith("lock ") or (ins.startswith("xchg") and "(" in ins):
            addrs.add(int(m.group(1), 16))
    return addrs


def main():
    path, fns = sys.argv[1], sys.argv[2:]
    total, self_cost, fn_incl = parse(path)
    locked = 0
    by_ob = defaultdict(list)
    for (ob, a), ir in self_cost.items():
        by_ob[ob].append((a, ir))
    for ob, items in by_ob.items():
        if not ob or not ob.startswith("/"):
            continue
        la = locked_addrs(ob)
        if not la:
            continue
        locked += sum(ir for a, ir in items if a in la)
    print(f"total {total}")
    print(f"locked {locked}")
    for want in fns:
        # MPI_x calls PMPI_x in some libraries (and is PMPI_x in others):
        # the outer name only, else the inner one (never both: the outer
        # includes the inner).
        got = fn_incl.get(want, 0) or fn_incl.get("P" + want, 0)
        print(f"fn {want} {got}")


if __name__ == "__main__":
    main()
