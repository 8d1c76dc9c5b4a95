//! placeholder
use super::MethodInfo;
pub const INFO: MethodInfo = MethodInfo { name: "shm", summary: "", params: &[], init: |_| Ok(None) };
