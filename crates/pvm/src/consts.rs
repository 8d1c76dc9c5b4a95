//! PVM 3.4's numbers, as its programs know them (the same values as every
//! `pvm3.h`; ours is include/pvm3.h).

pub const PVM_OK: i32 = 0;
pub const PVM_BAD_PARAM: i32 = -2;
pub const PVM_MISMATCH: i32 = -3;
pub const PVM_OVERFLOW: i32 = -4;
pub const PVM_NO_DATA: i32 = -5;
pub const PVM_NO_HOST: i32 = -6;
pub const PVM_NO_FILE: i32 = -7;
pub const PVM_DENIED: i32 = -8;
pub const PVM_NO_MEM: i32 = -10;
pub const PVM_BAD_MSG: i32 = -12;
pub const PVM_SYS_ERR: i32 = -14;
pub const PVM_NO_BUF: i32 = -15;
pub const PVM_NO_SUCH_BUF: i32 = -16;
pub const PVM_NULL_GROUP: i32 = -17;
pub const PVM_DUP_GROUP: i32 = -18;
pub const PVM_NO_GROUP: i32 = -19;
pub const PVM_NOT_IN_GROUP: i32 = -20;
pub const PVM_NO_INST: i32 = -21;
pub const PVM_HOST_FAIL: i32 = -22;
pub const PVM_NO_PARENT: i32 = -23;
pub const PVM_NOT_IMPL: i32 = -24;
pub const PVM_OUT_OF_RES: i32 = -27;
pub const PVM_DUP_HOST: i32 = -28;
pub const PVM_CANT_START: i32 = -29;
pub const PVM_NO_TASK: i32 = -31;
pub const PVM_NOT_FOUND: i32 = -32;
pub const PVM_EXISTS: i32 = -33;

pub const PVM_DATA_DEFAULT: i32 = 0;
pub const PVM_DATA_RAW: i32 = 1;
pub const PVM_DATA_IN_PLACE: i32 = 2;

pub const PVM_TASK_EXIT: i32 = 1;
pub const PVM_HOST_DELETE: i32 = 2;
pub const PVM_HOST_ADD: i32 = 3;
pub const PVM_NOTIFY_CANCEL: i32 = 256;

pub const PVM_ROUTE: i32 = 1;
pub const PVM_ROUTE_DIRECT: i32 = 3;

pub const PVM_TASK_HOST: i32 = 1;
pub const PVM_TASK_ARCH: i32 = 2;
pub const PVM_NO_SPAWN_PARENT: i32 = 64;

/// Task ids: the single host's part, as PVM numbers its first host, and
/// the id of its "daemon" (the coordinator answers for it).
pub const HOST_TID: i32 = 0x40000;
/// Task id of context `ctx` of the virtual machine.
pub fn tid_of(ctx: u32) -> i32 {
    HOST_TID + 1 + ctx as i32
}
/// Context id of task `tid`, if it names a task of this virtual machine.
pub fn ctx_of(tid: i32) -> Option<u32> {
    let c = tid.checked_sub(HOST_TID + 1)?;
    (0..crate::coord::CAPACITY as i32)
        .contains(&c)
        .then_some(c as u32)
}

/// The message `pvm_perror` prints for `code`.
pub fn error_text(code: i32) -> &'static str {
    match code {
        0 => "Ok",
        -2 => "Bad parameter",
        -3 => "Parameter mismatch",
        -4 => "Value too large",
        -5 => "End of buffer",
        -6 => "No such host",
        -7 => "No such file",
        -8 => "Permission denied",
        -10 => "Malloc failed",
        -12 => "Can't decode message",
        -14 => "Can't contact local daemon",
        -15 => "No current buffer",
        -16 => "No such buffer",
        -17 => "Null group name",
        -18 => "Already in group",
        -19 => "No such group",
        -20 => "Not in group",
        -21 => "No such instance",
        -22 => "Host failed",
        -23 => "No parent task",
        -24 => "Not implemented",
        -25 => "Pvmd system error",
        -26 => "Version mismatch",
        -27 => "Out of resources",
        -28 => "Duplicate host",
        -29 => "Can't start pvmd",
        -30 => "Already in progress",
        -31 => "No such task",
        -32 => "Not Found",
        -33 => "Already exists",
        _ => "Unknown error",
    }
}
