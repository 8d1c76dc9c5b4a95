//! Groups: ordered sets of processes, named by their rank in the world.

use crate::error::{class, err, Result};
use crate::{IDENT, SIMILAR, UNDEFINED, UNEQUAL};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Group {
    /// World rank of each member, by group rank.
    pub members: Vec<u32>,
    index: HashMap<u32, u32>,
}

impl Group {
    pub fn new(members: Vec<u32>) -> Arc<Group> {
        let index = members
            .iter()
            .enumerate()
            .map(|(i, &w)| (w, i as u32))
            .collect();
        Arc::new(Group { members, index })
    }

    pub fn size(&self) -> u32 {
        self.members.len() as u32
    }

    /// This group's rank of world rank `w`.
    pub fn rank_of(&self, w: u32) -> Option<u32> {
        self.index.get(&w).copied()
    }

    pub fn world(&self, r: u32) -> u32 {
        self.members[r as usize]
    }

    fn check_ranks(&self, ranks: &[i32]) -> Result<()> {
        let mut seen = vec![false; self.members.len()];
        for &r in ranks {
            if r < 0 || r as usize >= self.members.len() {
                return Err(err(
                    class::RANK,
                    format!("rank {r} is not in a group of size {}", self.members.len()),
                ));
            }
            if std::mem::replace(&mut seen[r as usize], true) {
                return Err(err(class::RANK, format!("rank {r} appears twice")));
            }
        }
        Ok(())
    }

    pub fn incl(&self, ranks: &[i32]) -> Result<Arc<Group>> {
        self.check_ranks(ranks)?;
        Ok(Group::new(
            ranks.iter().map(|&r| self.members[r as usize]).collect(),
        ))
    }

    pub fn excl(&self, ranks: &[i32]) -> Result<Arc<Group>> {
        self.check_ranks(ranks)?;
        let mut drop = vec![false; self.members.len()];
        for &r in ranks {
            drop[r as usize] = true;
        }
        Ok(Group::new(
            self.members
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop[*i])
                .map(|(_, &w)| w)
                .collect(),
        ))
    }

    /// Expands `(first, last, stride)` triplets into ranks.
    pub fn expand_ranges(&self, ranges: &[[i32; 3]]) -> Result<Vec<i32>> {
        let mut out = Vec::new();
        for &[first, last, stride] in ranges {
            if stride == 0 {
                return Err(err(class::ARG, "range stride is 0"));
            }
            let mut r = first;
            while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
                out.push(r);
                r += stride;
            }
        }
        Ok(out)
    }

    pub fn union(a: &Group, b: &Group) -> Arc<Group> {
        let mut m = a.members.clone();
        m.extend(b.members.iter().filter(|w| a.rank_of(**w).is_none()));
        Group::new(m)
    }

    pub fn intersection(a: &Group, b: &Group) -> Arc<Group> {
        Group::new(
            a.members
                .iter()
                .copied()
                .filter(|w| b.rank_of(*w).is_some())
                .collect(),
        )
    }

    pub fn difference(a: &Group, b: &Group) -> Arc<Group> {
        Group::new(
            a.members
                .iter()
                .copied()
                .filter(|w| b.rank_of(*w).is_none())
                .collect(),
        )
    }

    pub fn translate(&self, ranks: &[i32], to: &Group) -> Result<Vec<i32>> {
        let mut out = Vec::with_capacity(ranks.len());
        for &r in ranks {
            if r == crate::PROC_NULL {
                out.push(crate::PROC_NULL);
                continue;
            }
            if r < 0 || r as usize >= self.members.len() {
                return Err(err(
                    class::RANK,
                    format!("rank {r} is not in a group of size {}", self.members.len()),
                ));
            }
            out.push(
                to.rank_of(self.members[r as usize])
                    .map_or(UNDEFINED, |x| x as i32),
            );
        }
        Ok(out)
    }

    pub fn compare(a: &Group, b: &Group) -> i32 {
        if a.members == b.members {
            IDENT
        } else if a.members.len() == b.members.len()
            && a.members.iter().all(|w| b.rank_of(*w).is_some())
        {
            SIMILAR
        } else {
            UNEQUAL
        }
    }
}

/// `MPI_Dims_create`: fills the zero entries of `dims` so that their product
/// times the fixed ones is `n`, as balanced as possible (non-increasing).
pub fn dims_create(n: i32, dims: &mut [i32]) -> Result<()> {
    let fixed: i64 = dims.iter().filter(|&&d| d > 0).map(|&d| d as i64).product();
    if dims.iter().any(|&d| d < 0) || n < 1 || fixed == 0 || n as i64 % fixed != 0 {
        return Err(err(
            class::DIMS,
            format!("cannot split {n} processes into dims {dims:?}"),
        ));
    }
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if free.is_empty() {
        return if fixed == n as i64 {
            Ok(())
        } else {
            Err(err(
                class::DIMS,
                format!("dims {dims:?} do not multiply to {n}"),
            ))
        };
    }
    let mut rest = (n as i64 / fixed) as i32;
    // Prime factors, largest first, each to the currently smallest free dimension.
    let mut factors = Vec::new();
    let mut p = 2;
    while rest > 1 {
        while rest % p == 0 {
            factors.push(p);
            rest /= p;
        }
        p += 1;
        if p * p > rest && rest > 1 {
            factors.push(rest);
            break;
        }
    }
    factors.sort_unstable_by(|a, b| b.cmp(a));
    let mut vals = vec![1i32; free.len()];
    for f in factors {
        let i = (0..vals.len()).min_by_key(|&i| vals[i]).expect("non-empty");
        vals[i] *= f;
    }
    vals.sort_unstable_by(|a, b| b.cmp(a));
    for (k, &i) in free.iter().enumerate() {
        dims[i] = vals[k];
    }
    Ok(())
}
