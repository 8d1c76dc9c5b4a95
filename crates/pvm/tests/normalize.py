"""Normalises a PVM program's output so gridwire's and Debian's PVM runs
compare: task ids (hex `t40002` or decimal 262146) become T0, T1, ... in
numeric order, the host name becomes HOST, times (numbers followed by a
time unit or in a `time` field) are masked, and lines are sorted (tasks
print in whatever order they run)."""
import re
import socket
import sys

LO, HI = 0x40000, 0x80000
text = open(sys.argv[1], errors="replace").read()
# Message contexts (numbered from 0x40001 by both) are not task ids.
ctxs = sorted({int(m.group(1)) for m in re.finditer(r"context (\d+)", text)})
text = re.sub(r"context (\d+)", lambda m: f"context C{ctxs.index(int(m.group(1)))}", text)
tids = set()
for m in re.finditer(r"\bt([0-9a-f]{5})\b", text):
    tids.add(int(m.group(1), 16))
for m in re.finditer(r"\b(\d{6})\b", text):
    n = int(m.group(1))
    if LO <= n < HI:
        tids.add(n)
names = {t: f"T{i}" for i, t in enumerate(sorted(tids))}
text = re.sub(r"\bt([0-9a-f]{5})\b", lambda m: names.get(int(m.group(1), 16), m.group(0)), text)
text = re.sub(r"\b(\d{6})\b", lambda m: names.get(int(m.group(1)), m.group(0)), text)
text = text.replace(socket.gethostname(), "HOST")
text = re.sub(r"\d+(\.\d+)?\s*(usec|us|msec|ms|sec|s)\b", "TIME", text)
lines = sorted(line.rstrip() for line in text.splitlines() if line.strip())
print("\n".join(lines))
