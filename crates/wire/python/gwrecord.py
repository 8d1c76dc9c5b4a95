#!/usr/bin/env python3
"""Independent reader of gridwire record files (standard library + numpy).

It implements the format from its description in docs/wire.md, not from the
Rust code: canonical metadata is parsed and its SHA-256 recomputed to check
the format id, the fixed part of each record is decoded through a numpy
structured dtype built from the field list (byte order, offsets, itemsize),
and variable-length slots are followed into the record's tail.

Usage:
  gwrecord.py dump FILE            print the file as JSON (same structure as `gwrecord dump`)
  gwrecord.py check DIR            for every DIR/NAME.bin, compare with DIR/NAME.json
"""
import hashlib
import json
import struct
import sys
from pathlib import Path

import numpy as np

FILE_MAGIC = b"GWRECF01"
META_MAGIC = b"GWFM\x01"
REC_MAGIC = b"GWR\x01"
MAX_DEPTH = 48


class WireError(Exception):
    pass


class Reader:
    def __init__(self, b, pos=0):
        self.b, self.pos = b, pos

    def take(self, n):
        if self.pos + n > len(self.b):
            raise WireError(f"truncated at {self.pos}")
        s = self.b[self.pos:self.pos + n]
        self.pos += n
        return s

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("<H", self.take(2))[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def name(self):
        return self.take(self.u8()).decode("utf-8")


def parse_type(r, depth):
    if depth > MAX_DEPTH:
        raise WireError("too deep")
    tag = r.u8()
    if tag == 1:
        size, signed = r.u8(), r.u8()
        return ("int", size, bool(signed))
    if tag == 2:
        return ("float", r.u8())
    if tag == 3:
        return ("char",)
    if tag == 4:
        return ("bool",)
    if tag == 5:
        count = r.u32()
        return ("array", parse_type(r, depth + 1), count)
    if tag == 6:
        return ("nested", parse_body(r, depth + 1))
    if tag == 7:
        return ("string",)
    if tag == 8:
        return ("vararray", parse_type(r, depth + 1))
    raise WireError(f"unknown type tag {tag}")


def parse_body(r, depth):
    start = r.pos
    f = {"name": r.name()}
    f["size"], f["align"] = r.u32(), r.u32()
    f["order"] = {0: "little", 1: "big"}[r.u8()]
    f["ptr"] = r.u8()
    f["fields"] = []
    for _ in range(r.u16()):
        name = r.name()
        off = r.u32()
        f["fields"].append((name, off, parse_type(r, depth + 1)))
    # The id of a nested format is the hash of its own standalone metadata.
    f["id"] = format_id(META_MAGIC + r.b[start:r.pos])
    return f


def format_id(meta):
    return hashlib.sha256(meta).digest()[:8].hex()


def parse_meta(b):
    if b[:5] != META_MAGIC:
        raise WireError("bad metadata magic")
    r = Reader(b, 5)
    f = parse_body(r, 0)
    if r.pos != len(b):
        raise WireError("trailing metadata bytes")
    return f


def type_size(t, ptr):
    k = t[0]
    if k in ("int", "float"):
        return t[1]
    if k in ("char", "bool"):
        return 1
    if k == "array":
        return type_size(t[1], ptr) * t[2]
    if k == "nested":
        return t[1]["size"]
    return 2 * ptr


def type_name(t):
    k = t[0]
    if k == "int":
        return ("i" if t[2] else "u") + str(8 * t[1])
    if k == "float":
        return "f" + str(8 * t[1])
    if k in ("char", "bool", "string"):
        return k
    if k == "array":
        return f"{type_name(t[1])}[{t[2]}]"
    if k == "nested":
        return "struct " + t[1]["name"]
    return type_name(t[1]) + "[]"


def dtype_of(t, fmt):
    """numpy dtype of a fixed-size type in format `fmt`'s byte order."""
    e = ">" if fmt["order"] == "big" else "<"
    k = t[0]
    if k == "int":
        return np.dtype(f"{e}{'i' if t[2] else 'u'}{t[1]}")
    if k == "float":
        return np.dtype(f"{e}f{t[1]}")
    if k == "char":
        return np.dtype("S1")
    if k == "bool":
        return np.dtype("u1")
    if k == "array":
        return np.dtype((dtype_of(t[1], fmt), (t[2],)))
    if k == "nested":
        return struct_dtype(t[1])
    # variable slot: [offset, len] as two unsigned words
    return np.dtype((np.dtype(f"{e}u{fmt['ptr']}"), (2,)))


def struct_dtype(fmt):
    return np.dtype({
        "names": [n for n, _, _ in fmt["fields"]],
        "formats": [dtype_of(t, fmt) for _, _, t in fmt["fields"]],
        "offsets": [o for _, o, _ in fmt["fields"]],
        "itemsize": fmt["size"],
    })


def to_py(t, x, fmt, payload):
    k = t[0]
    if k == "int":
        return int(x)
    if k == "float":
        v = float(x)
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if k == "char":
        return bytes(x).decode("utf-8", "replace")
    if k == "bool":
        return int(x) != 0
    if k == "array":
        if t[1][0] == "char":
            raw = b"".join(bytes(c) for c in x)
            return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        return [to_py(t[1], e, fmt, payload) for e in x]
    if k == "nested":
        return struct_to_py(t[1], x, payload)
    off, n = int(x[0]), int(x[1])
    if n == 0:
        return "" if k == "string" else []
    esz = 1 if k == "string" else type_size(t[1], fmt["ptr"])
    fixed = payload_fixed_len[0]
    if off < fixed or off + n * esz > len(payload):
        raise WireError("variable field outside the tail")
    if k == "string":
        return bytes(payload[off:off + n]).decode("utf-8", "replace")
    arr = np.frombuffer(payload, dtype=dtype_of(t[1], fmt), count=n, offset=off)
    return [to_py(t[1], e, fmt, payload) for e in arr]


payload_fixed_len = [0]


def struct_to_py(fmt, rec, payload):
    return {n: to_py(t, rec[n], fmt, payload) for n, _, t in fmt["fields"]}


def format_desc(f):
    fields = []
    for n, o, t in f["fields"]:
        d = {"name": n, "type": type_name(t), "offset": o}
        inner = t
        while inner[0] in ("array", "vararray"):
            inner = inner[1]
        if inner[0] == "nested":
            d["format"] = format_desc(inner[1])
        fields.append(d)
    return {"name": f["name"], "id": f["id"], "size": f["size"], "align": f["align"],
            "byte_order": f["order"], "pointer_size": f["ptr"], "fields": fields}


def dump(b):
    if b[:8] != FILE_MAGIC:
        raise WireError("not a record file")
    pos, formats, records, known = 8, [], [], {}
    while pos < len(b):
        kind, length = struct.unpack_from("<II", b, pos)
        data = b[pos + 8:pos + 8 + length]
        if len(data) != length:
            raise WireError("truncated chunk")
        pos = (pos + 8 + length + 7) // 8 * 8
        if kind == 1:
            f = parse_meta(data)
            if format_id(data) != f["id"]:
                raise WireError("id mismatch")
            known[f["id"]] = f
            formats.append(format_desc(f))
        elif kind == 2:
            if data[:4] != REC_MAGIC:
                raise WireError("bad record magic")
            _flags, fid, fixed, var = struct.unpack_from("<IQII", data, 4)
            fid = f"{fid:016x}"
            f = known[fid]
            if fixed != f["size"] or 24 + fixed + var != len(data):
                raise WireError("record lengths disagree")
            payload = data[24:]
            payload_fixed_len[0] = fixed
            rec = np.frombuffer(payload, dtype=struct_dtype(f), count=1)[0]
            records.append({"format": f["name"], "id": fid, "value": struct_to_py(f, rec, payload)})
        else:
            raise WireError(f"unknown chunk kind {kind}")
    return {"formats": formats, "records": records}


def main(argv):
    if len(argv) == 3 and argv[1] == "dump":
        print(json.dumps(dump(Path(argv[2]).read_bytes()), indent=1, ensure_ascii=False))
        return 0
    if len(argv) == 3 and argv[1] == "check":
        bins = sorted(Path(argv[2]).glob("*.bin"))
        failed = 0
        for p in bins:
            want = json.loads(p.with_suffix(".json").read_text())
            try:
                got = dump(p.read_bytes())
            except Exception as e:  # report and count, do not stop at the first
                got = f"error: {e!r}"
            if got == want:
                print(f"ok   {p.name}")
            else:
                failed += 1
                print(f"FAIL {p.name}\n  want {json.dumps(want)[:400]}\n  got  {json.dumps(got)[:400]}")
        if not bins:
            print("no vectors found")
            return 1
        print(f"pyreader: {len(bins) - failed} passed, {failed} failed")
        return 1 if failed else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
