//! Datatypes: predefined ones and derived ones, compiled to a block list.
//!
//! A datatype's type map is flattened once, when it is built, into the
//! `(offset, length)` blocks of one element, with neighbours that touch in
//! memory merged. Packing is then a loop of `memcpy`s over those blocks (the
//! "compiled" form), never an interpretation of the constructor tree per
//! element. Contiguous types (one block, no holes between elements) are
//! never packed: the send path hands the user's memory to the runtime as is.

use crate::error::{class, err, Result};
use crate::mem;

pub mod darray;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The element types reductions understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basic {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    /// x87 80-bit long double in 16 bytes; moved but not reduced arithmetically.
    LongDouble,
    /// Floating types we can move but not compute on (REAL2, REAL16).
    OpaqueFloat(u8),
    C32,
    C64,
    CLongDouble,
    /// C `_Bool`/C++ `bool` (1 byte) and Fortran LOGICAL of n bytes.
    Bool,
    Logical(u8),
    Byte,
    Char,
    Packed,
    /// `MINLOC`/`MAXLOC` pairs: value then `int` index.
    FloatInt,
    DoubleInt,
    LongInt,
    TwoInt,
    ShortInt,
    LongDoubleInt,
    TwoF32,
    TwoF64,
    TwoI32,
}

impl Basic {
    /// The sizes of the basic elements one value holds, in type-map order:
    /// a pair type (`MPI_DOUBLE_INT`, `MPI_2INT`, ...) holds two, as MPICH
    /// and Open MPI count them for `MPI_Get_elements`; the others one.
    fn element_sizes(self) -> (usize, Option<usize>) {
        use Basic::*;
        match self {
            FloatInt | TwoInt | TwoF32 | TwoI32 => (4, Some(4)),
            DoubleInt | LongInt => (8, Some(4)),
            TwoF64 => (8, Some(8)),
            ShortInt => (2, Some(4)),
            LongDoubleInt => (16, Some(4)),
            b => (b.shape().0, None),
        }
    }

    /// Number of basic elements in one value (see [`Basic::element_sizes`]).
    fn elements(self) -> usize {
        1 + self.element_sizes().1.is_some() as usize
    }

    /// (size, extent, alignment, blocks) of one element in memory.
    fn shape(self) -> (usize, usize, usize, Vec<Block>) {
        use Basic::*;
        let one = |n: usize| (n, n, n.min(16), vec![Block { off: 0, len: n }]);
        match self {
            I8 | U8 | Byte | Char | Packed | Bool => one(1),
            I16 | U16 => one(2),
            I32 | U32 | F32 => one(4),
            I64 | U64 | F64 | C32 => (
                8,
                8,
                if self == C32 { 4 } else { 8 },
                vec![Block { off: 0, len: 8 }],
            ),
            C64 => (16, 16, 8, vec![Block { off: 0, len: 16 }]),
            LongDouble => one(16),
            CLongDouble => (32, 32, 16, vec![Block { off: 0, len: 32 }]),
            OpaqueFloat(n) | Logical(n) => one(n as usize),
            FloatInt => (8, 8, 4, vec![Block { off: 0, len: 8 }]),
            TwoInt | TwoF32 | TwoI32 => (8, 8, 4, vec![Block { off: 0, len: 8 }]),
            TwoF64 => (16, 16, 8, vec![Block { off: 0, len: 16 }]),
            DoubleInt | LongInt => (12, 16, 8, vec![Block { off: 0, len: 12 }]),
            ShortInt => (
                6,
                8,
                4,
                vec![Block { off: 0, len: 2 }, Block { off: 4, len: 4 }],
            ),
            LongDoubleInt => (20, 32, 16, vec![Block { off: 0, len: 20 }]),
        }
    }
}

/// `len` bytes at `off` from the element's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub off: isize,
    pub len: usize,
}

/// How a datatype was made (for `MPI_Type_get_envelope`/`get_contents`).
#[derive(Debug, Clone)]
pub enum Combiner {
    Named,
    Dup(Arc<Datatype>),
    Contiguous {
        count: i64,
        old: Arc<Datatype>,
    },
    Vector {
        count: i64,
        blocklen: i64,
        stride: i64,
        old: Arc<Datatype>,
    },
    Hvector {
        count: i64,
        blocklen: i64,
        stride: isize,
        old: Arc<Datatype>,
    },
    Indexed {
        blocklens: Vec<i64>,
        displs: Vec<i64>,
        old: Arc<Datatype>,
    },
    Hindexed {
        blocklens: Vec<i64>,
        displs: Vec<isize>,
        old: Arc<Datatype>,
    },
    IndexedBlock {
        blocklen: i64,
        displs: Vec<i64>,
        old: Arc<Datatype>,
    },
    HindexedBlock {
        blocklen: i64,
        displs: Vec<isize>,
        old: Arc<Datatype>,
    },
    Struct {
        blocklens: Vec<i64>,
        displs: Vec<isize>,
        types: Vec<Arc<Datatype>>,
    },
    Subarray {
        sizes: Vec<i64>,
        subsizes: Vec<i64>,
        starts: Vec<i64>,
        order_c: bool,
        old: Arc<Datatype>,
    },
    Resized {
        lb: isize,
        extent: isize,
        old: Arc<Datatype>,
    },
    Darray {
        size: i64,
        rank: i64,
        gsizes: Vec<i64>,
        distribs: Vec<darray::Distrib>,
        psizes: Vec<i64>,
        order_c: bool,
        old: Arc<Datatype>,
    },
    /// `MPI_Type_create_f90_real/complex/integer` with the program's
    /// precision and range (`MPI_UNDEFINED` kept as given; `p` unused for INTEGER).
    F90 {
        kind: F90Kind,
        p: i32,
        r: i32,
    },
}

/// Which `MPI_Type_create_f90_*` made a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F90Kind {
    Real,
    Complex,
    Integer,
}

/// A datatype: its size, bounds, compiled blocks and the element type it is made of.
#[derive(Debug)]
pub struct Datatype {
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    pub align: usize,
    /// One element's blocks, in type-map order.
    pub blocks: Vec<Block>,
    /// One block starting at `true_lb`, and elements follow each other without holes.
    pub contig: bool,
    /// The single basic type every element is made of, if there is one.
    pub basic: Option<Basic>,
    /// Number of basic elements in one element.
    pub nbasic: usize,
    pub predefined: bool,
    pub committed: AtomicBool,
    pub combiner: Combiner,
    pub name: Mutex<String>,
    /// The C handle `capi` gave this datatype (for callbacks that need it back).
    pub handle: AtomicUsize,
    pub attrs: Mutex<crate::attr::AttrSet>,
}

impl Datatype {
    /// A predefined datatype.
    pub fn predefined(b: Basic, name: &str) -> Arc<Datatype> {
        let (size, ext, align, blocks) = b.shape();
        let true_ext = blocks.last().map_or(0, |l| l.off + l.len as isize);
        Arc::new(Datatype {
            size,
            lb: 0,
            extent: ext as isize,
            true_lb: 0,
            true_extent: true_ext,
            align,
            contig: blocks.len() == 1 && size == ext,
            blocks,
            basic: Some(b),
            nbasic: b.elements(),
            predefined: true,
            committed: AtomicBool::new(true),
            combiner: Combiner::Named,
            name: Mutex::new(name.to_string()),
            handle: AtomicUsize::new(0),
            attrs: Default::default(),
        })
    }

    pub fn is_committed(&self) -> bool {
        self.committed.load(Ordering::Relaxed)
    }

    pub fn commit(&self) {
        self.committed.store(true, Ordering::Relaxed);
    }

    pub fn ub(&self) -> isize {
        self.lb + self.extent
    }

    /// Bytes of `count` elements when packed.
    pub fn packed_size(&self, count: usize) -> usize {
        self.size * count
    }

    /// Packs `count` elements found at address `addr` into `out` (exactly `count * size` bytes).
    ///
    /// # Safety
    /// The memory the type map of `count` elements at `addr` covers must be readable.
    pub unsafe fn pack(&self, addr: usize, count: usize, out: &mut [u8]) {
        debug_assert_eq!(out.len(), self.size * count);
        if self.contig {
            mem::read(addr.wrapping_add_signed(self.true_lb), out);
            return;
        }
        let mut o = 0;
        for i in 0..count {
            let base = addr.wrapping_add_signed(i as isize * self.extent);
            for b in &self.blocks {
                mem::read(base.wrapping_add_signed(b.off), &mut out[o..o + b.len]);
                o += b.len;
            }
        }
    }

    /// Unpacks `data` (at most `count * size` bytes, in packed order) into `count` elements at `addr`.
    ///
    /// # Safety
    /// The memory the type map of `count` elements at `addr` covers must be writable.
    pub unsafe fn unpack(&self, addr: usize, count: usize, data: &[u8]) {
        let data = &data[..data.len().min(self.size * count)];
        if self.contig {
            mem::write(addr.wrapping_add_signed(self.true_lb), data);
            return;
        }
        let mut o = 0;
        'outer: for i in 0..count {
            let base = addr.wrapping_add_signed(i as isize * self.extent);
            for b in &self.blocks {
                if o >= data.len() {
                    break 'outer;
                }
                let n = b.len.min(data.len() - o);
                mem::write(base.wrapping_add_signed(b.off), &data[o..o + n]);
                o += n;
            }
        }
    }

    /// Number of basic elements in `bytes` packed bytes (for `MPI_Get_elements`):
    /// the whole elements' count, plus the basic elements of the partial one
    /// that arrived whole (a struct of int, int, double received 8 of 16
    /// bytes: 2). None if the data ends inside a basic element.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        let whole = bytes / self.size;
        let rest = bytes % self.size;
        let (n, used) = self.leading_elements(rest);
        (used == rest).then_some(whole * self.nbasic + n)
    }

    /// (basic elements, their bytes) of the longest run of whole basic
    /// elements from the start of one element that fits in `bytes` (less
    /// than its size): walks the constructor tree, so that a type of 2^40
    /// elements costs its depth, not its length.
    fn leading_elements(&self, bytes: usize) -> (usize, usize) {
        let run = |parts: &mut dyn Iterator<Item = (usize, &Arc<Datatype>)>| {
            let (mut n, mut used) = (0usize, 0usize);
            for (cnt, t) in parts {
                if t.size == 0 || cnt == 0 {
                    continue;
                }
                let whole = cnt.min((bytes - used) / t.size);
                n += whole * t.nbasic;
                used += whole * t.size;
                if whole < cnt {
                    let (pn, pu) = t.leading_elements(bytes - used);
                    return (n + pn, used + pu);
                }
            }
            (n, used)
        };
        let u = |v: i64| v.max(0) as usize;
        match &self.combiner {
            Combiner::Named | Combiner::F90 { .. } => {
                let Some(b) = self.basic else { return (0, 0) };
                match b.element_sizes() {
                    (a, Some(c)) if bytes >= a + c => (2, a + c),
                    (a, _) if bytes >= a => (1, a),
                    _ => (0, 0),
                }
            }
            Combiner::Dup(old) | Combiner::Resized { old, .. } => old.leading_elements(bytes),
            Combiner::Contiguous { count, old } => run(&mut std::iter::once((u(*count), old))),
            Combiner::Vector {
                count,
                blocklen,
                old,
                ..
            } => run(&mut std::iter::once((u(*count) * u(*blocklen), old))),
            Combiner::Hvector {
                count,
                blocklen,
                old,
                ..
            } => run(&mut std::iter::once((u(*count) * u(*blocklen), old))),
            Combiner::Indexed { blocklens, old, .. }
            | Combiner::Hindexed { blocklens, old, .. } => {
                run(&mut blocklens.iter().map(|&b| (u(b), old)))
            }
            Combiner::IndexedBlock {
                blocklen,
                displs,
                old,
            } => run(&mut std::iter::once((displs.len() * u(*blocklen), old))),
            Combiner::HindexedBlock {
                blocklen,
                displs,
                old,
            } => run(&mut std::iter::once((displs.len() * u(*blocklen), old))),
            Combiner::Struct {
                blocklens, types, ..
            } => run(&mut blocklens.iter().zip(types).map(|(&b, t)| (u(b), t))),
            Combiner::Subarray { subsizes, old, .. } => run(&mut std::iter::once((
                subsizes.iter().map(|&s| u(s)).product(),
                old,
            ))),
            // A darray holds a whole number of `old` elements (its local block).
            Combiner::Darray { old, .. } => run(&mut std::iter::once((
                self.size.checked_div(old.size).unwrap_or(0),
                old,
            ))),
        }
    }

    fn derived(
        pieces: &[(isize, usize, &Arc<Datatype>)],
        combiner: Combiner,
        is_struct: bool,
    ) -> Result<Arc<Datatype>> {
        let mut blocks: Vec<Block> = Vec::new();
        let mut size = 0usize;
        let mut nbasic = 0usize;
        let mut basic: Option<Option<Basic>> = None;
        // Bounds in i128: displacement + (count - 1) * extent of any isize
        // and usize values fits, and is checked against isize at the end.
        let mut lb = i128::MAX;
        let mut ub = i128::MIN;
        let mut align = 1;
        for &(disp, cnt, old) in pieces {
            if cnt == 0 {
                continue;
            }
            align = align.max(old.align);
            basic = Some(match basic {
                None => old.basic,
                Some(b) if b == old.basic => b,
                Some(_) => None,
            });
            let ext = old.extent as i128;
            let first = disp as i128 + old.lb as i128;
            let last = first + (cnt as i128 - 1) * ext;
            lb = lb.min(first.min(last));
            ub = ub.max(first.max(last) + ext);
            size = cnt
                .checked_mul(old.size)
                .and_then(|s| s.checked_add(size))
                .filter(|&s| s <= isize::MAX as usize)
                .ok_or_else(|| too_big("size"))?;
            nbasic = cnt
                .checked_mul(old.nbasic)
                .and_then(|n| n.checked_add(nbasic))
                .ok_or_else(|| too_big("number of elements"))?;
            // One block that fills its extent: the copies touch, one block
            // in all (a contiguous type of 2^40 elements is not a loop of 2^40).
            if let [b] = old.blocks.as_slice() {
                if b.len as i128 == ext {
                    push_block(&mut blocks, disp as i128 + b.off as i128, cnt * old.size)?;
                    continue;
                }
            }
            let more = cnt
                .checked_mul(old.blocks.len())
                .filter(|&n| n <= MAX_BLOCKS - blocks.len().min(MAX_BLOCKS))
                .ok_or_else(too_many_blocks)?;
            blocks.reserve(more.min(1 << 16));
            for i in 0..cnt {
                let base = disp as i128 + i as i128 * ext;
                for b in &old.blocks {
                    push_block(&mut blocks, base + b.off as i128, b.len)?;
                }
            }
        }
        if lb == i128::MAX {
            lb = 0;
            ub = 0;
        }
        if is_struct {
            let a = align as i128;
            let ext = ub - lb;
            ub = lb + (ext + a - 1) / a * a;
        }
        let lb = isize::try_from(lb).map_err(|_| too_big("lower bound"))?;
        let extent = isize::try_from(ub - lb as i128).map_err(|_| too_big("extent"))?;
        lb.checked_add(extent)
            .ok_or_else(|| too_big("upper bound"))?;
        Ok(Self::finish(
            blocks,
            size,
            lb,
            extent,
            align,
            basic.flatten(),
            nbasic,
            combiner,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        blocks: Vec<Block>,
        size: usize,
        lb: isize,
        extent: isize,
        align: usize,
        basic: Option<Basic>,
        nbasic: usize,
        combiner: Combiner,
    ) -> Arc<Datatype> {
        let true_lb = blocks.iter().map(|b| b.off).min().unwrap_or(0);
        let true_ub = blocks
            .iter()
            .map(|b| b.off.saturating_add(b.len as isize))
            .max()
            .unwrap_or(0);
        let contig = blocks.len() == 1 && blocks[0].off == true_lb && size as isize == extent
            || (blocks.is_empty() && size == 0);
        Arc::new(Datatype {
            size,
            lb,
            extent,
            true_lb,
            true_extent: true_ub.saturating_sub(true_lb),
            align,
            contig,
            blocks,
            basic,
            nbasic,
            predefined: false,
            committed: AtomicBool::new(false),
            combiner,
            name: Mutex::new(String::new()),
            handle: AtomicUsize::new(0),
            attrs: Default::default(),
        })
    }

    pub fn contiguous(count: i64, old: &Arc<Datatype>) -> Result<Arc<Datatype>> {
        nonneg(count, "count")?;
        Self::derived(
            &[(0, count as usize, old)],
            Combiner::Contiguous {
                count,
                old: old.clone(),
            },
            false,
        )
    }

    /// `count * blocklen` elements of `old` one after the other (a vector
    /// whose stride equals its block length), built as one piece: never a
    /// list of `count` pieces, so a vector of 2^40 touching blocks costs
    /// what a contiguous type does.
    fn run_of(
        count: i64,
        blocklen: i64,
        old: &Arc<Datatype>,
        combiner: Combiner,
    ) -> Result<Arc<Datatype>> {
        let n = (count as u64)
            .checked_mul(blocklen as u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| too_big("number of elements"))?;
        Self::derived(&[(0, n, old)], combiner, false)
    }

    pub fn vector(
        count: i64,
        blocklen: i64,
        stride: i64,
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        nonneg(count, "count")?;
        nonneg(blocklen, "blocklength")?;
        let combiner = Combiner::Vector {
            count,
            blocklen,
            stride,
            old: old.clone(),
        };
        if stride == blocklen {
            // The blocks touch: the type map is that of one contiguous run.
            return Self::run_of(count, blocklen, old, combiner);
        }
        pieces_fit(count, blocklen)?;
        let pieces = (0..count)
            .map(|i| {
                let d = i as i128 * stride as i128 * old.extent as i128;
                Ok((displacement(d)?, blocklen as usize, old))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::derived(&pieces, combiner, false)
    }

    pub fn hvector(
        count: i64,
        blocklen: i64,
        stride: isize,
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        nonneg(count, "count")?;
        nonneg(blocklen, "blocklength")?;
        let combiner = Combiner::Hvector {
            count,
            blocklen,
            stride,
            old: old.clone(),
        };
        if stride as i128 == blocklen as i128 * old.extent as i128 {
            // The blocks touch: the type map is that of one contiguous run.
            return Self::run_of(count, blocklen, old, combiner);
        }
        pieces_fit(count, blocklen)?;
        let pieces = (0..count)
            .map(|i| {
                let d = i as i128 * stride as i128;
                Ok((displacement(d)?, blocklen as usize, old))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::derived(&pieces, combiner, false)
    }

    pub fn indexed(
        blocklens: &[i64],
        displs: &[i64],
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        let mut pieces = Vec::with_capacity(blocklens.len());
        for (&b, &d) in blocklens.iter().zip(displs) {
            nonneg(b, "blocklength")?;
            pieces.push((
                displacement(d as i128 * old.extent as i128)?,
                b as usize,
                old,
            ));
        }
        let c = Combiner::Indexed {
            blocklens: blocklens.to_vec(),
            displs: displs.to_vec(),
            old: old.clone(),
        };
        Self::derived(&pieces, c, false)
    }

    pub fn hindexed(
        blocklens: &[i64],
        displs: &[isize],
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        let mut pieces = Vec::with_capacity(blocklens.len());
        for (&b, &d) in blocklens.iter().zip(displs) {
            nonneg(b, "blocklength")?;
            pieces.push((d, b as usize, old));
        }
        let c = Combiner::Hindexed {
            blocklens: blocklens.to_vec(),
            displs: displs.to_vec(),
            old: old.clone(),
        };
        Self::derived(&pieces, c, false)
    }

    pub fn indexed_block(
        blocklen: i64,
        displs: &[i64],
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        nonneg(blocklen, "blocklength")?;
        let pieces = displs
            .iter()
            .map(|&d| {
                let d = displacement(d as i128 * old.extent as i128)?;
                Ok((d, blocklen as usize, old))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::derived(
            &pieces,
            Combiner::IndexedBlock {
                blocklen,
                displs: displs.to_vec(),
                old: old.clone(),
            },
            false,
        )
    }

    pub fn hindexed_block(
        blocklen: i64,
        displs: &[isize],
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        nonneg(blocklen, "blocklength")?;
        let pieces: Vec<_> = displs
            .iter()
            .map(|&d| (d, blocklen as usize, old))
            .collect();
        Self::derived(
            &pieces,
            Combiner::HindexedBlock {
                blocklen,
                displs: displs.to_vec(),
                old: old.clone(),
            },
            false,
        )
    }

    pub fn create_struct(
        blocklens: &[i64],
        displs: &[isize],
        types: &[Arc<Datatype>],
    ) -> Result<Arc<Datatype>> {
        let mut pieces = Vec::with_capacity(blocklens.len());
        for i in 0..blocklens.len() {
            nonneg(blocklens[i], "blocklength")?;
            pieces.push((displs[i], blocklens[i] as usize, &types[i]));
        }
        let c = Combiner::Struct {
            blocklens: blocklens.to_vec(),
            displs: displs.to_vec(),
            types: types.to_vec(),
        };
        Self::derived(&pieces, c, true)
    }

    pub fn resized(lb: isize, extent: isize, old: &Arc<Datatype>) -> Result<Arc<Datatype>> {
        lb.checked_add(extent)
            .ok_or_else(|| too_big("upper bound"))?;
        let c = Combiner::Resized {
            lb,
            extent,
            old: old.clone(),
        };
        Ok(Self::finish(
            old.blocks.clone(),
            old.size,
            lb,
            extent,
            old.align,
            old.basic,
            old.nbasic,
            c,
        ))
    }

    pub fn dup(old: &Arc<Datatype>) -> Arc<Datatype> {
        let t = Self::finish(
            old.blocks.clone(),
            old.size,
            old.lb,
            old.extent,
            old.align,
            old.basic,
            old.nbasic,
            Combiner::Dup(old.clone()),
        );
        if old.is_committed() {
            t.commit();
        }
        t
    }

    /// `MPI_Type_create_subarray`: built as nested hvectors, then resized to the full array.
    pub fn subarray(
        sizes: &[i64],
        subsizes: &[i64],
        starts: &[i64],
        order_c: bool,
        old: &Arc<Datatype>,
    ) -> Result<Arc<Datatype>> {
        let n = sizes.len();
        if n == 0 || subsizes.len() != n || starts.len() != n {
            return Err(err(
                class::ARG,
                "subarray: ndims must be positive and the arrays that long",
            ));
        }
        for d in 0..n {
            if sizes[d] <= 0
                || subsizes[d] <= 0
                || starts[d] < 0
                || subsizes[d] + starts[d] > sizes[d]
            {
                return Err(err(
                    class::ARG,
                    format!(
                        "subarray: dimension {d}: size {} subsize {} start {} do not fit",
                        sizes[d], subsizes[d], starts[d]
                    ),
                ));
            }
        }
        // Dimensions from fastest-varying to slowest.
        let order: Vec<usize> = if order_c {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let mut t = Self::contiguous(subsizes[order[0]], old)?;
        let mut stride = displacement(old.extent as i128 * sizes[order[0]] as i128)?;
        let mut disp = displacement(starts[order[0]] as i128 * old.extent as i128)?;
        for &d in &order[1..] {
            t = Self::hvector(subsizes[d], 1, stride, &t)?;
            disp = displacement(disp as i128 + starts[d] as i128 * stride as i128)?;
            stride = displacement(stride as i128 * sizes[d] as i128)?;
        }
        let full = stride; // extent of the whole array
        let shifted = Self::derived(&[(disp, 1, &t)], Combiner::Named, false)?;
        let c = Combiner::Subarray {
            sizes: sizes.to_vec(),
            subsizes: subsizes.to_vec(),
            starts: starts.to_vec(),
            order_c,
            old: old.clone(),
        };
        Ok(Self::finish(
            shifted.blocks.clone(),
            shifted.size,
            old.lb,
            full,
            old.align,
            old.basic,
            shifted.nbasic,
            c,
        ))
    }
}

/// Most blocks a derived datatype's flattened type map may have (16 bytes
/// each: 64 MiB). Runs that touch are merged as they are built (a contiguous
/// type, or a vector whose stride equals its block length, of any count is
/// one block), so only a type of that many separate pieces (a vector of
/// 2^40 strided elements) reaches the bound; it is refused with
/// `MPI_ERR_COUNT` rather than flattened into a multi-GiB list.
pub const MAX_BLOCKS: usize = 1 << 22;

#[cold]
fn too_big(what: &str) -> crate::error::MpiError {
    err(
        class::COUNT,
        format!("the datatype's {what} does not fit in the address space"),
    )
}

#[cold]
fn too_many_blocks() -> crate::error::MpiError {
    err(
        class::COUNT,
        format!("the datatype would have more than {MAX_BLOCKS} separate pieces"),
    )
}

/// Appends a block at byte offset `off`, merged with the last one if they touch.
fn push_block(blocks: &mut Vec<Block>, off: i128, len: usize) -> Result<()> {
    let off = displacement(off)?;
    match blocks.last_mut() {
        Some(l) if l.off.checked_add(l.len as isize) == Some(off) => l.len += len,
        _ => blocks.push(Block { off, len }),
    }
    Ok(())
}

/// A byte displacement computed from the caller's numbers, if it fits.
fn displacement(d: i128) -> Result<isize> {
    isize::try_from(d).map_err(|_| too_big("displacement"))
}

/// Refuses `count` pieces of `blocklen` before a vector of them is built.
fn pieces_fit(count: i64, blocklen: i64) -> Result<()> {
    if blocklen > 0 && count as u64 > MAX_BLOCKS as u64 {
        return Err(too_many_blocks());
    }
    Ok(())
}

fn nonneg(v: i64, what: &str) -> Result<()> {
    if v < 0 {
        return Err(err(class::COUNT, format!("{what} {v} is negative")));
    }
    Ok(())
}

#[cfg(test)]
#[path = "datatype/tests.rs"]
mod tests;
