//! `MPI_Type_create_darray`: the part of a distributed global array that
//! one process of a process grid owns, as a datatype over the whole array.
//!
//! Each dimension is reduced to the runs of global indices the process owns
//! there (block, cyclic or undistributed); the type is then built like a
//! subarray, fastest-varying dimension first, as an hindexed type of the
//! runs over the previous dimensions' type stretched to one whole row. The
//! result has the lower bound of `old` and the extent of the whole global
//! array, as the standard asks.

use super::{displacement, Combiner, Datatype, MAX_BLOCKS};
use crate::error::{class, err, Result};
use std::sync::Arc;

/// How one dimension is distributed over the process grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distrib {
    /// Not distributed: the dimension's process count must be 1.
    None,
    /// Blocks of `darg` elements (None = `MPI_DISTRIBUTE_DFLT_DARG`: ceil(gsize / psize)).
    Block(Option<i64>),
    /// Blocks of `darg` elements dealt round-robin (None = 1).
    Cyclic(Option<i64>),
}

/// The (start, length) runs of global indices that process coordinate
/// `coord` of `psize` owns in a dimension of `gsize` elements.
pub fn owned_runs(gsize: i64, psize: i64, coord: i64, d: Distrib) -> Result<Vec<(i64, i64)>> {
    let bad = |why: String| Err(err(class::ARG, format!("darray: {why}")));
    match d {
        Distrib::None => {
            if psize != 1 {
                return bad(format!(
                    "an undistributed dimension needs a process count of 1, not {psize}"
                ));
            }
            Ok(vec![(0, gsize)])
        }
        Distrib::Block(darg) => {
            let b = match darg {
                None => (gsize + psize - 1) / psize,
                Some(b) if b > 0 => b,
                Some(b) => return bad(format!("block size {b} is not positive")),
            };
            if (b as i128) * (psize as i128) < gsize as i128 {
                return bad(format!(
                    "blocks of {b} on {psize} processes do not cover {gsize} elements"
                ));
            }
            let start = coord as i128 * b as i128;
            let len = (gsize as i128 - start).clamp(0, b as i128) as i64;
            Ok(if len > 0 {
                vec![(start as i64, len)]
            } else {
                vec![]
            })
        }
        Distrib::Cyclic(darg) => {
            let b = match darg {
                None => 1,
                Some(b) if b > 0 => b,
                Some(b) => return bad(format!("cyclic block size {b} is not positive")),
            };
            let step = b as i128 * psize as i128;
            let first = coord as i128 * b as i128;
            let n = if first >= gsize as i128 {
                0
            } else {
                (gsize as i128 - first + step - 1) / step
            };
            if n > MAX_BLOCKS as i128 {
                return Err(err(
                    class::COUNT,
                    format!("darray: {n} cyclic blocks in one dimension are too many"),
                ));
            }
            Ok((0..n)
                .map(|k| {
                    let s = first + k * step;
                    (s as i64, (gsize as i128 - s).min(b as i128) as i64)
                })
                .collect())
        }
    }
}

impl Datatype {
    /// `MPI_Type_create_darray` for process `rank` of `size`, on a process
    /// grid of `psizes` (always row-major, whatever `order_c` says of the array).
    pub fn darray(
        size: i64,
        rank: i64,
        gsizes: &[i64],
        distribs: &[Distrib],
        psizes: &[i64],
        order_c: bool,
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        let n = gsizes.len();
        if n == 0 || distribs.len() != n || psizes.len() != n {
            return Err(err(
                class::ARG,
                "darray: ndims must be positive and every array that long",
            ));
        }
        if size <= 0 || rank < 0 || rank >= size {
            return Err(err(
                class::ARG,
                format!("darray: rank {rank} is not a process of {size}"),
            ));
        }
        if let Some(d) = (0..n).find(|&d| gsizes[d] <= 0 || psizes[d] <= 0) {
            return Err(err(
                class::ARG,
                format!(
                    "darray: dimension {d}: gsize {} and psize {} must be positive",
                    gsizes[d], psizes[d]
                ),
            ));
        }
        // Checked: a thousand dimensions of 2^31 processes overflow even an i128.
        let grid = psizes
            .iter()
            .try_fold(1i128, |acc, &p| acc.checked_mul(p as i128));
        if grid != Some(size as i128) {
            return Err(err(
                class::ARG,
                format!("darray: the process grid {psizes:?} does not have {size} processes"),
            ));
        }
        // Row-major coordinates of `rank` in the process grid.
        let mut coords = vec![0i64; n];
        let mut r = rank;
        for d in (0..n).rev() {
            coords[d] = r % psizes[d];
            r /= psizes[d];
        }
        let runs = (0..n)
            .map(|d| owned_runs(gsizes[d], psizes[d], coords[d], distribs[d]))
            .collect::<Result<Vec<_>>>()?;
        let order: Vec<usize> = if order_c {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let mut t = old.clone();
        let mut stride = old.extent as i128;
        for &d in &order {
            let lens: Vec<i64> = runs[d].iter().map(|r| r.1).collect();
            let displs = runs[d]
                .iter()
                .map(|r| displacement(r.0 as i128 * stride))
                .collect::<Result<Vec<_>>>()?;
            t = Self::hindexed(&lens, &displs, &t)?;
            stride *= gsizes[d] as i128;
            t = Self::resized(old.lb, displacement(stride)?, &t)?;
        }
        let c = Combiner::Darray {
            size,
            rank,
            gsizes: gsizes.to_vec(),
            distribs: distribs.to_vec(),
            psizes: psizes.to_vec(),
            order_c,
            old: old.clone(),
        };
        Ok(Self::finish(
            t.blocks.clone(),
            t.size,
            old.lb,
            t.extent,
            old.align,
            old.basic,
            t.nbasic,
            c,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Basic, Block};

    fn int() -> Arc<Datatype> {
        Datatype::predefined(Basic::I32, "MPI_INT")
    }

    #[test]
    fn block_and_cyclic_runs() {
        // 10 elements on 3 processes: blocks of 4, 4, 2.
        assert_eq!(
            owned_runs(10, 3, 0, Distrib::Block(None)).unwrap(),
            vec![(0, 4)]
        );
        assert_eq!(
            owned_runs(10, 3, 2, Distrib::Block(None)).unwrap(),
            vec![(8, 2)]
        );
        // Blocks of 5 on 3 processes: the third owns nothing.
        assert_eq!(
            owned_runs(10, 3, 2, Distrib::Block(Some(5))).unwrap(),
            vec![]
        );
        assert_eq!(
            owned_runs(10, 3, 1, Distrib::Block(Some(3)))
                .unwrap_err()
                .class,
            class::ARG
        );
        // Cyclic(2) of 10 on 3: process 1 owns 2-3 and 8-9.
        assert_eq!(
            owned_runs(10, 3, 1, Distrib::Cyclic(Some(2))).unwrap(),
            vec![(2, 2), (8, 2)]
        );
        assert_eq!(
            owned_runs(5, 2, 0, Distrib::Cyclic(None)).unwrap(),
            vec![(0, 1), (2, 1), (4, 1)]
        );
        assert_eq!(
            owned_runs(5, 2, 0, Distrib::None).unwrap_err().class,
            class::ARG
        );
    }

    #[test]
    fn a_2d_block_darray_is_the_local_subarray() {
        // 4x6 ints on a 2x2 grid, C order: rank 3 owns rows 2-3, columns 3-5.
        let b = Distrib::Block(None);
        let t = Datatype::darray(4, 3, &[4, 6], &[b, b], &[2, 2], true, &int()).unwrap();
        assert_eq!(t.size, 4 * 6);
        assert_eq!((t.lb, t.extent), (0, 4 * 24));
        assert_eq!(
            t.blocks,
            vec![
                Block {
                    off: (2 * 6 + 3) * 4,
                    len: 12
                },
                Block {
                    off: (3 * 6 + 3) * 4,
                    len: 12
                }
            ]
        );
    }

    #[test]
    fn fortran_order_makes_the_first_dimension_fastest() {
        // 4x2 ints, Fortran order, dimension 0 cyclic on 2 processes, dimension 1 whole.
        let t = Datatype::darray(
            2,
            1,
            &[4, 2],
            &[Distrib::Cyclic(None), Distrib::None],
            &[2, 1],
            false,
            &int(),
        )
        .unwrap();
        // Elements (1,0), (3,0), (1,1), (3,1) at column-major offsets 1, 3, 5, 7.
        let offs: Vec<isize> = t.blocks.iter().map(|b| b.off / 4).collect();
        assert_eq!(offs, vec![1, 3, 5, 7]);
        assert_eq!(t.extent, 8 * 4);
    }

    #[test]
    fn bad_grids_are_refused() {
        let b = Distrib::Block(None);
        let e = |r: Result<Arc<Datatype>>| r.unwrap_err().class;
        assert_eq!(
            e(Datatype::darray(4, 0, &[4], &[b], &[3], true, &int())),
            class::ARG
        );
        assert_eq!(
            e(Datatype::darray(4, 4, &[4], &[b], &[4], true, &int())),
            class::ARG
        );
        assert_eq!(
            e(Datatype::darray(1, 0, &[0], &[b], &[1], true, &int())),
            class::ARG
        );
        assert_eq!(
            e(Datatype::darray(1, 0, &[], &[], &[], true, &int())),
            class::ARG
        );
    }
}
