//! Attribute storage: keyval -> value (the C layer owns keyvals and their callbacks).

use std::collections::BTreeMap;

/// The attributes cached on one object, ordered by keyval (so copies and deletes run in a stable order).
#[derive(Debug, Default, Clone)]
pub struct AttrSet {
    pub map: BTreeMap<i32, usize>,
}
