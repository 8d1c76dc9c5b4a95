//! placeholder
use super::MethodInfo;
pub const INFO: MethodInfo = MethodInfo { name: "self", summary: "", params: &[], init: |_| Ok(None) };
