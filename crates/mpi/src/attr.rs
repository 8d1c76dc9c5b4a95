//! Attribute storage: keyval -> value (the C layer owns keyvals and their callbacks).

use std::collections::BTreeMap;

/// The attributes cached on one object, with the order they were set in:
/// copies run in that order, and deletes at free (and at `MPI_Finalize` for
/// `MPI_COMM_SELF`, MPI-4.1 §11.2.4) in the reverse one.
#[derive(Debug, Default, Clone)]
pub struct AttrSet {
    map: BTreeMap<i32, usize>,
    /// Keyvals in the order their attributes were first set (a new value
    /// for a set keyval keeps its place, as in MPICH).
    order: Vec<i32>,
}

impl AttrSet {
    /// Sets `k` to `v`; returns the value it replaces.
    pub fn set(&mut self, k: i32, v: usize) -> Option<usize> {
        let old = self.map.insert(k, v);
        if old.is_none() {
            self.order.push(k);
        }
        old
    }

    pub fn get(&self, k: i32) -> Option<usize> {
        self.map.get(&k).copied()
    }

    /// Removes `k`; returns its value.
    pub fn remove(&mut self, k: i32) -> Option<usize> {
        let old = self.map.remove(&k);
        if old.is_some() {
            self.order.retain(|&x| x != k);
        }
        old
    }

    /// The attributes in the order they were set.
    pub fn in_set_order(&self) -> Vec<(i32, usize)> {
        self.order.iter().map(|k| (*k, self.map[k])).collect()
    }

    /// Empties the set, giving its attributes last-set first (the order of deletion).
    pub fn take_last_set_first(&mut self) -> Vec<(i32, usize)> {
        let mut all = self.in_set_order();
        all.reverse();
        self.map.clear();
        self.order.clear();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::AttrSet;

    #[test]
    fn deletes_run_last_set_first_and_a_reset_keeps_its_place() {
        let mut a = AttrSet::default();
        a.set(20, 1);
        a.set(10, 2);
        a.set(30, 3);
        assert_eq!(a.set(20, 4), Some(1));
        assert_eq!(a.remove(10), Some(2));
        a.set(5, 6);
        assert_eq!(a.in_set_order(), vec![(20, 4), (30, 3), (5, 6)]);
        assert_eq!(a.take_last_set_first(), vec![(5, 6), (30, 3), (20, 4)]);
        assert_eq!(a.get(20), None);
        assert!(a.take_last_set_first().is_empty());
    }
}
