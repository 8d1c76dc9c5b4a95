"""mpi4py's PyPI binary wheel (MPICH ABI) on gridwire through the MPICH-ABI shim.

Run with any number of ranks >= 2 under gwrun; every result is asserted. Prints
"wheel check ok with N ranks" on rank 0 at the end.
"""
import sys

import mpi4py
from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size >= 2, "run with at least 2 ranks"
nxt, prv = (rank + 1) % size, (rank - 1) % size

# The wheel's MPICH build, running on gridwire (not on some MPICH found on the path).
assert ".mpich." in MPI.__file__, MPI.__file__
lib = MPI.Get_library_version()
assert "gridwire" in lib.lower(), lib

# Send/Recv (eager and rendezvous sizes), a Status read back.
for n in (16, 200000):
    a = np.arange(n, dtype="f8") * (rank + 1)
    b = np.empty(n, dtype="f8")
    st = MPI.Status()
    if rank % 2 == 0:
        comm.Send(a, dest=nxt, tag=5)
        comm.Recv(b, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
    else:
        comm.Recv(b, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        comm.Send(a, dest=nxt, tag=5)
    assert np.array_equal(b, np.arange(n, dtype="f8") * (prv + 1)), n
    assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.DOUBLE)) == (prv, 5, n), (st.source, st.tag)
    assert st.Get_elements(MPI.DOUBLE) == n and st.Get_count(MPI.BYTE) == 8 * n
    assert not st.Is_cancelled()

# Isend/Irecv + Waitall; Testall and Waitany on finished requests.
outs = [np.full(7, rank * 10 + k, dtype="i4") for k in range(3)]
ins = [np.empty(7, dtype="i4") for _ in range(3)]
reqs = [comm.Irecv(ins[k], source=prv, tag=20 + k) for k in range(3)]
reqs += [comm.Isend(outs[k], dest=nxt, tag=20 + k) for k in range(3)]
sts = [MPI.Status() for _ in reqs]
MPI.Request.Waitall(reqs, sts)
for k in range(3):
    assert (ins[k] == prv * 10 + k).all(), (k, ins[k])
    assert sts[k].Get_source() == prv and sts[k].Get_tag() == 20 + k
assert all(r == MPI.REQUEST_NULL for r in reqs)
assert MPI.Request.Testall(reqs)
assert MPI.Request.Waitany(reqs) == MPI.UNDEFINED

# Receives from MPI_PROC_NULL: the status says so in MPICH's values.
st = MPI.Status()
comm.Recv(np.empty(1), source=MPI.PROC_NULL, status=st)
assert st.Get_source() == MPI.PROC_NULL and st.Get_tag() == MPI.ANY_TAG and st.Get_count(MPI.DOUBLE) == 0

# Probe with wildcards, then the message.
comm.send({"from": rank}, dest=nxt, tag=33)
st = MPI.Status()
comm.Probe(source=MPI.ANY_SOURCE, tag=33, status=st)
assert st.Get_source() == prv and st.Get_tag() == 33
assert comm.recv(source=st.Get_source(), tag=33) == {"from": prv}

# Broadcast, numpy and objects, from every root.
for root in range(size):
    v = np.arange(100, dtype="i8") * (root + 3) if rank == root else np.zeros(100, dtype="i8")
    comm.Bcast(v, root=root)
    assert np.array_equal(v, np.arange(100, dtype="i8") * (root + 3))
    assert comm.bcast(("root", root) if rank == root else None, root=root) == ("root", root)

# Allreduce: SUM on float64 arrays, IN_PLACE, MAX, objects, and a user operation.
s = np.empty(50)
comm.Allreduce(np.linspace(0, 1, 50) * (rank + 1), s, op=MPI.SUM)
assert np.allclose(s, np.linspace(0, 1, 50) * size * (size + 1) / 2)
ip = np.full(3, float(rank))
comm.Allreduce(MPI.IN_PLACE, ip, op=MPI.MAX)
assert (ip == size - 1).all()
assert comm.allreduce(rank + 1, op=MPI.SUM) == size * (size + 1) // 2
assert comm.allreduce([rank], op=MPI.SUM) == list(range(size))


def absmax(inbuf, inoutbuf, datatype):
    assert datatype == MPI.INT, datatype  # the user function sees MPICH's handle for MPI_INT
    a = np.frombuffer(inbuf, dtype="i4")
    b = np.frombuffer(inoutbuf, dtype="i4")
    np.copyto(b, np.where(np.abs(a) > np.abs(b), a, b))


op = MPI.Op.Create(absmax, commute=True)
r = np.empty(4, dtype="i4")
comm.Allreduce(np.array([rank, -rank, 1, -2 * rank], dtype="i4"), r, op=op)
op.Free()
assert np.array_equal(r, [size - 1, -(size - 1), 1, -2 * (size - 1)]), r
mx = comm.allreduce((rank * 7) % size, op=MPI.MAX)
assert mx == max((i * 7) % size for i in range(size))

# Gather / scatter / allgather / alltoall.
g = np.empty((size, 2), dtype="i4") if rank == 0 else None
comm.Gather(np.array([rank, rank * rank], dtype="i4"), g, root=0)
if rank == 0:
    assert np.array_equal(g, [[i, i * i] for i in range(size)])
assert comm.gather(rank * 2, root=size - 1) == ([2 * i for i in range(size)] if rank == size - 1 else None)
sc = np.arange(size * 3, dtype="f4").reshape(size, 3) if rank == 0 else None
mine = np.empty(3, dtype="f4")
comm.Scatter(sc, mine, root=0)
assert np.array_equal(mine, np.arange(3 * rank, 3 * rank + 3, dtype="f4"))
assert comm.scatter([i * i for i in range(size)] if rank == 0 else None, root=0) == rank * rank
ag = np.empty(size, dtype="i8")
comm.Allgather(np.array([rank + 100], dtype="i8"), ag)
assert np.array_equal(ag, np.arange(size) + 100)
sendv = np.array([1000 * rank + j for j in range(size)], dtype="i4")
recvv = np.empty(size, dtype="i4")
comm.Alltoall(sendv, recvv)
assert np.array_equal(recvv, [1000 * j + rank for j in range(size)])
assert comm.alltoall([(rank, j) for j in range(size)]) == [(j, rank) for j in range(size)]

# Comm.Split, Dup, Compare, Free; group ranks.
sub = comm.Split(color=rank % 2, key=-rank)
assert sub.Get_size() == (size + 1 - rank % 2) // 2
members = [i for i in range(size) if i % 2 == rank % 2]
assert sub.Get_rank() == sorted(members, reverse=True).index(rank)
assert sub.allreduce(rank) == sum(members)
assert MPI.Comm.Compare(comm, sub) == MPI.UNEQUAL
dup = comm.Dup()
assert MPI.Comm.Compare(comm, dup) == MPI.CONGRUENT and MPI.Comm.Compare(comm, comm) == MPI.IDENT
assert MPI.Group.Translate_ranks(sub.Get_group(), [0], comm.Get_group())[0] == max(members)
dup.Free()
sub.Free()
assert sub == MPI.COMM_NULL
none = comm.Split(color=MPI.UNDEFINED if rank == 0 else 1, key=rank)
assert (none == MPI.COMM_NULL) == (rank == 0)
if none != MPI.COMM_NULL:
    assert none.Get_size() == size - 1
    none.Free()

# Derived datatypes.
vec = MPI.INT.Create_vector(3, 1, 2).Commit()
buf = np.arange(6, dtype="i4") + 10 * rank
got = np.zeros(3, dtype="i4")
comm.Sendrecv([buf, 1, vec], dest=nxt, sendtag=40, recvbuf=got, source=prv, recvtag=40)
assert np.array_equal(got, np.arange(0, 6, 2) + 10 * prv)
assert vec.Get_envelope()[-1] == MPI.COMBINER_VECTOR and vec.Get_size() == 12
assert vec.Get_contents()[0] == [3, 1, 2] and vec.Get_contents()[-1][0] == MPI.INT
vec.Free()

# Buffered sends: buffers sized with MPICH's MPI_BSEND_OVERHEAD (smaller than
# gridwire's), per process and per communicator, and MPI_BUFFER_AUTOMATIC.
for attach, detach in ((MPI.Attach_buffer, MPI.Detach_buffer), (comm.Attach_buffer, comm.Detach_buffer)):
    for mem in (bytearray(3 * (8 + MPI.BSEND_OVERHEAD)), MPI.BUFFER_AUTOMATIC):
        attach(mem)
        for k in range(3):
            comm.Bsend(np.full(1, rank * 10.0 + k), dest=nxt, tag=60 + k)
        for k in range(3):
            x = np.empty(1)
            comm.Recv(x, source=prv, tag=60 + k)
            assert x[0] == prv * 10.0 + k, (x, k)
        got = detach()
        assert got is mem or got == mem, (got, mem)

# Attributes and error classes come back in MPICH's values.
assert comm.Get_attr(MPI.TAG_UB) >= 32767
assert MPI.Query_thread() in (MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE)
try:
    comm.Send(np.zeros(1), dest=size + 5, tag=0)
    raise AssertionError("send to an invalid rank succeeded")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_RANK, (e.Get_error_class(), str(e))
try:
    comm.Recv(np.zeros(1), source=0, tag=-7)
    raise AssertionError("receive with a negative tag succeeded")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TAG, (e.Get_error_class(), str(e))

comm.Barrier()
if rank == 0:
    print("wheel check ok with", size, "ranks", "(mpi4py", mpi4py.__version__ + ")")
    sys.stdout.flush()
