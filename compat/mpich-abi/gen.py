#!/usr/bin/env python3
"""Generates the MPICH-ABI shim's tables and wrappers.

    gen.py OUTDIR [--abi-header include/mpi.h] [--mpich-include DIR] [--cc cc]

Writes OUTDIR/gen_consts.h (each constant's MPICH value beside its standard-ABI
value, read by compiling a probe against each header, so nothing is typed in by
hand) and OUTDIR/gen_wrappers.c (a PMPI_x wrapper, with MPI_x as an alias, for
every function of gridwire's include/mpi.h that is not hand-written in shim.c:
arguments converted by their type and name, the call through a pointer found with
dlsym, outputs and the error code converted back). Stops at a function-pointer
parameter or a handle in a form it does not know (such functions are written
by hand in shim.c); an int whose name has no rule passes unchanged.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

KINDS = {
    "MPI_Comm": "K_COMM", "MPI_Group": "K_GROUP", "MPI_Datatype": "K_TYPE", "MPI_Op": "K_OP",
    "MPI_Errhandler": "K_ERRH", "MPI_Request": "K_REQ", "MPI_Info": "K_INFO", "MPI_Win": "K_WIN",
    "MPI_File": "K_FILE", "MPI_Message": "K_MSG", "MPI_Session": "K_SESSION",
}

# Functions written by hand in shim.c (callbacks, attribute values, identities).
HANDWRITTEN = set("""
MPI_Op_create MPI_Op_create_c MPI_Op_free
MPI_Comm_create_keyval MPI_Type_create_keyval MPI_Win_create_keyval
MPI_Comm_create_errhandler MPI_Win_create_errhandler MPI_File_create_errhandler MPI_Session_create_errhandler
MPI_Grequest_start MPI_Register_datarep MPI_Register_datarep_c
MPI_Comm_get_attr MPI_Type_get_attr MPI_Win_get_attr
MPI_Pcontrol MPI_Status_c2f MPI_Status_f2c
MPI_Get_version MPI_Comm_idup MPI_Comm_idup_with_info MPI_Error_class MPI_Error_string
MPI_Buffer_attach MPI_Buffer_attach_c MPI_Buffer_detach MPI_Buffer_detach_c
MPI_Comm_attach_buffer MPI_Comm_attach_buffer_c MPI_Comm_detach_buffer MPI_Comm_detach_buffer_c
MPI_Session_attach_buffer MPI_Session_attach_buffer_c MPI_Session_detach_buffer MPI_Session_detach_buffer_c
MPI_Get_processor_name MPI_Info_get_nthkey MPI_Type_get_contents MPI_Type_get_contents_c
MPI_Keyval_create MPI_Attr_get MPI_Errhandler_create MPI_Type_extent MPI_Type_lb MPI_Type_ub
""".split())
# MPI-1 names gridwire leaves unimplemented, called as their successors (same arguments).
RENAMED = {
    "MPI_Errhandler_get": "MPI_Comm_get_errhandler", "MPI_Errhandler_set": "MPI_Comm_set_errhandler",
    "MPI_Address": "MPI_Get_address", "MPI_Type_hindexed": "MPI_Type_create_hindexed",
    "MPI_Type_hvector": "MPI_Type_create_hvector", "MPI_Type_struct": "MPI_Type_create_struct",
}
# Left out: not in MPICH's ABI, or not translatable.
SKIPPED_PREFIXES = ("MPI_T_", "MPI_Abi_")
SKIPPED = set("""
MPI_Status_f082c MPI_Status_c2f08 MPI_Status_f082f MPI_Status_f2f08
""".split())
for k in KINDS:
    base = "Type" if k == "MPI_Datatype" else k[4:]
    for suf in ("toint", "fromint", "c2f", "f2c"):
        HANDWRITTEN.add(f"MPI_{base}_{suf}")


def abi_protos(path):
    out = {}
    for m in re.finditer(r"^(\w[\w ]*?\*?)\s*\b(MPI_[A-Za-z0-9_]+)\((.*?)\);", open(path).read(), flags=re.M):
        ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
        out[name] = (ret, [a.strip() for a in args.split(",")] if args not in ("", "void") else [])
    return out


def abi_defines(path):
    """name -> (kind or None, value text) for every #define MPI_x of the ABI header."""
    out = {}
    for m in re.finditer(r"^#define (MPIX?_\w+) (.*)$", open(path).read(), flags=re.M):
        name, val = m.group(1), m.group(2).strip()
        km = re.match(r"\(\((MPI_\w+)\)\(intptr_t\)(-?\d+)\)$", val)
        if km and km.group(1) in KINDS:
            out[name] = (KINDS[km.group(1)], int(km.group(2)))
            continue
        im = re.match(r"\((-?\d+)\)$", val)
        if im:
            out[name] = (None, int(im.group(1)))
    return out


def probe_mpich(names, incdir, cc):
    """The value of each name in MPICH's mpi.h (names it lacks are left out)."""
    names = list(names)
    with tempfile.TemporaryDirectory() as d:
        for _ in range(4):
            src = os.path.join(d, "p.c")
            with open(src, "w") as f:
                f.write("#include <stdio.h>\n#include <stdint.h>\n#include <mpi.h>\nint main(void) {\n")
                for n in names:
                    f.write(f'    printf("%s %lld\\n", "{n}", (long long)(intptr_t)({n}));\n')
                f.write("    return 0;\n}\n")
            r = subprocess.run([cc, "-w", "-I", incdir, src, "-o", os.path.join(d, "p")],
                               capture_output=True, text=True)
            if r.returncode == 0:
                out = subprocess.run([os.path.join(d, "p")], capture_output=True, text=True, check=True).stdout
                return {l.split()[0]: int(l.split()[1]) for l in out.splitlines()}
            bad = set(re.findall(r"[‘'](MPIX?_\w+)[’'] undeclared", r.stderr))
            if not bad:
                sys.exit("gen.py: the MPICH probe does not compile:\n" + r.stderr[-3000:])
            names = [n for n in names if n not in bad]
    sys.exit("gen.py: the MPICH probe does not converge")


FAMILIES = {
    "rank": ["MPI_ANY_SOURCE", "MPI_PROC_NULL", "MPI_ROOT"],
    "tag": ["MPI_ANY_TAG"],
    "thread": ["MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"],
    "cmp": ["MPI_IDENT", "MPI_CONGRUENT", "MPI_SIMILAR", "MPI_UNEQUAL"],
    "commtype": ["MPI_COMM_TYPE_SHARED", "MPI_COMM_TYPE_HW_GUIDED", "MPI_COMM_TYPE_HW_UNGUIDED",
                 "MPI_COMM_TYPE_RESOURCE_GUIDED"],
    "combiner": "MPI_COMBINER_",
    "typeclass": "MPI_TYPECLASS_",
    "topo": ["MPI_GRAPH", "MPI_CART", "MPI_DIST_GRAPH"],
    "lock": ["MPI_LOCK_EXCLUSIVE", "MPI_LOCK_SHARED"],
    "seek": "MPI_SEEK_",
    "order": "MPI_ORDER_",
    "distrib": "MPI_DISTRIBUTE_",
    "rmamode": ["MPI_MODE_NOCHECK", "MPI_MODE_NOPRECEDE", "MPI_MODE_NOPUT", "MPI_MODE_NOSTORE", "MPI_MODE_NOSUCCEED"],
    "filemode": ["MPI_MODE_APPEND", "MPI_MODE_CREATE", "MPI_MODE_DELETE_ON_CLOSE", "MPI_MODE_EXCL",
                 "MPI_MODE_RDONLY", "MPI_MODE_RDWR", "MPI_MODE_SEQUENTIAL", "MPI_MODE_UNIQUE_OPEN",
                 "MPI_MODE_WRONLY"],
    "keyval": ["MPI_KEYVAL_INVALID", "MPI_TAG_UB", "MPI_IO", "MPI_HOST", "MPI_WTIME_IS_GLOBAL", "MPI_APPNUM",
               "MPI_LASTUSEDCODE", "MPI_UNIVERSE_SIZE", "MPI_WIN_BASE", "MPI_WIN_DISP_UNIT", "MPI_WIN_SIZE",
               "MPI_WIN_CREATE_FLAVOR", "MPI_WIN_MODEL"],
    "flavor": "MPI_WIN_FLAVOR_",
    "model": ["MPI_WIN_UNIFIED", "MPI_WIN_SEPARATE"],
    "err": None,  # MPI_SUCCESS, MPI_ERR_*, MPI_T_ERR_* (below)
}


# MPICH handles without a standard-ABI name of their own, and the ABI handle
# that behaves the same (moved as is; gridwire computes on neither).
ALIASES = {"MPIX_C_FLOAT16": "MPI_REAL2"}


def gen_consts(abi_h, incdir, cc):
    defs = abi_defines(abi_h)
    mp = probe_mpich(sorted(defs) + sorted(ALIASES), incdir, cc)
    for mname, aname in ALIASES.items():
        if mname in mp and aname in defs and mname not in defs:
            defs[mname] = defs[aname]
    lines = ["/* GENERATED by compat/mpich-abi/gen.py from include/mpi.h and MPICH's mpi.h; do not edit. */",
             "#include \"shim.h\"", ""]
    # Handles: one table of (MPICH, ABI) pairs for all kinds (ABI values are unique across kinds).
    lines.append("struct hpair { int kind; int m; int a; const char *name; };")
    lines.append("static const struct hpair HANDLES[] = {")
    seen = set()
    for n, (kind, v) in sorted(defs.items(), key=lambda x: (x[1][1] if x[1][0] else 0, x[0])):
        if kind and n in mp and (kind, mp[n]) not in seen:
            seen.add((kind, mp[n]))
            lines.append(f"    {{{kind}, {mp[n]}, {v}, \"{n}\"}},")
    lines.append("};")
    lines.append("#define N_HANDLES (sizeof HANDLES / sizeof HANDLES[0])")
    fams = {}
    for fam, spec in FAMILIES.items():
        if fam == "err":
            names = [n for n in defs if n == "MPI_SUCCESS" or
                     (re.match(r"MPI_(T_)?ERR_", n) and n != "MPI_ERR_LASTCODE")]
        elif isinstance(spec, str):
            names = [n for n in defs if n.startswith(spec)]
        else:
            names = spec
        pairs = [(n, mp[n], defs[n][1]) for n in names if n in mp and n in defs and defs[n][0] is None]
        fams[fam] = pairs
        lines.append(f"static const struct ipair MAP_{fam}[] = {{")
        for n, m, a in pairs:
            lines.append(f"    {{{m}, {a}}}, /* {n} */")
        if not pairs:
            lines.append("    {0, 0},")
        lines.append("};")
        lines.append(f"#define N_{fam} {len(pairs) if pairs else 0}")
    for n in ("MPI_UNDEFINED", "MPI_ERR_OTHER", "MPI_ERR_UNSUPPORTED_OPERATION", "MPI_ERR_ARG", "MPI_ERR_INTERN",
              "MPI_ERR_NO_MEM", "MPI_ERR_OP", "MPI_ERR_KEYVAL", "MPI_ERR_COMM", "MPI_ERR_LASTCODE",
              "MPI_TAG_UB", "MPI_HOST", "MPI_IO", "MPI_LASTUSEDCODE", "MPI_WIN_CREATE_FLAVOR", "MPI_WIN_MODEL",
              "MPI_COMM_NULL", "MPI_DATATYPE_NULL", "MPI_REQUEST_NULL", "MPI_OP_NULL", "MPI_ERRHANDLER_NULL",
              "MPI_SUCCESS", "MPI_KEYVAL_INVALID", "MPI_VERSION", "MPI_SUBVERSION", "MPI_BSEND_OVERHEAD",
              "MPI_MAX_PROCESSOR_NAME", "MPI_MAX_INFO_KEY", "MPI_COMBINER_SUBARRAY", "MPI_COMBINER_DARRAY"):
        if n in mp:
            lines.append(f"#define M{n[3:]} ({mp[n]})")
        if n in defs:
            lines.append(f"#define A{n[3:]} ((int)({defs[n][1]}))" if defs[n][0] is None
                         else f"#define A{n[3:]} ((ah)(intptr_t){defs[n][1]})")
    return "\n".join(lines) + "\n", mp, defs


# ---- wrappers ----

INOUT_HANDLE_FUNCS = re.compile(r"^MPI_(\w+_free|Type_commit|Wait|Test|Start|Cancel|Comm_disconnect|File_close|Mrecv|Mrecv_c|"
                                r"Imrecv|Imrecv_c|Session_finalize|Request_get_status)$")
RANK_IN = {"source", "dest", "root", "target_rank", "rank"}
RANK_IN_FUNCS_WITH_RANK = re.compile(r"^MPI_Win_(lock|unlock|flush|flush_local|shared_query|shared_query_c)$")
TAG_IN = {"tag", "sendtag", "recvtag"}
KEYVAL = {"comm_keyval", "type_keyval", "win_keyval", "keyval"}


def split_param(p):
    m = re.match(r"(.*?)(\w+)((?:\[\])*)((?:\[\d+\])*)$", p)
    if not m:
        raise ValueError(p)
    t = m.group(1).strip()
    return t, m.group(2), m.group(3), m.group(4)


class Fn:
    def __init__(self, name, ret, params):
        self.name, self.ret, self.params = name, ret, params
        self.mdecl = []   # MPICH-side parameter declarations
        self.pre = []     # statements before the call
        self.args = []    # ABI call arguments
        self.post = []    # statements after the call
        self.cleanup = []
        self.adecl = []   # ABI-side parameter types for the function pointer


def mtype(t):
    """The MPICH-side C type for an ABI-side type text (handles become int)."""
    base = t.replace("const ", "").replace("*", "").strip()
    const = "const " if t.startswith("const") else ""
    stars = t.count("*")
    if base in KINDS:
        return const + "int" + " " + "*" * stars if stars else const + "int"
    if base == "MPI_Status":
        return const + "mstatus " + "*" * stars
    return None


def ctype_abi(t):
    base = t.replace("const ", "").replace("*", "").strip()
    stars = t.count("*")
    const = "const " if t.startswith("const") else ""
    rep = {"MPI_Aint": "intptr_t", "MPI_Count": "int64_t", "MPI_Offset": "int64_t", "MPI_Fint": "int",
           "MPI_Status": "astatus", "MPI_F08_status": "astatus"}
    if base in KINDS:
        base = "ah"
    base = rep.get(base, base)
    return (const + base + (" " + "*" * stars if stars else "")).strip()


def ctype_mpich(t):
    base = t.replace("const ", "").replace("*", "").strip()
    stars = t.count("*")
    const = "const " if t.startswith("const") else ""
    rep = {"MPI_Aint": "intptr_t", "MPI_Count": "int64_t", "MPI_Offset": "int64_t", "MPI_Fint": "int",
           "MPI_Status": "mstatus"}
    if base in KINDS:
        base = "int"
    base = rep.get(base, base)
    return (const + base + (" " + "*" * stars if stars else "")).strip()


def array_len(fn, pname):
    names = [split_param(p)[1] for p in fn.params]
    f = fn.name
    if pname in ("sendtypes", "recvtypes"):
        return None  # handled specially
    for cand in ("count", "incount", "n"):
        if cand in names:
            return cand
    if pname == "array_of_datatypes":
        return "max_datatypes"
    if pname == "array_of_types":
        return "count"
    raise SystemExit(f"gen.py: no length for {f}.{pname}")


def classify(fn):
    f = fn.name
    names = [split_param(p)[1] for p in fn.params]
    base_f = re.sub(r"_c$", "", f)
    for i, p in enumerate(fn.params):
        if p == "...":
            raise SystemExit(f"gen.py: varargs in {f}")
        t, n, arr, dims = split_param(p)
        if dims:
            # int ranges[][3]: plain ints.
            fn.mdecl.append(f"int {n}[]{dims}")
            fn.adecl.append(f"int (*)[3]")
            fn.args.append(n)
            continue
        base = t.replace("const ", "").replace("*", "").strip()
        stars = t.count("*")
        const = t.startswith("const")
        a = f"a_{n}"
        if base.endswith("_function") or base.endswith("_function_c") or base.endswith("_fn"):
            raise SystemExit(f"gen.py: function pointer {f}.{n} must be hand-written")
        if base in KINDS:
            kind = KINDS[base]
            if stars == 0 and not arr:
                fn.mdecl.append(f"int {n}")
                fn.adecl.append("ah")
                fn.pre.append(f"ah {a} = h2a({kind}, {n});")
                fn.args.append(a)
            elif stars == 1 and not arr:
                fn.mdecl.append(f"int *{n}")
                fn.adecl.append("ah *")
                inout = bool(INOUT_HANDLE_FUNCS.match(f))
                init = f"{n} ? h2a({kind}, *{n}) : 0" if inout else "0"
                fn.pre.append(f"ah {a} = {init};")
                fn.args.append(f"{n} ? &{a} : NULL")
                fn.post.append(f"if ({n} && (rc == 0 || {int(inout)})) *{n} = h2m({kind}, {a});")
            elif arr and stars == 0:
                # Arrays of handles.
                if n in ("sendtypes", "recvtypes"):
                    if "neighbor" in f.lower():  # also MPI_Ineighbor_*
                        ln = "indeg_" if n == "recvtypes" else "outdeg_"
                        if not any("neighbor_counts" in s for s in fn.pre):
                            fn.pre.insert(0, "int indeg_ = 0, outdeg_ = 0; { int e_ = neighbor_counts(comm, &indeg_, &outdeg_); if (e_) return e_; }")
                    else:
                        ln = "peers_"
                        if not any("peer_count" in s for s in fn.pre):
                            fn.pre.insert(0, "int peers_ = 0; { int e_ = peer_count(comm, &peers_); if (e_) return e_; }")
                    skip = " && sendbuf != M_IN_PLACE" if n == "sendtypes" else ""
                    cnt = f"({n}{skip} ? {ln} : 0)"
                else:
                    ln = array_len(fn, n)
                    cnt = f"({ln} > 0 ? {ln} : 0)"
                fn.mdecl.append(f"{'const ' if const else ''}int {n}[]")
                fn.adecl.append("const ah *" if const else "ah *")
                fn.pre.append(f"int cnt_{n} = {cnt}; ah sb_{n}[16]; ah *{a} = {n} && cnt_{n} ? scratch(sizeof(ah) * cnt_{n}, sb_{n}, sizeof sb_{n}) : NULL;")
                fn.pre.append(f"if (cnt_{n} && {n} && !{a}) return M_ERR_NO_MEM;")
                inout = (not const) and f != "MPI_Type_get_contents" and not f.startswith("MPI_Type_get_contents")
                if const or inout:
                    fn.pre.append(f"for (int i_ = 0; {a} && i_ < cnt_{n}; i_++) {a}[i_] = h2a({kind}, {n}[i_]);")
                fn.args.append(f"{n} && cnt_{n} ? {a} : ({'const ah *' if const else 'ah *'}){n}")
                if not const:
                    fn.post.append(f"for (int i_ = 0; {a} && i_ < cnt_{n}; i_++) {n}[i_] = h2m({kind}, {a}[i_]);")
                fn.cleanup.append(f"if ({a}) scratch_free({a}, sb_{n});")
            else:
                raise SystemExit(f"gen.py: cannot convert {f}.{p}")
            continue
        if base == "MPI_Status":
            if arr:
                ln = "count" if "count" in names else "incount"
                fn.mdecl.append(f"mstatus {n}[]")
                fn.adecl.append("astatus *")
                fn.pre.append(f"int cnt_{n} = {ln} > 0 && {n} && {n} != M_STATUS_IGNORE ? {ln} : 0; astatus sb_{n}[8];")
                fn.pre.append(f"astatus *{a} = cnt_{n} ? scratch(sizeof(astatus) * cnt_{n}, sb_{n}, sizeof sb_{n}) : NULL;")
                fn.pre.append(f"if (cnt_{n} && !{a}) return M_ERR_NO_MEM;")
                if f.startswith("MPI_Request_get_status") or True:
                    fn.pre.append(f"for (int i_ = 0; i_ < cnt_{n}; i_++) st_m2a(&{n}[i_], &{a}[i_]);")
                fn.args.append(a)
                fn.post.append(f"for (int i_ = 0; i_ < cnt_{n}; i_++) st_a2m(&{a}[i_], &{n}[i_]);")
                fn.cleanup.append(f"if ({a}) scratch_free({a}, sb_{n});")
            elif const:
                fn.mdecl.append(f"const mstatus *{n}")
                fn.adecl.append("const astatus *")
                fn.pre.append(f"astatus {a}; if ({n} && {n} != M_STATUS_IGNORE) st_m2a({n}, &{a});")
                fn.args.append(f"{n} && {n} != M_STATUS_IGNORE ? &{a} : NULL")
            else:
                inout = f.startswith("MPI_Status_set")
                fn.mdecl.append(f"mstatus *{n}")
                fn.adecl.append("astatus *")
                fn.pre.append(f"astatus {a}; int use_{n} = {n} && {n} != M_STATUS_IGNORE;")
                # Start from the caller's fields (inputs for MPI_Status_set_*, kept where a call leaves them).
                fn.pre.append(f"if (use_{n}) st_m2a({n}, &{a});")
                fn.args.append(f"use_{n} ? &{a} : NULL")
                fn.post.append(f"if (use_{n}) st_a2m(&{a}, {n});")
            continue
        if base == "MPI_F08_status":
            raise SystemExit(f"gen.py: {f} uses MPI_F08_status")
        # Plain types.
        ct = ctype_abi(t)
        decl = f"{ctype_mpich(t)} {n}{arr}" if arr else f"{ctype_mpich(t)} {n}"
        fn.mdecl.append(decl)
        fn.adecl.append(ct + (" *" if arr else ""))
        # Value maps by parameter name.
        if base == "void" and stars == 1 and n in ("sendbuf", "recvbuf") and not arr:
            fn.args.append(f"buf_m2a({n})")
        elif base == "int" and stars == 0 and not arr:
            m = None
            if n in ("source", "dest", "root", "target_rank") or (n == "rank" and RANK_IN_FUNCS_WITH_RANK.match(f)):
                m = "rank"
            elif n in TAG_IN:
                m = "tag"
            elif n == "required":
                m = "thread"
            elif n == "split_type":
                m = "commtype"
            elif (n in ("errorcode", "errorclass") and f not in ("MPI_Abort",)) or (n == "error" and f.startswith("MPI_Status_set")):
                m = "err"
            elif n in KEYVAL:
                m = "keyval"
            elif n == "order":
                m = "order"
            elif n == "lock_type":
                m = "lock"
            elif n == "whence":
                m = "seek"
            elif n == "typeclass":
                m = "typeclass"
            if n == "assert":
                fn.args.append(f"bits_m2a(MAP_rmamode, N_rmamode, {n})")
            elif n == "amode":
                fn.args.append(f"bits_m2a(MAP_filemode, N_filemode, {n})")
            elif m == "err":
                fn.args.append(f"err_m2a({n})")
            elif m:
                fn.args.append(f"vmap_m2a(MAP_{m}, N_{m}, {n})")
            else:
                fn.args.append(n)
        elif base == "int" and (stars == 1 or arr) and n in ("sourceweights", "destweights", "weights"):
            fn.args.append(f"weights_m2a({n})")
        elif base == "int" and stars == 1 and not arr and not const:
            m = None
            if n in ("rank_source", "rank_dest") or (n == "source" and f.startswith("MPI_Status_get")):
                m = "rank"
            elif n == "tag" and f.startswith("MPI_Status_get"):
                m = "tag"
            elif n == "error" and f.startswith("MPI_Status_get"):
                m = "err"
            elif n == "provided":
                m = "thread"
            elif n == "result":
                m = "cmp"
            elif n in ("errorclass", "errorcode"):
                m = "err"
            elif n in KEYVAL:
                m = "keyval"
            elif n == "combiner":
                m = "combiner"
            elif n == "status" and f == "MPI_Topo_test":
                m = "topo"
            elif n == "amode":
                m = "filemode"
            fn.args.append(n)
            if m == "err":
                fn.post.append(f"if ({n} && rc == 0) *{n} = err_a2m(*{n});")
            elif m == "filemode":
                fn.post.append(f"if ({n} && rc == 0) *{n} = bits_a2m(MAP_filemode, N_filemode, *{n});")
            elif m:
                fn.post.append(f"if ({n} && rc == 0) *{n} = vmap_a2m(MAP_{m}, N_{m}, *{n});")
            if n in KEYVAL and (f.endswith("free_keyval") or f == "MPI_Keyval_free"):
                fn.pre.insert(0, f"if ({n}) *{n} = vmap_m2a(MAP_keyval, N_keyval, *{n});")
        elif base == "int" and arr and n in ("ranks1", "array_of_distribs", "array_of_dargs", "ranks2"):
            mapname = {"ranks1": "rank", "ranks2": "rank", "array_of_distribs": "distrib", "array_of_dargs": "distrib"}[n]
            ln = {"ranks1": "n", "ranks2": "n"}.get(n, "ndims")
            if n == "ranks2":
                fn.args.append(n)
                fn.post.append(f"for (int i_ = 0; rc == 0 && {n} && i_ < {ln}; i_++) {n}[i_] = vmap_a2m(MAP_{mapname}, N_{mapname}, {n}[i_]);")
            else:
                fn.pre.append(f"int sb_{n}[32]; int *{a} = {n} && {ln} > 0 ? scratch(sizeof(int) * {ln}, sb_{n}, sizeof sb_{n}) : NULL;")
                fn.pre.append(f"if ({n} && {ln} > 0 && !{a}) return M_ERR_NO_MEM;")
                fn.pre.append(f"for (int i_ = 0; {a} && i_ < {ln}; i_++) {a}[i_] = vmap_m2a(MAP_{mapname}, N_{mapname}, {n}[i_]);")
                fn.args.append(f"{a} ? {a} : (int *){n}")
                fn.cleanup.append(f"if ({a}) scratch_free({a}, sb_{n});")
        else:
            fn.args.append(n)


def gen_wrapper(fn):
    classify(fn)
    f = fn.name
    pname = "P" + f
    ret = fn.ret
    if ret not in ("int", "double", "MPI_Aint"):
        raise SystemExit(f"gen.py: return type {ret} of {f}")
    cret = {"int": "int", "double": "double", "MPI_Aint": "intptr_t"}[ret]
    out = []
    mdecl = ", ".join(fn.mdecl) if fn.mdecl else "void"
    adecl = ", ".join(fn.adecl) if fn.adecl else "void"
    out.append(f"typedef {cret} (*t_{f})({adecl});")
    out.append(f"EXPORT {cret} {pname}({mdecl})")
    out.append("{")
    out.append(f"    static t_{f} p_;")
    out.append(f"    t_{f} fp_ = __atomic_load_n(&p_, __ATOMIC_ACQUIRE);")
    miss = 'gw_missing("%s")' % f if cret == "int" else "0"
    target = "P" + RENAMED.get(f, f)
    out.append(f"    if (!fp_) {{ fp_ = (t_{f})gw_sym(\"{target}\"); if (!fp_) return {miss}; __atomic_store_n(&p_, fp_, __ATOMIC_RELEASE); }}")
    if cret != "int":
        out.append(f"    return fp_({', '.join(fn.args)});")
        out.append("}")
        out.append(f"EXPORT {cret} {f}({mdecl}) __attribute__((alias(\"{pname}\")));")
        return "\n".join(out)
    for s in fn.pre:
        out.append("    " + s)
    out.append(f"    int rc = fp_({', '.join(fn.args)});")
    if re.match(r"^MPI_(Wait|Test)(all|any|some)?$|^MPI_Request_get_status", f):
        out.append("    idup_poll();")
    for s in fn.post:
        out.append("    " + s)
    for s in fn.cleanup:
        out.append("    " + s)
    out.append("    return err_a2m(rc);")
    out.append("}")
    out.append(f"EXPORT int {f}({mdecl}) __attribute__((alias(\"{pname}\")));")
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    outdir = args[0]
    abi_h = os.path.join(ROOT, "include", "mpi.h")
    incdir = "/usr/include/x86_64-linux-gnu/mpich"
    cc = os.environ.get("CC", "cc")
    i = 1
    while i < len(args):
        if args[i] == "--abi-header":
            abi_h = args[i + 1]; i += 2
        elif args[i] == "--mpich-include":
            incdir = args[i + 1]; i += 2
        elif args[i] == "--cc":
            cc = args[i + 1]; i += 2
        else:
            sys.exit(f"gen.py: unknown argument {args[i]}")
    if not os.path.isfile(os.path.join(incdir, "mpi.h")):
        sys.exit(f"gen.py: MPICH's mpi.h not found in {incdir} (Debian: apt-get install libmpich-dev)")
    os.makedirs(outdir, exist_ok=True)
    consts, mp, defs = gen_consts(abi_h, incdir, cc)
    with open(os.path.join(outdir, "gen_consts.h"), "w") as f:
        f.write(consts)
    protos = abi_protos(abi_h)
    out = ["/* GENERATED by compat/mpich-abi/gen.py from include/mpi.h; do not edit. */",
           "#include <stdlib.h>", "#include \"shim.h\"", "#include \"gen_consts.h\"", ""]
    n = 0
    for name in sorted(protos):
        if name in HANDWRITTEN or name in SKIPPED or name.startswith(SKIPPED_PREFIXES):
            continue
        ret, params = protos[name]
        out.append(gen_wrapper(Fn(name, ret, params)))
        out.append("")
        n += 1
    with open(os.path.join(outdir, "gen_wrappers.c"), "w") as f:
        f.write("\n".join(out))
    print(f"gen.py: {n} generated wrappers, {len(HANDWRITTEN)} hand-written names in shim.c", file=sys.stderr)


if __name__ == "__main__":
    main()
