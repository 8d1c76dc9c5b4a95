//! Lowered fixed-part programs: what the interpreter (and the JIT) actually
//! run for a plan's fixed part.
//!
//! A plan's operations are lowered once, at plan build time, into single
//! scalar moves of 1, 2, 4, 8 or 16 bytes — plain, byte-swapped, zero- or
//! sign-extending — and zero stores for the native record's gaps (padding,
//! missing fields). Copies of up to 128 bytes become 16-byte moves with an
//! overlapping tail (15 bytes: two 8-byte moves, not 8+4+2+1), and a move
//! followed by a gap is widened to cover it (a 4-byte `int` before 4 bytes
//! of padding becomes one zero-extending 8-byte store). The moves are then
//! grouped by kind, so running the program is one branch per *kind* and a
//! tight loop of loads and stores per group, instead of one dispatch per
//! field. Everything else (long runs, narrowing checks, float conversions,
//! declared defaults, loops) stays an [`Op`] in `rest`, run by the
//! general executor afterwards. The destinations of all of these are
//! disjoint, so their order does not matter.

use crate::plan::Op;

/// Kind of a lowered move: `(load width, store width)` and how the loaded
/// value becomes the stored one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum K {
    M1,
    M2,
    M4,
    M8,
    M16,
    /// Byte-swapped move.
    S2,
    S4,
    S8,
    /// Zero store (no load).
    Z1,
    Z2,
    Z4,
    Z8,
    Z16,
    /// Zero-extending move: load `a` bytes, store `b` (`Uab`).
    U12,
    U14,
    U18,
    U24,
    U28,
    U48,
    /// Byte-swapped load, then zero-extended.
    V24,
    V28,
    V48,
    /// Sign-extending move.
    I12,
    I14,
    I18,
    I24,
    I28,
    I48,
}

/// How a loaded value is turned into the stored one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ext {
    Move,
    Swap,
    Zero,
    ZeroExtend,
    SwapZeroExtend,
    SignExtend,
}

impl K {
    /// (bytes loaded, bytes stored, conversion)
    pub(crate) fn shape(self) -> (u8, u8, Ext) {
        use Ext::*;
        match self {
            K::M1 => (1, 1, Move),
            K::M2 => (2, 2, Move),
            K::M4 => (4, 4, Move),
            K::M8 => (8, 8, Move),
            K::M16 => (16, 16, Move),
            K::S2 => (2, 2, Swap),
            K::S4 => (4, 4, Swap),
            K::S8 => (8, 8, Swap),
            K::Z1 => (0, 1, Zero),
            K::Z2 => (0, 2, Zero),
            K::Z4 => (0, 4, Zero),
            K::Z8 => (0, 8, Zero),
            K::Z16 => (0, 16, Zero),
            K::U12 => (1, 2, ZeroExtend),
            K::U14 => (1, 4, ZeroExtend),
            K::U18 => (1, 8, ZeroExtend),
            K::U24 => (2, 4, ZeroExtend),
            K::U28 => (2, 8, ZeroExtend),
            K::U48 => (4, 8, ZeroExtend),
            K::V24 => (2, 4, SwapZeroExtend),
            K::V28 => (2, 8, SwapZeroExtend),
            K::V48 => (4, 8, SwapZeroExtend),
            K::I12 => (1, 2, SignExtend),
            K::I14 => (1, 4, SignExtend),
            K::I18 => (1, 8, SignExtend),
            K::I24 => (2, 4, SignExtend),
            K::I28 => (2, 8, SignExtend),
            K::I48 => (4, 8, SignExtend),
        }
    }

    fn of(load: u8, store: u8, ext: Ext) -> Option<K> {
        use Ext::*;
        Some(match (load, store, ext) {
            (1, 1, Move | Swap) => K::M1,
            (2, 2, Move) => K::M2,
            (4, 4, Move) => K::M4,
            (8, 8, Move) => K::M8,
            (16, 16, Move) => K::M16,
            (2, 2, Swap) => K::S2,
            (4, 4, Swap) => K::S4,
            (8, 8, Swap) => K::S8,
            (1, 2, ZeroExtend | SwapZeroExtend) => K::U12,
            (1, 4, ZeroExtend | SwapZeroExtend) => K::U14,
            (1, 8, ZeroExtend | SwapZeroExtend) => K::U18,
            (2, 4, ZeroExtend) => K::U24,
            (2, 8, ZeroExtend) => K::U28,
            (4, 8, ZeroExtend) => K::U48,
            (2, 4, SwapZeroExtend) => K::V24,
            (2, 8, SwapZeroExtend) => K::V28,
            (4, 8, SwapZeroExtend) => K::V48,
            (1, 2, SignExtend) => K::I12,
            (1, 4, SignExtend) => K::I14,
            (1, 8, SignExtend) => K::I18,
            (2, 4, SignExtend) => K::I24,
            (2, 8, SignExtend) => K::I28,
            (4, 8, SignExtend) => K::I48,
            _ => return None,
        })
    }

    fn zero(w: u8) -> K {
        match w {
            1 => K::Z1,
            2 => K::Z2,
            4 => K::Z4,
            8 => K::Z8,
            _ => K::Z16,
        }
    }
}

/// One lowered move: source and destination offsets in the fixed parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct E {
    pub(crate) s: u32,
    pub(crate) d: u32,
}

/// A lowered fixed-part program (see the module documentation).
#[derive(Clone, Debug, Default)]
pub(crate) struct Prog {
    /// `(kind, start, end)` ranges of `es`, one per kind present.
    groups: Vec<(K, u32, u32)>,
    es: Vec<E>,
    /// Copies and zero fills too long to lower (plain `memcpy`/`memset`,
    /// run right after the moves without the general executor).
    pub(crate) bulk: Vec<Op>,
    /// Operations that are not lowered, run after the moves.
    pub(crate) rest: Vec<Op>,
    /// The gaps are not part of the program (too many): the caller zeroes
    /// the whole output first.
    pub(crate) zero_all: bool,
    /// Groups from here on are not byte permutations (sign extension).
    residual_from: usize,
    /// The permutable moves as AVX-512 byte permutes, when the CPU has
    /// them and they are cheaper than the moves (see [`Perm`]).
    #[cfg(all(gw_avx512, target_arch = "x86_64"))]
    perm: Option<Perm>,
}

/// Longest copy, zero fill or run of elements lowered into single moves;
/// longer ones stay operations (a `memcpy` or a vectorised loop).
const MAX_LOWERED_BYTES: usize = 128;
const MAX_LOWERED_ELEMS: usize = 16;
/// Most gaps turned into zero stores; beyond, the output is cleared first.
const MAX_GAPS: usize = 1 << 16;

/// Split `len` bytes at `at` into moves of 16/8/4/2/1 bytes, the last one
/// overlapping the previous instead of descending through smaller widths.
fn pieces(len: usize, mut f: impl FnMut(usize, u8)) {
    match len {
        0 => {}
        1 | 2 | 4 | 8 | 16 => f(0, len as u8),
        3 => {
            f(0, 2);
            f(1, 2)
        }
        5..=7 => {
            f(0, 4);
            f(len - 4, 4)
        }
        9..=15 => {
            f(0, 8);
            f(len - 8, 8)
        }
        _ => {
            let mut at = 0;
            while at + 16 <= len {
                f(at, 16);
                at += 16;
            }
            if at < len {
                f(len - 16, 16);
            }
        }
    }
}

/// Lower `ops` (merged, top level) plus the native `gaps` (`None`: too many
/// to list) into a program. `None` if a lowered move would leave the fixed
/// parts (which the extent check of the operations already excludes).
pub(crate) fn lower(
    ops: &[Op],
    gaps: Option<&[(u32, u32)]>,
    src_size: usize,
    dst_size: usize,
) -> Option<Prog> {
    let mut items: Vec<(K, usize, usize)> = Vec::new();
    let mut rest = Vec::new();
    let mut bulk = Vec::new();
    // Items that end exactly at the end of their field, so a gap that
    // follows may be folded into them: index into `items`.
    let mut exact: Vec<usize> = Vec::new();
    for op in ops {
        match op {
            Op::Copy { src, dst, len } if *len <= MAX_LOWERED_BYTES => {
                if matches!(len, 1 | 2 | 4) {
                    exact.push(items.len());
                }
                pieces(*len, |o, w| {
                    let k = K::of(w, w, Ext::Move).unwrap_or(K::M1);
                    items.push((k, src + o, dst + o));
                });
            }
            Op::Swap {
                src,
                dst,
                size,
                count,
            } if *count <= MAX_LOWERED_ELEMS && matches!(size, 2 | 4 | 8) => {
                let z = *size as usize;
                let k = K::of(*size, *size, Ext::Swap)?;
                for i in 0..*count {
                    if i + 1 == *count && *size < 8 {
                        exact.push(items.len());
                    }
                    items.push((k, src + i * z, dst + i * z));
                }
            }
            Op::Int {
                src,
                dst,
                from,
                to,
                count,
                ..
            } if *count <= MAX_LOWERED_ELEMS
                && to.size > from.size
                && !to.swap
                && (!from.signed || to.signed)
                && cfg!(target_endian = "little") =>
            {
                let ext = match (from.signed, from.swap) {
                    (true, false) => Ext::SignExtend,
                    (false, false) => Ext::ZeroExtend,
                    (false, true) => Ext::SwapZeroExtend,
                    (true, true) => {
                        rest.push(op.clone());
                        continue;
                    }
                };
                let Some(k) = K::of(from.size, to.size, ext) else {
                    rest.push(op.clone());
                    continue;
                };
                let (fs, ts) = (from.size as usize, to.size as usize);
                for i in 0..*count {
                    if i + 1 == *count && ext != Ext::SignExtend {
                        exact.push(items.len());
                    }
                    items.push((k, src + i * fs, dst + i * ts));
                }
            }
            Op::Copy { .. } => bulk.push(op.clone()),
            _ => rest.push(op.clone()),
        }
    }
    let zero_all = gaps.is_none_or(|g| g.len() > MAX_GAPS);
    if !zero_all {
        let mut gaps: Vec<(usize, usize)> = gaps
            .unwrap_or_default()
            .iter()
            .map(|&(a, n)| (a as usize, n as usize))
            .collect();
        // Widen a move that a gap follows so its store covers the gap's
        // start (zero-extension writes the zeros): little-endian only.
        if cfg!(target_endian = "little") {
            for &i in &exact {
                let (k, s, d) = items[i];
                let (lw, sw, ext) = k.shape();
                let end = d + sw as usize;
                let Ok(g) = gaps.binary_search_by_key(&end, |&(a, _)| a) else {
                    continue;
                };
                let avail = sw as usize + gaps[g].1;
                let mut w = 8usize;
                while w > avail {
                    w /= 2;
                }
                if w <= sw as usize {
                    continue;
                }
                let ext = match ext {
                    Ext::Move | Ext::ZeroExtend => Ext::ZeroExtend,
                    Ext::Swap | Ext::SwapZeroExtend => Ext::SwapZeroExtend,
                    _ => continue,
                };
                let Some(nk) = K::of(lw, w as u8, ext) else {
                    continue;
                };
                items[i] = (nk, s, d);
                let used = w - sw as usize;
                gaps[g] = (gaps[g].0 + used, gaps[g].1 - used);
            }
        }
        for (a, n) in gaps {
            if n > MAX_LOWERED_BYTES {
                bulk.push(Op::Zero { dst: a, len: n });
            } else {
                pieces(n, |o, w| items.push((K::zero(w), 0, a + o)));
            }
        }
    }
    for &(k, s, d) in &items {
        let (lw, sw, _) = k.shape();
        if s + lw as usize > src_size || d + sw as usize > dst_size {
            return None;
        }
    }
    if src_size > u32::MAX as usize || dst_size > u32::MAX as usize {
        return None;
    }
    items.sort_unstable_by_key(|&(k, s, d)| (k, d, s));
    let mut groups: Vec<(K, u32, u32)> = Vec::new();
    let mut es = Vec::with_capacity(items.len());
    for (i, &(k, s, d)) in items.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if g.0 == k => g.2 = i as u32 + 1,
            _ => groups.push((k, i as u32, i as u32 + 1)),
        }
        es.push(E {
            s: s as u32,
            d: d as u32,
        });
    }
    let residual_from = groups
        .iter()
        .position(|g| !permutable(g.0))
        .unwrap_or(groups.len());
    #[allow(unused_mut)]
    let mut prog = Prog {
        groups,
        es,
        bulk,
        rest,
        zero_all,
        residual_from,
        #[cfg(all(gw_avx512, target_arch = "x86_64"))]
        perm: None,
    };
    #[cfg(all(gw_avx512, target_arch = "x86_64"))]
    {
        prog.perm = Perm::build(&prog, src_size, dst_size).filter(|p| {
            // Cheaper than the moves? Costs in 1/40 ns, fitted to the
            // benchmark records (104-byte and ten nested ones; byte-swapped,
            // reordered, i386) on the project machine: a move 15, a group
            // 4, a permute 60, and running groups after the permutes 100
            // more.
            let moves = |gs: &[(K, u32, u32)]| {
                gs.iter()
                    .map(|g| 15 * (g.2 - g.1) as usize + 4)
                    .sum::<usize>()
            };
            let residual = &prog.groups[prog.residual_from..];
            let with = 60 * p.parts.len()
                + if residual.is_empty() {
                    0
                } else {
                    100 + moves(residual)
                };
            with < moves(&prog.groups)
        });
    }
    Some(prog)
}

/// Kinds whose result bytes are source bytes or zeros (all but sign extension).
fn permutable(k: K) -> bool {
    !matches!(k.shape().2, Ext::SignExtend)
}

impl Prog {
    /// Every lowered move, grouped by kind (for the JIT).
    #[cfg(feature = "jit")]
    pub(crate) fn moves(&self) -> impl Iterator<Item = (K, &[E])> {
        self.groups
            .iter()
            .map(|&(k, a, b)| (k, &self.es[a as usize..b as usize]))
    }

    /// Number of lowered moves.
    #[cfg(feature = "jit")]
    pub(crate) fn len(&self) -> usize {
        self.es.len()
    }

    /// Whether the byte-permute executor runs the permutable moves.
    pub(crate) fn uses_permutes(&self) -> bool {
        #[cfg(all(gw_avx512, target_arch = "x86_64"))]
        return self.perm.is_some();
        #[cfg(not(all(gw_avx512, target_arch = "x86_64")))]
        false
    }

    /// Use the byte permutes (if built) or the moves; false if asked for
    /// permutes that are not available. For tests and fuzzing.
    pub(crate) fn set_permutes(&mut self, on: bool, src_size: usize, dst_size: usize) -> bool {
        #[cfg(all(gw_avx512, target_arch = "x86_64"))]
        {
            self.perm = if on {
                Perm::build(self, src_size, dst_size)
            } else {
                None
            };
            self.perm.is_some() == on
        }
        #[cfg(not(all(gw_avx512, target_arch = "x86_64")))]
        {
            let _ = (src_size, dst_size);
            !on
        }
    }

    /// Run the lowered moves (not `rest`).
    ///
    /// # Safety
    /// `src` readable for the source fixed size and `dst` writable for the
    /// destination fixed size given to [`lower`] (which checked every move
    /// against them); the regions do not overlap.
    #[inline(always)]
    pub(crate) unsafe fn run_moves(&self, src: *const u8, dst: *mut u8) {
        #[allow(unused_mut)]
        let mut groups = &self.groups[..];
        #[cfg(all(gw_avx512, target_arch = "x86_64"))]
        if let Some(p) = &self.perm {
            // SAFETY: `Perm::build` only succeeds when the CPU has
            // AVX-512 F/BW/VBMI; it checked every access against the sizes
            // of the caller contract.
            unsafe { p.run(src, dst) };
            groups = &self.groups[self.residual_from..];
        }
        for &(k, a, b) in groups {
            // SAFETY: `lower` built every group range inside `es`.
            let es = unsafe { self.es.get_unchecked(a as usize..b as usize) };
            // SAFETY: forwarded caller contract.
            unsafe { group(k, es, src, dst) }
        }
        for op in &self.bulk {
            // SAFETY: operations of the checked plan (`check_extent`) or
            // gaps of the destination fixed part; forwarded caller contract.
            unsafe {
                match op {
                    Op::Copy {
                        src: s,
                        dst: d,
                        len,
                    } => std::ptr::copy_nonoverlapping(src.add(*s), dst.add(*d), *len),
                    Op::Zero { dst: d, len } => std::ptr::write_bytes(dst.add(*d), 0, *len),
                    _ => {}
                }
            }
        }
    }
}

/// One group's loop; `T` loaded, converted by `f` into `U`, stored.
///
/// # Safety
/// Every move of `es` is inside the regions (see [`Prog::run_moves`]).
#[inline(always)]
unsafe fn each<T: Copy, U: Copy>(es: &[E], src: *const u8, dst: *mut u8, f: impl Fn(T) -> U) {
    for e in es {
        // SAFETY: `lower` checked `s + size_of T <= src size` and
        // `d + size_of U <= dst size` for this move; unaligned accesses.
        unsafe {
            let v = (src.add(e.s as usize) as *const T).read_unaligned();
            (dst.add(e.d as usize) as *mut U).write_unaligned(f(v));
        }
    }
}

/// As [`each`] for zero stores (no load).
///
/// # Safety
/// As for [`each`].
#[inline(always)]
unsafe fn zeros<U: Copy + Default>(es: &[E], dst: *mut u8) {
    for e in es {
        // SAFETY: `lower` checked `d + size_of U <= dst size`.
        unsafe { (dst.add(e.d as usize) as *mut U).write_unaligned(U::default()) };
    }
}

/// # Safety
/// As for [`each`].
#[inline(always)]
unsafe fn group(k: K, es: &[E], s: *const u8, d: *mut u8) {
    // SAFETY (every arm): forwarded contract of `each`/`zeros`.
    unsafe {
        match k {
            K::M1 => each(es, s, d, |v: u8| v),
            K::M2 => each(es, s, d, |v: u16| v),
            K::M4 => each(es, s, d, |v: u32| v),
            K::M8 => each(es, s, d, |v: u64| v),
            K::M16 => each(es, s, d, |v: u128| v),
            K::S2 => each(es, s, d, u16::swap_bytes),
            K::S4 => each(es, s, d, u32::swap_bytes),
            K::S8 => each(es, s, d, u64::swap_bytes),
            K::Z1 => zeros::<u8>(es, d),
            K::Z2 => zeros::<u16>(es, d),
            K::Z4 => zeros::<u32>(es, d),
            K::Z8 => zeros::<u64>(es, d),
            K::Z16 => zeros::<u128>(es, d),
            K::U12 => each(es, s, d, |v: u8| v as u16),
            K::U14 => each(es, s, d, |v: u8| v as u32),
            K::U18 => each(es, s, d, |v: u8| v as u64),
            K::U24 => each(es, s, d, |v: u16| v as u32),
            K::U28 => each(es, s, d, |v: u16| v as u64),
            K::U48 => each(es, s, d, |v: u32| v as u64),
            K::V24 => each(es, s, d, |v: u16| v.swap_bytes() as u32),
            K::V28 => each(es, s, d, |v: u16| v.swap_bytes() as u64),
            K::V48 => each(es, s, d, |v: u32| v.swap_bytes() as u64),
            K::I12 => each(es, s, d, |v: i8| v as i16),
            K::I14 => each(es, s, d, |v: i8| v as i32),
            K::I18 => each(es, s, d, |v: i8| v as i64),
            K::I24 => each(es, s, d, |v: i16| v as i32),
            K::I28 => each(es, s, d, |v: i16| v as i64),
            K::I48 => each(es, s, d, |v: i32| v as i64),
        }
    }
}

/// The permutable moves of a small program as AVX-512 VBMI byte permutes:
/// the native record is cut into 64-byte chunks; each chunk is the OR of a
/// few `vpermi2b` of two 64-byte source loads (masked: bytes no move writes
/// come out zero, which is also how gaps are zeroed), then one 64-byte
/// store. A 104-byte record with reordered, byte-swapped or zero-extended
/// fields is then two permutes instead of a dozen moves. Sign extensions
/// and the operations in `rest` run afterwards and overwrite their own
/// bytes. Loads and stores stay inside the fixed parts (the last chunk and
/// window overlap the previous ones instead of running past the end);
/// only records under 64 bytes use masked loads and stores.
#[cfg(all(gw_avx512, target_arch = "x86_64"))]
#[derive(Clone, Debug)]
struct Perm {
    /// `(dst offset, store mask, parts start, parts end)`
    chunks: Vec<(u32, u64, u32, u32)>,
    parts: Vec<Part>,
    idx: Vec<Idx>,
    /// A fixed part under 64 bytes: masked loads/stores (otherwise plain
    /// ones; masked stores in particular are slow on some CPUs).
    masked: bool,
}

/// A permute's byte indices, cache-line aligned (one load, never split).
#[cfg(all(gw_avx512, target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Idx([u8; 64]);

#[cfg(all(gw_avx512, target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug)]
struct Part {
    /// Offsets of the two 64-byte source loads, their load masks (all ones
    /// unless the source is under 64 bytes), and the chunk bytes this part
    /// provides (`z`).
    lo_off: u32,
    hi_off: u32,
    lo: u64,
    hi: u64,
    z: u64,
}

/// Programs with more destination bytes than this keep the moves.
#[cfg(all(gw_avx512, target_arch = "x86_64"))]
const MAX_PERM_BYTES: usize = 1 << 16;

// Compiled only by rustc >= 1.89 (build.rs), where these intrinsics are stable.
#[cfg(all(gw_avx512, target_arch = "x86_64"))]
#[clippy::msrv = "1.89"]
impl Perm {
    fn build(prog: &Prog, src_size: usize, dst_size: usize) -> Option<Perm> {
        if !(std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi"))
        {
            return None;
        }
        if dst_size > MAX_PERM_BYTES || prog.residual_from == 0 || src_size == 0 {
            return None;
        }
        // For each destination byte: the source byte (>= 0), zero (-1), or
        // not written by a permutable move (-2).
        let mut map = vec![-2i64; dst_size];
        for &(k, a, b) in &prog.groups[..prog.residual_from] {
            let (lw, sw, ext) = k.shape();
            for e in &prog.es[a as usize..b as usize] {
                let (s, d) = (e.s as i64, e.d as usize);
                for i in 0..sw as usize {
                    let from = match ext {
                        Ext::Zero => -1,
                        _ if i >= lw as usize => -1,
                        Ext::Swap | Ext::SwapZeroExtend => s + (lw as i64 - 1 - i as i64),
                        _ => s + i as i64,
                    };
                    *map.get_mut(d + i)? = from;
                }
            }
        }
        let mut p = Perm {
            chunks: Vec::new(),
            parts: Vec::new(),
            idx: Vec::new(),
            masked: src_size < 64 || dst_size < 64,
        };
        let mask = |n: usize| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut starts: Vec<usize> = (0..dst_size / 64).map(|c| 64 * c).collect();
        if !dst_size.is_multiple_of(64) {
            // the tail chunk overlaps the one before (same bytes, same values)
            starts.push(dst_size.saturating_sub(64));
        }
        for c in starts {
            let bytes = &map[c..dst_size.min(c + 64)];
            if bytes.iter().all(|&x| x == -2) {
                continue; // written entirely by other operations
            }
            let first = p.parts.len() as u32;
            let mut srcs: Vec<usize> = bytes
                .iter()
                .filter(|&&x| x >= 0)
                .map(|&x| x as usize)
                .collect();
            srcs.sort_unstable();
            let mut at = 0;
            while at < srcs.len() {
                // Two loads covering [lo_off, lo_off+64) and [hi_off, hi_off+64).
                let (lo_off, hi_off) = if src_size >= 128 {
                    let w = srcs[at].min(src_size - 128);
                    (w, w + 64)
                } else if src_size >= 64 {
                    (0, src_size - 64)
                } else {
                    (0, 0)
                };
                let mut idx = [0u8; 64];
                let mut z = 0u64;
                for (j, &x) in bytes.iter().enumerate() {
                    if x < 0 {
                        continue;
                    }
                    let x = x as usize;
                    let i = if x >= lo_off && x < lo_off + 64 {
                        x - lo_off
                    } else if src_size >= 64 && x >= hi_off && x < hi_off + 64 {
                        64 + x - hi_off
                    } else {
                        continue;
                    };
                    idx[j] = i as u8;
                    z |= 1 << j;
                }
                p.parts.push(Part {
                    lo_off: lo_off as u32,
                    hi_off: hi_off as u32,
                    lo: mask(src_size),
                    hi: if src_size >= 64 { u64::MAX } else { 0 },
                    z,
                });
                p.idx.push(Idx(idx));
                while at < srcs.len()
                    && ((srcs[at] >= lo_off && srcs[at] < lo_off + 64)
                        || (src_size >= 64 && srcs[at] >= hi_off && srcs[at] < hi_off + 64))
                {
                    at += 1;
                }
            }
            p.chunks
                .push((c as u32, mask(dst_size), first, p.parts.len() as u32));
        }
        Some(p)
    }

    /// # Safety
    /// The CPU supports AVX-512 F, BW and VBMI (`build` checked), `src` is
    /// readable for the source fixed size and `dst` writable for the
    /// destination fixed size that `build` was given.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn run(&self, src: *const u8, dst: *mut u8) {
        use std::arch::x86_64::*;
        if !self.masked {
            for &(c, _, a, b) in &self.chunks {
                if b == a + 1 {
                    // One part (the usual case): no zeroing, no OR.
                    // SAFETY: as in the loop below.
                    unsafe {
                        let (pt, idx) = (
                            self.parts.get_unchecked(a as usize),
                            self.idx.get_unchecked(a as usize),
                        );
                        let x = _mm512_loadu_epi8(src.add(pt.lo_off as usize) as *const i8);
                        let y = _mm512_loadu_epi8(src.add(pt.hi_off as usize) as *const i8);
                        let ix = _mm512_loadu_epi8(idx.0.as_ptr() as *const i8);
                        let r = _mm512_maskz_permutex2var_epi8(pt.z, x, ix, y);
                        _mm512_storeu_epi8(dst.add(c as usize) as *mut i8, r);
                    }
                    continue;
                }
                let mut r = _mm512_setzero_si512();
                for i in a as usize..b as usize {
                    // SAFETY: `build` made every part and its index entry.
                    let (pt, idx) =
                        unsafe { (self.parts.get_unchecked(i), self.idx.get_unchecked(i)) };
                    // SAFETY: both 64-byte loads lie inside the source fixed
                    // part (`build`: offset + 64 <= its size when unmasked).
                    unsafe {
                        let x = _mm512_loadu_epi8(src.add(pt.lo_off as usize) as *const i8);
                        let y = _mm512_loadu_epi8(src.add(pt.hi_off as usize) as *const i8);
                        let ix = _mm512_loadu_epi8(idx.0.as_ptr() as *const i8);
                        r = _mm512_or_si512(r, _mm512_maskz_permutex2var_epi8(pt.z, x, ix, y));
                    }
                }
                // SAFETY: the chunk [c, c+64) is inside the destination
                // fixed part (`build`: c <= size - 64 when unmasked).
                unsafe { _mm512_storeu_epi8(dst.add(c as usize) as *mut i8, r) };
            }
            return;
        }
        for &(c, store, a, b) in &self.chunks {
            let mut r = _mm512_setzero_si512();
            for i in a as usize..b as usize {
                // SAFETY: `build` made every part and its index entry.
                let (pt, idx) = unsafe { (self.parts.get_unchecked(i), self.idx.get_unchecked(i)) };
                // SAFETY: both loads lie inside the source fixed part
                // (`build`: offsets + 64 <= its size), or, for a source
                // under 64 bytes, are masked to its bytes (masked-off bytes
                // are not accessed).
                unsafe {
                    let x =
                        _mm512_maskz_loadu_epi8(pt.lo, src.add(pt.lo_off as usize) as *const i8);
                    let y =
                        _mm512_maskz_loadu_epi8(pt.hi, src.add(pt.hi_off as usize) as *const i8);
                    let ix = _mm512_loadu_epi8(idx.0.as_ptr() as *const i8);
                    r = _mm512_or_si512(r, _mm512_maskz_permutex2var_epi8(pt.z, x, ix, y));
                }
            }
            // SAFETY: the chunk [c, c+64) is inside the destination fixed
            // part, or the store is masked to its bytes (under 64 bytes).
            unsafe { _mm512_mask_storeu_epi8(dst.add(c as usize) as *mut i8, store, r) };
        }
    }
}
