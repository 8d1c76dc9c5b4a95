//! The MPI layer's parameters, as rows of the runtime's one parameter
//! table format ([`ParamDecl`]): read with [`num`]/[`flag`], which honour a
//! value written through MPI_T ([`gridwire_core::params::set_override`])
//! before the environment, and listed by MPI_T (`gwinfo --mpi-t`).

use gridwire_core::params::{current_num, Kind, ParamDecl};

const SIZE: Kind = Kind::Size {
    min: 1,
    max: 1 << 40,
};

/// Every `GW_MPI_*` parameter of the MPI layer.
pub const MPI_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "MPI_EAGER_SELF",
        default: "1048576",
        kind: SIZE,
        help: "Largest message sent eagerly to this process itself, bytes (larger ones \
               rendezvous). Read at the first message to a peer.",
    },
    ParamDecl {
        name: "MPI_EAGER_SHM",
        default: "32768",
        kind: SIZE,
        help: "Largest message sent eagerly over shared memory, bytes. Read at the first message \
               to a peer.",
    },
    ParamDecl {
        name: "MPI_EAGER_TCP",
        default: "65536",
        kind: SIZE,
        help: "Largest message sent eagerly over TCP, bytes. Read at the first message to a peer.",
    },
    ParamDecl {
        name: "MPI_EAGER_UDP",
        default: "16384",
        kind: SIZE,
        help: "Largest message sent eagerly over UDP, bytes. Read at the first message to a peer.",
    },
    ParamDecl {
        name: "MPI_SPIN_US",
        default: "auto",
        kind: Kind::Text,
        help: "Microseconds a blocking MPI call polls before yielding. `auto` = the runtime's \
               GW_SPIN_US (whose `auto` is 2000 when every rank on this machine has a core, \
               else 0). Read at MPI_Init.",
    },
    ParamDecl {
        name: "MPI_NO_CMA",
        default: "0",
        kind: Kind::Bool,
        help: "Never copy with process_vm_readv (large messages rendezvous through the runtime). \
               Read at MPI_Init.",
    },
    ParamDecl {
        name: "MPI_CMA_ASSIST_MIN",
        default: "65536",
        kind: SIZE,
        help: "From this size a single copy within a host is made by both processes: the \
               receiver asks the sender to copy the back part with process_vm_writev while it \
               copies the front part (1g: the receiver copies alone). Read once per peer, at \
               its first single copy.",
    },
    ParamDecl {
        name: "MPI_DEBUG",
        default: "0",
        kind: Kind::Bool,
        help: "Say on stderr which peers allow the single copy.",
    },
    ParamDecl {
        name: "MPI_UNEXPECTED_LIMIT",
        default: "1073741824",
        kind: SIZE,
        help: "Bytes of messages that arrived before their receive a process holds; further ones \
               are dropped and reported. Read at MPI_Init; an MPI_T write applies at once.",
    },
    ParamDecl {
        name: "COLL",
        default: "auto",
        kind: Kind::Text,
        help: "Collective algorithms: `flat` (the same on any placement), `hier` or `auto` \
               (level by level - host, site, wide area - on communicators that span hosts; `auto` \
               not on communicators of 2 members). The \
               info key `gw_coll` overrides it per communicator. Same value in the whole job. \
               Read at the first collective.",
    },
    ParamDecl {
        name: "MPI_COLL_SEGMENT",
        default: "65536",
        kind: SIZE,
        help: "Largest piece of a pipelined hierarchical Bcast, Reduce or Allreduce: messages of \
               more than 8 KiB go level by level in 4 pieces of 8 KiB up to this many bytes. \
               Read at the first one.",
    },
    ParamDecl {
        name: "MPI_COLL_SHM",
        default: "65536",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        help: "Hierarchical reductions of at most this many bytes combine a host's \
               contributions in a shared segment instead of messages (0: never). \
               Read at the first one; every rank must use the same value.",
    },
    ParamDecl {
        name: "MPI_COLL_SM",
        default: "32768",
        kind: Kind::Size { min: 0, max: 32768 },
        help: "Collectives (Barrier, Bcast, Reduce, Allreduce, Allgather; Alltoall up to \
               4096 bytes) of a communicator whose members all share one host, moving at \
               most this many bytes per member, go through a shared segment instead of \
               messages (0: never). Read at the first one; every rank must use the same \
               value.",
    },
    ParamDecl {
        name: "MPI_ALLREDUCE_SPLIT",
        default: "65536",
        kind: SIZE,
        help: "Bytes from which allreduce with a commutative op reduce-scatters and allgathers \
               instead of exchanging the whole data in every round. Read at each allreduce.",
    },
    ParamDecl {
        name: "MPI_RMA_DIRECT",
        default: "1",
        kind: Kind::Bool,
        help: "Windows from MPI_Win_allocate put the memory of the members on one host in one \
               shared segment, and puts and gets to a member reached over shared memory (and to \
               this process itself) are loads and stores, without the target; on windows from \
               MPI_Win_create and dynamic ones they are single copies (process_vm_writev/readv) \
               by the origin. 0 = every operation is a request the target applies. Read when a \
               window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_DEFER",
        default: "1",
        kind: Kind::Bool,
        help: "Puts and gets by single copies (windows from MPI_Win_create, dynamic windows) are \
               recorded and issued at the next synchronization, those to one target together in \
               one process_vm_writev/readv. 0 = each is copied by its call. Read when a window is \
               created.",
    },
    ParamDecl {
        name: "MPI_RMA_ACC_CHOICE",
        default: "1",
        kind: Kind::Bool,
        help: "Accumulates, fetch-and-ops and compare-and-swaps to a member of this host on a \
               window from MPI_Win_create or a dynamic one are single copies by the origin, \
               except while the target polls inside an MPI call (it says so in the window's lock \
               segment): then requests, which it applies sooner. 0 = always single copies. Read \
               when a window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_PUT_CHOICE",
        default: "8192",
        kind: Kind::UInt {
            min: 0,
            max: 1 << 30,
        },
        help: "Puts and gets of up to this many bytes to a member of this host on a window from \
               MPI_Win_create or a dynamic one go as requests while the target polls inside an \
               MPI call (it says so in the window's lock segment), which it applies sooner than \
               a system call copies; otherwise, and when larger, single copies by the origin. 0 \
               = always single copies. Read when a window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_LARGE_PUTS",
        default: "1",
        kind: Kind::Bool,
        help: "Puts of at least 64 KiB sent as requests to a member on another host lend their \
               origin buffer to the runtime (which keeps its address, not a copy, until the \
               target acknowledged it), and the target's tcp reads a put of at least 32 KiB \
               straight into the window's memory. 0 = both copied as any request. Read when a \
               window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_LARGE_GETS",
        default: "1",
        kind: Kind::Bool,
        help: "Answers of gets of at least 64 KiB to a member on another host are lent to the \
               runtime from the window's memory itself (no copy at the target but the kernel's; \
               what is still lent is copied when a window is freed or a region detached). 0 = \
               copied out of the window first. Read when a window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_GETS_IN_FLIGHT",
        default: "8m",
        kind: Kind::Size {
            min: 0,
            max: 1 << 40,
        },
        help: "Gets of at least 64 KiB sent as requests ask at most this many bytes of answers of \
               one target at a time (one more when none is in flight); the others are sent as \
               earlier ones complete, so a target never queues more than this for the origin. 0 = \
               no bound. Read when a window is created.",
    },
    ParamDecl {
        name: "MPI_RMA_PROGRESS",
        default: "thread",
        kind: Kind::Choice(&["thread", "none"]),
        help: "How a window's target applies one-sided operations while it computes: `thread` = \
               a library thread that sleeps until work arrives runs them (passive-target epochs \
               complete without the target calling MPI); `none` = only when the target enters \
               the library (MPICH's default). Read when a window is created.",
    },
];

/// The row of `name` (without the `GW_` prefix).
pub fn decl(name: &str) -> &'static ParamDecl {
    MPI_PARAMS
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("MPI parameter {name} is not declared (programming error)"))
}

/// The current value of a numeric parameter (a bad value reads as the default).
pub fn num(name: &str) -> u64 {
    current_num(decl(name))
}

/// The current value of a boolean parameter.
pub fn flag(name: &str) -> bool {
    current_num(decl(name)) != 0
}

/// The raw text of a parameter if it was set (environment or MPI_T).
pub fn raw(name: &str) -> Option<String> {
    gridwire_core::params::lookup_raw(&decl(name).var())
}

/// Whether windows get the one-sided progress thread (`GW_MPI_RMA_PROGRESS`).
/// A value that is not one of the words is reported once and read as the default.
pub fn rma_progress_thread() -> bool {
    match gridwire_core::params::current(decl("MPI_RMA_PROGRESS")) {
        Ok(v) => v == "thread",
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| gridwire_core::say!("gridwire mpi: {e}; using `thread`"));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses_and_names_are_unique() {
        for d in MPI_PARAMS {
            gridwire_core::params::current(d).unwrap();
            assert_eq!(MPI_PARAMS.iter().filter(|o| o.name == d.name).count(), 1);
        }
        assert_eq!(num("MPI_EAGER_TCP"), 65536);
    }
}
