"""How each C argument of an MPI function becomes a Fortran argument (used by gen_fortran.py).

Every parameter gets a class from its C type and name:
  buf     choice buffer (const void *buf, void *recvbuf, ...)
  int     INTEGER (or LOGICAL, by name) in       intp   INTEGER/LOGICAL out
  intarr  INTEGER array                          intarr3  INTEGER ranges(3,*)
  aint/count/offset          INTEGER(KIND=...) in; ...p out; aintarr array
  h       handle in          hp  handle out (inout for _free, MPI_Wait...)   harr  handle array
  st      MPI_Status out     stin  MPI_Status in     sts  array of statuses
  sin     string in          sout  string out       buflen  MPI_Info_get_string's length
  st08    TYPE(MPI_Status)   fstatus  INTEGER f_status(MPI_STATUS_SIZE)
  attrget an attribute value read    attrin  one stored (also extra_state)
  userfn  a Fortran procedure called back (CALLBACKS: trampolines in gw_fortran.c)
  detach, allocptr  addresses returned (MPI_Buffer_detach, MPI_Alloc_mem)
  drop    argc/argv of MPI_Init, the ... of MPI_Pcontrol: not in Fortran, 0/NULL in C
A function with any other argument has no Fortran binding yet; gen_fortran.py
lists it in skipped.txt with the reason.
"""
import os, re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HANDLE_TYPES = {  # C type -> (f08 type, f2c/c2f function stem)
    "MPI_Comm": ("MPI_Comm", "Comm"), "MPI_Datatype": ("MPI_Datatype", "Type"),
    "MPI_Group": ("MPI_Group", "Group"), "MPI_Op": ("MPI_Op", "Op"),
    "MPI_Request": ("MPI_Request", "Request"), "MPI_Errhandler": ("MPI_Errhandler", "Errhandler"),
    "MPI_Info": ("MPI_Info", "Info"), "MPI_Message": ("MPI_Message", "Message"),
    "MPI_Win": ("MPI_Win", "Win"), "MPI_File": ("MPI_File", "File"),
    "MPI_Session": ("MPI_Session", "Session"),
}
F08_HANDLE_TYPES = [v[0] for v in HANDLE_TYPES.values()]
KINDS = {"MPI_Aint": ("aint", "MPI_ADDRESS_KIND"), "MPI_Count": ("count", "MPI_COUNT_KIND"),
         "MPI_Offset": ("offset", "MPI_OFFSET_KIND")}
BUFFER_NAMES = {"buf", "buffer", "inbuf", "inoutbuf", "outbuf", "recvbuf", "sendbuf", "location",
                "origin_addr", "result_addr", "compare_addr"}
LOGICAL_NAMES = {"flag", "commute", "periods", "reorder", "remain_dims", "high"}
# Handles passed by pointer are read and written by these (the rest only write them).
INOUT_HANDLE_FN = re.compile(r"_free$|_commit$|^MPI_(Wait|Test|Start|Cancel|Mrecv|Imrecv|"
                             r"Comm_disconnect|Request_get_status)$")
# C-only functions: language interoperability and the C side of the ABI.
C_ONLY = re.compile(r"_(c2f|f2c|c2f08|f082c|toint|fromint)$")
# Large-count forms that keep their own name in mpi_f08 (the standard's
# MPI_Op_create_c, MPI_Register_datarep_c: they differ from the base only in
# the interface of a procedure argument).
OWN_NAME = {"MPI_Op_create_c", "MPI_Register_datarep_c"}
# mpif.h and use mpi only: routines the standard removed before mpi_f08 existed.
OLD_ONLY = {"MPI_Keyval_create"}
# MPI-1's predefined attribute callbacks (EXTERNAL in mpif.h and use mpi).
PREDEFINED_OLD_CALLBACKS = ["MPI_NULL_COPY_FN", "MPI_DUP_FN", "MPI_NULL_DELETE_FN"]
# Between the two Fortran status forms: mpi_f08 only (TYPE(MPI_Status) is its type).
F08_ONLY = {"MPI_Status_f082f", "MPI_Status_f2f08"}
# Called after the C function succeeded (libmpifort tells libmpi about Fortran at MPI_Init).
AFTER_CALL = {"MPI_Init": "gw_after_init();", "MPI_Init_thread": "gw_after_init();"}
# Length of a handle array, when it is not the function's count/incount argument.
ARRAY_LEN = {("MPI_Type_get_contents", "array_of_datatypes"): "*max_datatypes",
             ("MPI_Alltoallw", "sendtypes"): "gw_comm_size(c_comm)",
             ("MPI_Alltoallw", "recvtypes"): "gw_comm_size(c_comm)",
             ("MPI_Ialltoallw", "sendtypes"): "gw_comm_size(c_comm)",
             ("MPI_Ialltoallw", "recvtypes"): "gw_comm_size(c_comm)",
             ("MPI_Alltoallw_init", "sendtypes"): "gw_comm_size(c_comm)",
             ("MPI_Alltoallw_init", "recvtypes"): "gw_comm_size(c_comm)"}
# Indices the C function returns 0-based and Fortran expects 1-based (request
# indices: MPI_Graph_create/get/map's `index` is the graph's edge count array,
# the same in both languages, see is_request_index).
INDEX_NAMES = {"indx", "index", "array_of_indices"}


def is_request_index(f, name):
    return name in INDEX_NAMES and not f.name.startswith("MPI_Graph")
# Fortran procedures passed to the C library: C type -> (mpi_f08 abstract interface,
# C type, gw_fortran.c function giving the C trampoline that calls the Fortran one).
CALLBACKS = {
    "MPI_User_function *": ("MPI_User_function", "MPI_User_function", "gw_user_op"),
    "MPI_User_function_c *": ("MPI_User_function_c", "MPI_User_function_c", "gw_user_op_c"),
    # MPI-1's attribute callbacks (MPI_Keyval_create, mpif.h and use mpi only):
    # INTEGER attribute values and extra state.
    "MPI_Copy_function *": (None, "MPI_Copy_function", "gw_old_copy"),
    "MPI_Delete_function *": (None, "MPI_Delete_function", "gw_old_delete"),
    "MPI_Comm_errhandler_function *": ("MPI_Comm_errhandler_function", "MPI_Comm_errhandler_function",
                                       "gw_comm_errhandler"),
    "MPI_Comm_copy_attr_function *": ("MPI_Comm_copy_attr_function", "MPI_Comm_copy_attr_function",
                                      "gw_comm_copy_attr"),
    "MPI_Comm_delete_attr_function *": ("MPI_Comm_delete_attr_function", "MPI_Comm_delete_attr_function",
                                        "gw_comm_delete_attr"),
    "MPI_Type_copy_attr_function *": ("MPI_Type_copy_attr_function", "MPI_Type_copy_attr_function",
                                      "gw_type_copy_attr"),
    "MPI_Type_delete_attr_function *": ("MPI_Type_delete_attr_function", "MPI_Type_delete_attr_function",
                                        "gw_type_delete_attr"),
}
# The standard's predefined callbacks, Fortran procedures of libmpifort (gw_fortran.c):
# name -> mpi_f08 abstract interface.
PREDEFINED_CALLBACKS = {
    "MPI_COMM_NULL_COPY_FN": "MPI_Comm_copy_attr_function", "MPI_COMM_DUP_FN": "MPI_Comm_copy_attr_function",
    "MPI_COMM_NULL_DELETE_FN": "MPI_Comm_delete_attr_function",
    "MPI_TYPE_NULL_COPY_FN": "MPI_Type_copy_attr_function", "MPI_TYPE_DUP_FN": "MPI_Type_copy_attr_function",
    "MPI_TYPE_NULL_DELETE_FN": "MPI_Type_delete_attr_function",
}
STRBUF = 8192  # MPI_MAX_LIBRARY_VERSION_STRING, the longest string any call writes


class Unsupported(Exception):
    pass


class Param:
    def __init__(self, fn, ctype, name, arr):
        self.name, self.ctype, self.arr = name, ctype, arr
        self.const = ctype.startswith("const ")
        base = ctype.replace("const ", "").strip()
        self.logical = name in LOGICAL_NAMES
        self.htype = None
        self.kind = None
        self.intent = "in"
        if base == "void *" and name == "attribute_val" and re.search(r"_get_attr$|^MPI_Attr_get$", fn):
            # The C call stores a void *; Fortran gets the attribute's value (attrget).
            self.cls, self.intent = "attrget", "out"
            self.kind = None if fn == "MPI_Attr_get" else "MPI_ADDRESS_KIND"
        elif base == "void *" and (name == "extra_state" or
                                   (name == "attribute_val" and re.search(r"_set_attr$|^MPI_Attr_put$", fn))):
            # A value C keeps as a void * (attrin): INTEGER(KIND=MPI_ADDRESS_KIND), or
            # INTEGER for the deprecated MPI_Attr_put and MPI_Keyval_create.
            self.cls = "attrin"
            self.kind = None if fn in ("MPI_Attr_put", "MPI_Keyval_create") else "MPI_ADDRESS_KIND"
        elif fn == "MPI_Info_create_env" and name in ("argc", "argv"):
            # Fortran has no argc/argv here: the C call gets 0 and NULL.
            self.cls = "drop"
        elif base == "void *" and name == "baseptr" and fn == "MPI_Alloc_mem":
            # The new memory's address: INTEGER(KIND=MPI_ADDRESS_KIND) (Cray-pointer
            # style) in the old bindings, TYPE(C_PTR) in mpi_f08 (allocptr).
            self.cls, self.intent = "allocptr", "out"
        elif base == "void *" and name == "base" and fn == "MPI_Free_mem":
            self.cls = "buf"
        elif base == "void *" and name == "buffer_addr" and "detach" in fn.lower():
            # MPI_Buffer_detach: the address of the detached buffer (detach).
            self.cls, self.intent = "detach", "out"
        elif base == "void *" and not arr:
            if name not in BUFFER_NAMES:
                raise Unsupported(f"void *{name}")
            self.cls = "buf"
            self.intent = "in" if self.const else "inout"
        elif base == "int" and not arr:
            self.cls = "int"
        elif base == "int *" and not arr:
            if name == "argc":
                self.cls = "drop"
            else:
                self.cls = "intp"
                # MPI_Info_get_string's buflen: C counts the NUL, Fortran does not (buflen).
                self.cls = "buflen" if name == "buflen" else "intp"
                self.intent = "inout" if name == "buflen" else "out"
        elif base == "int" and arr == "[]":
            self.cls = "intarr"
            self.intent = "in" if self.const else "out"
        elif base == "int" and arr == "[][3]":
            self.cls = "intarr3"
        elif base in KINDS and not arr:
            self.cls, self.kind = KINDS[base]
        elif base.endswith("*") and base[:-1].strip() in KINDS and not arr:
            c, self.kind = KINDS[base[:-1].strip()]
            self.cls, self.intent = c + "p", "out"
        elif base in KINDS and arr == "[]":
            self.cls, self.kind = "aintarr", KINDS[base][1]
            self.intent = "in" if self.const else "out"
        elif base in HANDLE_TYPES and not arr:
            self.cls, self.htype = "h", base
        elif base.endswith("*") and base[:-1].strip() in HANDLE_TYPES and not arr:
            self.cls, self.htype = "hp", base[:-1].strip()
            self.intent = "inout" if INOUT_HANDLE_FN.search(fn) else "out"
        elif base in HANDLE_TYPES and arr == "[]":
            self.cls, self.htype = "harr", base
            self.intent = "in" if self.const else ("out" if fn.startswith("MPI_Type_get_contents") else "inout")
        elif base == "MPI_F08_status *" and not arr:
            # TYPE(MPI_Status) is the C status (8 ints): passed through (st08).
            self.cls, self.intent = "st08", "in" if self.const else "out"
        elif base == "MPI_Fint *" and name == "f_status":
            self.cls, self.intent = "fstatus", "in" if self.const else "out"
        elif base == "MPI_Status *" and not arr:
            self.cls = "stin" if self.const else "st"
            self.intent = "in" if self.const else "out"
        elif base == "MPI_Status" and arr == "[]":
            self.cls, self.intent = "sts", "out"
        elif base == "char *" and not arr:
            self.cls = "sin" if self.const else "sout"
            self.intent = "in" if self.const else "out"
        elif base in CALLBACKS and not arr:
            # A Fortran procedure: libmpi calls it through a trampoline (CALLBACKS).
            self.cls, self.callback = "userfn", CALLBACKS[base]
        elif base == "char ***" and name == "argv":
            self.cls = "drop"
        else:
            raise Unsupported(f"{ctype} {name}{arr}")

    def dims(self, flavor):
        if self.cls in ("intarr", "aintarr", "harr", "sts"):
            return "(MPI_STATUS_SIZE,*)" if self.cls == "sts" and flavor == "old" else "(*)"
        if self.cls == "intarr3":
            return "(3,*)"
        if (self.cls in ("st", "stin") and flavor == "old") or self.cls == "fstatus":
            return "(MPI_STATUS_SIZE)"
        if self.cls in ("buf", "detach") and flavor == "old":
            return "(*)"
        return ""

    def intent_attr(self):
        return f", intent({self.intent})"


def ftype(p, flavor):
    """The Fortran type of a parameter in the old (mpif.h, use mpi) or f08 bindings."""
    if p.cls == "buf":
        return "type(*)" if flavor == "old" else "type(*), dimension(..)"
    if p.cls in ("int", "intp", "intarr", "intarr3", "buflen"):
        return "logical" if p.logical else "integer"
    if p.kind:
        return f"integer(kind={p.kind})"
    if p.cls in ("attrget", "attrin"):
        return "integer"
    if p.cls in ("h", "hp", "harr"):
        return "integer" if flavor == "old" else f"type({HANDLE_TYPES[p.htype][0]})"
    if p.cls in ("st", "stin", "sts", "st08"):
        return "integer" if flavor == "old" else "type(MPI_Status)"
    if p.cls == "fstatus":
        return "integer"
    if p.cls in ("sin", "sout"):
        return "character(len=*)"
    if p.cls == "userfn":
        return "external" if flavor == "old" else f"procedure({p.callback[0]})"
    if p.cls == "detach":  # old: a choice buffer, as the standard has it; f08: TYPE(C_PTR)
        return "type(*)" if flavor == "old" else "type(c_ptr)"
    if p.cls == "allocptr":
        return "integer(kind=MPI_ADDRESS_KIND)" if flavor == "old" else "type(c_ptr)"
    raise AssertionError(p.cls)


def f08_bind_c(f):
    """Whether mpi_f08's specific is BIND(C). A Fortran procedure argument cannot be
    (it would have to be BIND(C) itself), so MPI_Op_create_f08 is an ordinary external
    procedure: gfortran calls it mpi_op_create_f08_ and passes the same pointers."""
    return not any(p.cls == "userfn" for p in f.params)


def f08_specific(f):
    """The standard's name of the mpi_f08 specific: MPI_Send_f08, MPI_Send_f08c."""
    return f.base + "_f08c" if f.name.endswith("_c") else f.name + "_f08"


def c_name(f, flavor, pre=""):
    """The C symbol gfortran calls: mpi_send_, MPI_Send_f08, MPI_Send_f08c,
    mpi_op_create_f08_ (not BIND(C)); pre="P" for the profiling names."""
    if flavor == "old":
        return (pre + f.name).lower() + "_"
    if f.f08_only:
        spec = pre + f08_specific(f)
        return spec if f08_bind_c(f) else spec.lower() + "_"
    return pre + f.name + "_f08" if f08_bind_c(f) else (pre + f.name).lower() + "_f08_"


def buffer_async(f):
    """Buffers that stay in use after the call are ASYNCHRONOUS: those of calls that
    return a request, and attached send buffers (MPI_Buffer_attach, MPI_Comm_attach_buffer)."""
    return "attach" in f.name.lower() or any(p.cls == "hp" and p.htype == "MPI_Request" for p in f.params)


class Function:
    def __init__(self, ret, name, args):
        self.ret, self.name = ret, name
        self.f08_only = name in F08_ONLY  # mpi_f08 only: F08_ONLY and large-count (_c) forms
        self.old_only = name in OLD_ONLY
        # Large-count forms are specifics of their base's generic, except where
        # only a procedure argument differs (no generic can tell those apart):
        # the standard gives those a name of their own (MPI_Op_create_c).
        self.base = name[:-2] if name.endswith("_c") and name not in OWN_NAME else name
        self.params = []
        if args.strip() != "void":
            for a in args.split(","):
                a = a.strip()
                if a == "...":
                    continue
                m = re.match(r"(.*?)(\w+)\s*(\[\]\[3\]|\[\])?$", a)
                self.params.append(Param(name, m.group(1).strip(), m.group(2), m.group(3) or ""))
        self.fparams = [p for p in self.params if p.cls != "drop"]
        if ret not in ("int", "double", "MPI_Aint"):
            raise Unsupported(f"returns {ret}")
        names = [p.name for p in self.params]
        for p in self.params:
            if p.cls == "harr" and (self.base, p.name) not in ARRAY_LEN:
                if not ({"count", "incount"} & set(names)):
                    raise Unsupported(f"length of {p.name}")


def stubbed():
    text = open(os.path.join(ROOT, "crates", "capi", "src", "stubs.rs")).read()
    return set(re.findall(r"stub!\(\s*(MPI_\w+)", text))


def load_functions(abi):
    consts = {c["name"] for c in abi["constants"]}
    stubs = stubbed()
    funcs, skipped = [], []
    for line in open(os.path.join(ROOT, "scripts", "mpi_functions.txt")):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"(.*?)\b(MPI_\w+)\((.*)\)$", line)
        ret, name, args = m.group(1).strip(), m.group(2), m.group(3)
        if name in consts:
            continue
        if name.startswith("MPI_T_"):
            skipped.append((name, "the tool interface has no Fortran binding"))
        elif C_ONLY.search(name):
            skipped.append((name, "C-only (language interoperability)"))
        elif name in stubs:
            skipped.append((name, "not implemented by libmpi.so yet (stub)"))
        else:
            try:
                funcs.append(Function(ret, name, args))
            except Unsupported as e:
                skipped.append((name, f"argument not translated yet: {e}"))
    # Large-count variants (MPI_Send_c) are mpi_f08 only: a second specific,
    # MPI_Send_f08c, of the generic MPI_Send, told apart by INTEGER(KIND=MPI_COUNT_KIND).
    bound = {f.name: f for f in funcs}
    kept = []
    for f in funcs:
        if not f.name.endswith("_c"):
            kept.append(f)
            continue
        base = bound.get(f.name[:-2])
        if base is None:
            skipped.append((f.name, f"large-count variant of {f.name[:-2]}, which has no binding"))
        elif _f08_signature(base) == _f08_signature(f):
            skipped.append((f.name, f"its mpi_f08 form cannot be told apart from {base.name}'s "
                                    "(MPI_COUNT_KIND is MPI_ADDRESS_KIND)"))
        else:
            f.f08_only = True
            kept.append(f)
    return kept, skipped


def _f08_signature(f):
    """Types and ranks of the dummies; the three integer kinds are all 8 here."""
    def norm(t):
        return t.replace("MPI_COUNT_KIND", "MPI_ADDRESS_KIND").replace("MPI_OFFSET_KIND", "MPI_ADDRESS_KIND")
    return [(norm(ftype(p, "f08")), p.dims("f08")) for p in f.fparams]


def fortran_constants(abi):
    """(name, kind, value) integer constants and (name, f08 type, value) handle constants."""
    out = [("MPI_ADDRESS_KIND", "int", 8), ("MPI_OFFSET_KIND", "int", 8), ("MPI_COUNT_KIND", "int", 8),
           ("MPI_INTEGER_KIND", "int", 4), ("MPI_STATUS_SIZE", "int", 8),
           ("MPI_SOURCE", "int", 1), ("MPI_TAG", "int", 2), ("MPI_ERROR", "int", 3),
           ("MPI_SUBARRAYS_SUPPORTED", "logical", ".false."),
           ("MPI_ASYNC_PROTECTS_NONBLOCKING", "logical", ".false.")]
    handles = []
    seen = {n.lower() for n, _, _ in out}
    byname = {c["name"]: c for c in abi["constants"]}
    for c in abi["constants"]:
        n, k = c["name"], c["kind"]
        if k == "alias":
            c = dict(byname[c["of"]], name=n)
            k = c["kind"]
        if n.lower() in seen or n.startswith("MPI_T_"):
            continue
        seen.add(n.lower())
        if k == "integer":
            out.append((n, "int", c["value"]))
        elif k == "handle" and c["c_type"] in HANDLE_TYPES:
            out.append((n, "hint", c["value"]))
            handles.append((n, HANDLE_TYPES[c["c_type"]][0], c["value"]))
        elif k == "handle" and c["c_type"] in KINDS:
            out.append((n, KINDS[c["c_type"]][1], c["value"]))
    # In mpif.h and `use mpi` handles are INTEGERs; in mpi_f08 they are TYPE(MPI_x) instead.
    old = [(n, "int" if k == "hint" else k, v) for n, k, v in out]
    f08 = [(n, k, v) for n, k, v in out if k != "hint"]
    return _Consts(old, f08), handles


class _Consts(list):
    """The old bindings' list; `.f08` (via gen_fortran's use) holds mpi_f08's."""
    def __init__(self, old, f08):
        super().__init__(old)
        self.f08 = f08


GLUE_PRELUDE = """/* mpifort_glue.c -- Fortran-callable entry points of gridwire's MPI.
 * GENERATED by scripts/gen_fortran.py; do not edit. Helpers: fortran/gw_fortran.h. */
#include "gw_fortran.h"
"""


# ---- the C function behind one Fortran call ----------------------------------------

def _fdecl(p, flavor):
    """The C declaration of the argument as the Fortran compiler passes it."""
    if p.cls == "buf":
        return f"void *{p.name}" if flavor == "old" else f"CFI_cdesc_t *{p.name}"
    if p.cls == "userfn":
        return f"void (*{p.name})(void)"
    if p.cls == "detach":
        return f"void **{p.name}"
    if p.cls == "allocptr":
        return f"MPI_Aint *{p.name}" if flavor == "old" else f"void **{p.name}"
    if p.cls in ("sin", "sout"):
        return f"char *{p.name}" if flavor == "old" else f"CFI_cdesc_t *{p.name}"
    if p.cls in ("attrget", "attrin") and not p.kind:
        return f"MPI_Fint *{p.name}"
    if p.kind:
        return {"MPI_ADDRESS_KIND": "MPI_Aint", "MPI_COUNT_KIND": "MPI_Count",
                "MPI_OFFSET_KIND": "MPI_Offset"}[p.kind] + f" *{p.name}"
    return f"MPI_Fint *{p.name}"


def c_glue_function(f, flavor, pre=""):
    """C source of mpi_x_ (flavor "old": mpif.h and use mpi) or MPI_X_f08 (flavor "f08");
    with pre="P", of pmpi_x_ / PMPI_X_f08, which call PMPI_X of libmpi.so."""
    cname = c_name(f, flavor, pre)
    cfn = pre + f.name
    fp = f.fparams
    if f.ret == "double":
        return f"GW_EXPORT double {cname}(void) {{ return {cfn}(); }}\n"
    if f.ret == "MPI_Aint":
        a, b = [p.name for p in fp]
        return (f"GW_EXPORT MPI_Aint {cname}(MPI_Aint *{a}, MPI_Aint *{b}) "
                f"{{ return {cfn}(*{a}, *{b}); }}\n")
    sig = [_fdecl(p, flavor) for p in fp] + ["MPI_Fint *ierror"]
    if flavor == "old":  # gfortran passes the length of each CHARACTER argument last
        sig += [f"size_t {p.name}_len" for p in fp if p.cls in ("sin", "sout")]
    decl, pre_steps, arrays, args, post, cleanup = [], [], [], [], [], []
    names = {p.name for p in f.params}
    ok = "if (rc == MPI_SUCCESS) "
    for p in f.params:
        n = p.name
        if p.cls == "drop":
            args.append("0" if p.ctype == "int" else "NULL")
        elif p.cls == "buf":
            if flavor == "old":
                decl.append(f"void *b_{n} = gw_buf({n});")
            else:
                decl.append(f"void *b_{n} = NULL;")
                pre_steps.append(f"{ok}rc = gw_desc_buf({n}, &b_{n}, \"{f.name}\");")
            args.append(f"b_{n}")
        elif p.cls == "detach":
            decl.append(f"void *v_{n} = NULL;")
            args.append(f"&v_{n}")
            if flavor == "f08":  # the old bindings' address argument has no use in Fortran
                post.append(f"{ok}*{n} = v_{n};")
        elif p.cls == "allocptr":
            decl.append(f"void *v_{n} = NULL;")
            args.append(f"&v_{n}")
            post.append(f"{ok}*{n} = " + ("(MPI_Aint)(intptr_t)" if flavor == "old" else "") + f"v_{n};")
        elif p.cls == "userfn":
            _, ctype, make = p.callback
            decl.append(f"{ctype} *u_{n} = NULL;")
            pre_steps.append(f"{ok}rc = {make}((void (*)(void)){n}, &u_{n});")
            args.append(f"u_{n}")
        elif p.cls == "int":
            if n == "valuelen" and "value" in names:  # MPI_Info_get: no more than the Fortran string
                args.append(f"gw_min_len(*{n}, {_slen('value', flavor)})")
            else:
                args.append(f"*{n}")
        elif p.cls == "buflen":
            # In: the Fortran string's room (no more than its length); out: the
            # value's length without the NUL, when there is a value.
            decl.append(f"int c_{n} = gw_min_len(*{n}, {_slen('value', flavor)}) + 1;")
            args.append(f"&c_{n}")
            post.append(f"{ok}if (*flag) *{n} = c_{n} - 1;")
        elif p.cls == "intp":
            args.append(n)
            if is_request_index(f, n):
                post.append(f"{ok}gw_indices_to_f({n}, 1);")
            if p.logical:
                post.append(f"{ok}*{n} = (*{n} != 0);")
        elif p.cls == "intarr":
            args.append(n)
            if is_request_index(f, n):
                post.append(f"{ok}gw_indices_to_f({n}, *outcount);")
        elif p.cls == "intarr3":
            args.append(f"(int (*)[3]){n}")
        elif p.cls == "attrget":
            keyval = next(q.name for q in f.params if q.name.endswith("keyval"))
            ftype_c = "MPI_Aint" if p.kind else "MPI_Fint"
            decl.append(f"void *v_{n} = NULL;")
            args.append(f"&v_{n}")
            post.append(f"{ok}if (*flag) *{n} = ({ftype_c})gw_attr_value(*{keyval}, v_{n});")
        elif p.cls == "attrin":
            args.append(f"(void *)(intptr_t)*{n}")
        elif p.cls in ("aint", "count", "offset"):
            args.append(f"*{n}")
        elif p.cls in ("aintp", "countp", "offsetp", "aintarr"):
            args.append(n)
        elif p.cls in ("h", "hp"):
            t, stem = p.htype, HANDLE_TYPES[p.htype][1]
            init = f"gw_f2c_{stem}(*{n})" if p.cls == "h" or p.intent == "inout" else f"({t})0"
            decl.append(f"{t} c_{n} = {init};")
            if p.cls == "h":
                args.append(f"c_{n}")
            else:
                args.append(f"&c_{n}")
                post.append(("" if p.intent == "inout" else ok) + f"*{n} = gw_c2f_{stem}(c_{n});")
        elif p.cls == "harr":
            t, stem = p.htype, HANDLE_TYPES[p.htype][1]
            length = ARRAY_LEN.get((f.base, n)) or ("*count" if "count" in names else "*incount")
            if n == "sendtypes":  # ignored (and maybe not an array) when sendbuf is MPI_IN_PLACE
                length = f"(b_sendbuf == MPI_IN_PLACE ? 0 : {length})"
            decl += [f"{t} s_{n}[GW_SMALL];", f"{t} *a_{n} = s_{n};", f"int n_{n} = 0;"]
            arrays.append(f"n_{n} = {length};")
            arrays.append(f"{ok}rc = gw_array(&a_{n}, s_{n}, n_{n}, sizeof({t}));")
            if p.intent in ("in", "inout"):
                arrays.append(f"{ok}for (int i = 0; i < n_{n}; i++) a_{n}[i] = gw_f2c_{stem}({n}[i]);")
            if p.intent in ("out", "inout"):
                # Requests are written back after MPI_ERR_IN_STATUS too (some completed).
                cond = ok if p.intent == "out" else "if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) "
                post.append(f"{cond}for (int i = 0; i < n_{n}; i++) {n}[i] = gw_c2f_{stem}(a_{n}[i]);")
            args.append(f"a_{n}")
            cleanup.append(f"if (a_{n} != s_{n}) free(a_{n});")
        elif p.cls == "st":
            args.append(f"gw_status_{flavor}({n})")
        elif p.cls == "stin":
            args.append(f"(const MPI_Status *){n}")
        elif p.cls == "st08":
            args.append(f"(MPI_F08_status *)(void *){n}")
        elif p.cls == "fstatus":
            args.append(n)
        elif p.cls == "sts":
            args.append(f"gw_statuses_{flavor}({n})")
        elif p.cls in ("sin", "sout"):
            decl.append(f"char *s_{n} = NULL;")
            src = n if flavor == "old" else f"(char *){n}->base_addr"
            if p.cls == "sin":
                pre_steps.append(f"{ok}rc = gw_cstr({src}, {_slen(n, flavor)}, &s_{n});")
            else:
                pre_steps.append(f"{ok}rc = gw_strbuf(&s_{n}, {_slen(n, flavor)});")
                post.append(f"{ok}gw_fstr({src}, {_slen(n, flavor)}, s_{n});")
            args.append(f"s_{n}")
            cleanup.append(f"free(s_{n});")
        else:
            raise AssertionError(p.cls)
    body = ["    int rc = MPI_SUCCESS;"] + ["    " + d for d in decl] + ["    " + s for s in pre_steps + arrays]
    body.append(f"    {ok if pre_steps or arrays else ''}rc = {cfn}({', '.join(args)});")
    if f.name in AFTER_CALL:
        post.append(ok + AFTER_CALL[f.name])
    body += ["    " + s for s in post + cleanup]
    body.append("    *ierror = rc;" if flavor == "old" else "    if (ierror) *ierror = rc;")
    return f"GW_EXPORT void {cname}({', '.join(sig)})\n{{\n" + "\n".join(body) + "\n}\n"


def _slen(n, flavor):
    return f"{n}_len" if flavor == "old" else f"{n}->elem_len"
