//! MPI errors: a class (the standard's numbers) and a message saying what was wrong.

/// MPI error classes, with the values fixed by the MPI 5.0 standard ABI.
pub mod class {
    pub const SUCCESS: i32 = 0;
    pub const BUFFER: i32 = 1;
    pub const COUNT: i32 = 2;
    pub const TYPE: i32 = 3;
    pub const TAG: i32 = 4;
    pub const COMM: i32 = 5;
    pub const RANK: i32 = 6;
    pub const REQUEST: i32 = 7;
    pub const ROOT: i32 = 8;
    pub const GROUP: i32 = 9;
    pub const OP: i32 = 10;
    pub const TOPOLOGY: i32 = 11;
    pub const DIMS: i32 = 12;
    pub const ARG: i32 = 13;
    pub const UNKNOWN: i32 = 14;
    pub const TRUNCATE: i32 = 15;
    pub const OTHER: i32 = 16;
    pub const INTERN: i32 = 17;
    pub const PENDING: i32 = 18;
    pub const IN_STATUS: i32 = 19;
    pub const INFO_KEY: i32 = 31;
    pub const INFO_NOKEY: i32 = 32;
    pub const INFO_VALUE: i32 = 33;
    pub const INFO: i32 = 34;
    pub const KEYVAL: i32 = 36;
    pub const NO_MEM: i32 = 39;
    pub const NOT_SAME: i32 = 40;
    pub const ASSERT: i32 = 22;
    pub const BASE: i32 = 24;
    pub const DISP: i32 = 26;
    pub const LOCKTYPE: i32 = 37;
    pub const RMA_ATTACH: i32 = 46;
    pub const RMA_CONFLICT: i32 = 47;
    pub const RMA_RANGE: i32 = 48;
    pub const RMA_SHARED: i32 = 49;
    pub const RMA_SYNC: i32 = 50;
    pub const SIZE: i32 = 52;
    pub const UNSUPPORTED_DATAREP: i32 = 54;
    pub const WIN: i32 = 56;
    pub const RMA_FLAVOR: i32 = 57;
    pub const UNSUPPORTED_OPERATION: i32 = 55;
    pub const PROC_ABORTED: i32 = 58;
    pub const VALUE_TOO_LARGE: i32 = 59;
    pub const ERRHANDLER: i32 = 61;
    pub const NAME: i32 = 38;
    pub const PORT: i32 = 43;
    pub const SERVICE: i32 = 51;
    pub const SPAWN: i32 = 53;

    /// The tools interface's classes (`MPI_T_ERR_*`, 1001..=1018 in the ABI):
    /// name and description, in order.
    pub const T_FIRST: i32 = 1001;
    pub const T_LAST: i32 = 1018;
    const T_CLASSES: [(&str, &str); 18] = [
        (
            "MPI_T_ERR_CANNOT_INIT",
            "the tools interface cannot be initialized",
        ),
        ("MPI_T_ERR_NOT_ACCESSIBLE", "not accessible now"),
        (
            "MPI_T_ERR_NOT_INITIALIZED",
            "the tools interface is not initialized",
        ),
        ("MPI_T_ERR_NOT_SUPPORTED", "not supported"),
        ("MPI_T_ERR_MEMORY", "out of memory"),
        ("MPI_T_ERR_INVALID", "invalid use of the tools interface"),
        ("MPI_T_ERR_INVALID_INDEX", "invalid index"),
        ("MPI_T_ERR_INVALID_ITEM", "invalid enumeration item"),
        (
            "MPI_T_ERR_INVALID_SESSION",
            "invalid performance variable session",
        ),
        ("MPI_T_ERR_INVALID_HANDLE", "invalid handle"),
        ("MPI_T_ERR_INVALID_NAME", "invalid name"),
        ("MPI_T_ERR_OUT_OF_HANDLES", "no more handles"),
        ("MPI_T_ERR_OUT_OF_SESSIONS", "no more sessions"),
        (
            "MPI_T_ERR_CVAR_SET_NOT_NOW",
            "the control variable cannot be set now",
        ),
        (
            "MPI_T_ERR_CVAR_SET_NEVER",
            "the control variable cannot be set any more",
        ),
        (
            "MPI_T_ERR_PVAR_NO_WRITE",
            "the performance variable cannot be written or reset",
        ),
        (
            "MPI_T_ERR_PVAR_NO_STARTSTOP",
            "the performance variable cannot be started or stopped",
        ),
        (
            "MPI_T_ERR_PVAR_NO_ATOMIC",
            "the performance variable cannot be read and reset atomically",
        ),
    ];

    /// Whether `c` is a predefined class (MPI or MPI_T).
    pub fn is_predefined(c: i32) -> bool {
        (0..=62).contains(&c) || (T_FIRST..=T_LAST).contains(&c)
    }
    pub const LASTCODE: i32 = 16383;

    /// The standard's short description of a class.
    pub fn describe(c: i32) -> &'static str {
        match c {
            SUCCESS => "no error",
            BUFFER => "invalid buffer pointer",
            COUNT => "invalid count argument",
            TYPE => "invalid datatype",
            TAG => "invalid tag",
            COMM => "invalid communicator",
            RANK => "invalid rank",
            REQUEST => "invalid request",
            ROOT => "invalid root",
            GROUP => "invalid group",
            OP => "invalid reduction operation",
            TOPOLOGY => "invalid topology",
            DIMS => "invalid dimension argument",
            ARG => "invalid argument",
            UNKNOWN => "unknown error",
            TRUNCATE => "message truncated",
            OTHER => "other error",
            INTERN => "internal error",
            PENDING => "pending request",
            IN_STATUS => "error code in status",
            31 => "invalid info key",
            32 => "info key not defined",
            33 => "invalid info value",
            34 => "invalid info object",
            36 => "invalid keyval",
            39 => "out of memory",
            40 => "collective argument not identical on all processes",
            ASSERT => "invalid assertion",
            BASE => "invalid base",
            DISP => "invalid displacement",
            LOCKTYPE => "invalid lock type",
            RMA_ATTACH => "memory cannot be attached",
            RMA_CONFLICT => "conflicting accesses to a window",
            RMA_RANGE => "target memory is not part of the window",
            RMA_SHARED => "memory cannot be shared",
            RMA_SYNC => "wrong synchronization of one-sided operations",
            52 => "invalid size",
            54 => "unsupported data representation",
            WIN => "invalid window",
            RMA_FLAVOR => "passed window has the wrong flavor for the called function",
            55 => "unsupported operation",
            58 => "process aborted",
            59 => "value too large",
            61 => "invalid errhandler",
            38 => "no service of that name is published",
            43 => "invalid port name",
            51 => "the service name is not published, or is published already",
            53 => "the processes could not be spawned",
            20..=62 => "error (see the MPI standard for this class)",
            T_FIRST..=T_LAST => T_CLASSES[(c - T_FIRST) as usize].1,
            _ => "unknown error class",
        }
    }

    /// The class's name as in the standard (`MPI_ERR_COUNT`).
    pub fn name(c: i32) -> &'static str {
        match c {
            SUCCESS => "MPI_SUCCESS",
            BUFFER => "MPI_ERR_BUFFER",
            COUNT => "MPI_ERR_COUNT",
            TYPE => "MPI_ERR_TYPE",
            TAG => "MPI_ERR_TAG",
            COMM => "MPI_ERR_COMM",
            RANK => "MPI_ERR_RANK",
            REQUEST => "MPI_ERR_REQUEST",
            ROOT => "MPI_ERR_ROOT",
            GROUP => "MPI_ERR_GROUP",
            OP => "MPI_ERR_OP",
            TOPOLOGY => "MPI_ERR_TOPOLOGY",
            DIMS => "MPI_ERR_DIMS",
            ARG => "MPI_ERR_ARG",
            UNKNOWN => "MPI_ERR_UNKNOWN",
            TRUNCATE => "MPI_ERR_TRUNCATE",
            OTHER => "MPI_ERR_OTHER",
            INTERN => "MPI_ERR_INTERN",
            PENDING => "MPI_ERR_PENDING",
            IN_STATUS => "MPI_ERR_IN_STATUS",
            INFO_KEY => "MPI_ERR_INFO_KEY",
            INFO_NOKEY => "MPI_ERR_INFO_NOKEY",
            INFO_VALUE => "MPI_ERR_INFO_VALUE",
            INFO => "MPI_ERR_INFO",
            KEYVAL => "MPI_ERR_KEYVAL",
            NO_MEM => "MPI_ERR_NO_MEM",
            NOT_SAME => "MPI_ERR_NOT_SAME",
            ASSERT => "MPI_ERR_ASSERT",
            BASE => "MPI_ERR_BASE",
            DISP => "MPI_ERR_DISP",
            LOCKTYPE => "MPI_ERR_LOCKTYPE",
            RMA_ATTACH => "MPI_ERR_RMA_ATTACH",
            RMA_CONFLICT => "MPI_ERR_RMA_CONFLICT",
            RMA_RANGE => "MPI_ERR_RMA_RANGE",
            RMA_SHARED => "MPI_ERR_RMA_SHARED",
            RMA_SYNC => "MPI_ERR_RMA_SYNC",
            SIZE => "MPI_ERR_SIZE",
            UNSUPPORTED_DATAREP => "MPI_ERR_UNSUPPORTED_DATAREP",
            WIN => "MPI_ERR_WIN",
            RMA_FLAVOR => "MPI_ERR_RMA_FLAVOR",
            UNSUPPORTED_OPERATION => "MPI_ERR_UNSUPPORTED_OPERATION",
            PROC_ABORTED => "MPI_ERR_PROC_ABORTED",
            VALUE_TOO_LARGE => "MPI_ERR_VALUE_TOO_LARGE",
            ERRHANDLER => "MPI_ERR_ERRHANDLER",
            NAME => "MPI_ERR_NAME",
            PORT => "MPI_ERR_PORT",
            SERVICE => "MPI_ERR_SERVICE",
            SPAWN => "MPI_ERR_SPAWN",
            T_FIRST..=T_LAST => T_CLASSES[(c - T_FIRST) as usize].0,
            _ => "MPI_ERR_(other)",
        }
    }
}

/// An MPI error: its class and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {msg}", class::name(*.class))]
pub struct MpiError {
    pub class: i32,
    pub msg: String,
}

impl MpiError {
    pub fn new(class: i32, msg: impl Into<String>) -> Self {
        MpiError {
            class,
            msg: msg.into(),
        }
    }
}

impl From<gridwire_core::Error> for MpiError {
    fn from(e: gridwire_core::Error) -> Self {
        let c = match e {
            gridwire_core::Error::LinkFailed { .. } => class::PROC_ABORTED,
            _ => class::OTHER,
        };
        MpiError::new(c, format!("runtime: {e}"))
    }
}

pub type Result<T, E = MpiError> = std::result::Result<T, E>;

/// Shorthand: `Err(err(class::COUNT, "..."))`.
pub fn err(class: i32, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}
