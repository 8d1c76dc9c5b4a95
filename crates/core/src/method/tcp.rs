//! placeholder
use super::MethodInfo;
pub const INFO: MethodInfo = MethodInfo { name: "tcp", summary: "", params: &[], init: |_| Ok(None) };
