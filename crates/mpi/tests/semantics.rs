//! Sans-IO tests of the semantics: datatypes, reductions, groups, topologies.

use gridwire_mpi::comm::Cart;
use gridwire_mpi::datatype::{Basic, Block, Datatype};
use gridwire_mpi::group::{dims_create, Group};
use gridwire_mpi::{Op, IDENT, SIMILAR, UNDEFINED, UNEQUAL};
use std::sync::Arc;

fn int() -> Arc<Datatype> {
    Datatype::predefined(Basic::I32, "MPI_INT")
}

fn pack(t: &Datatype, data: &[u8], count: usize) -> Vec<u8> {
    let mut out = vec![0u8; t.size * count];
    // SAFETY: `data` covers the type map of `count` elements (checked by the callers' sizes).
    unsafe { t.pack(data.as_ptr() as usize, count, &mut out) };
    out
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn from_ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn vector_is_compiled_to_blocks_and_packs() {
    let t = Datatype::vector(3, 2, 4, &int()).unwrap();
    assert_eq!(t.size, 24);
    assert_eq!(t.extent, (2 * 4 + 2) * 4);
    assert_eq!(
        t.blocks,
        vec![
            Block { off: 0, len: 8 },
            Block { off: 16, len: 8 },
            Block { off: 32, len: 8 }
        ]
    );
    assert!(!t.contig);
    let data = ints(&(0..12).collect::<Vec<_>>());
    assert_eq!(from_ints(&pack(&t, &data, 1)), vec![0, 1, 4, 5, 8, 9]);
}

#[test]
fn contiguous_of_contiguous_stays_contiguous() {
    let t = Datatype::contiguous(4, &int()).unwrap();
    let u = Datatype::contiguous(3, &t).unwrap();
    assert!(u.contig);
    assert_eq!(u.blocks, vec![Block { off: 0, len: 48 }]);
}

#[test]
fn struct_extent_is_padded_like_c() {
    let d = Datatype::predefined(Basic::F64, "MPI_DOUBLE");
    let c = Datatype::predefined(Basic::Char, "MPI_CHAR");
    // struct { double d; char c; } -> size 9, extent 16
    let t = Datatype::create_struct(&[1, 1], &[0, 8], &[d, c]).unwrap();
    assert_eq!(t.size, 9);
    assert_eq!(t.extent, 16);
    assert_eq!(t.basic, None);
}

#[test]
fn unpack_roundtrip_and_truncation() {
    let t = Datatype::indexed(&[1, 2], &[3, 0], &int()).unwrap();
    assert_eq!(t.size, 12);
    let packed = ints(&[7, 8, 9]);
    let mut mem = vec![0u8; 16];
    // SAFETY: `mem` covers the type map (offsets 0..16).
    unsafe { t.unpack(mem.as_mut_ptr() as usize, 1, &packed) };
    assert_eq!(from_ints(&mem), vec![8, 9, 0, 7]);
    let mut mem2 = vec![0u8; 16];
    // Only 8 bytes arrive: the first block and half the second.
    // SAFETY: as above.
    unsafe { t.unpack(mem2.as_mut_ptr() as usize, 1, &packed[..8]) };
    assert_eq!(from_ints(&mem2), vec![8, 0, 0, 7]);
}

#[test]
fn subarray_and_resized() {
    let t = Datatype::subarray(&[4, 6], &[2, 3], &[1, 2], true, &int()).unwrap();
    assert_eq!(t.extent, 24 * 4);
    let data = ints(&(0..24).collect::<Vec<_>>());
    assert_eq!(from_ints(&pack(&t, &data, 1)), vec![8, 9, 10, 14, 15, 16]);
    let f = Datatype::subarray(&[4, 6], &[2, 3], &[1, 2], false, &int()).unwrap();
    // Fortran order: first index fastest (4 rows of a 6-column array stored column-major).
    assert_eq!(from_ints(&pack(&f, &data, 1)), vec![9, 10, 13, 14, 17, 18]);
    let r = Datatype::resized(-4, 32, &int()).unwrap();
    assert_eq!((r.lb, r.extent, r.true_lb, r.true_extent), (-4, 32, 0, 4));
    assert!(!r.contig);
}

#[test]
fn elements_of_partial_messages() {
    let t = Datatype::contiguous(3, &int()).unwrap();
    assert_eq!(t.elements_in(24), Some(6));
    assert_eq!(t.elements_in(16), Some(4));
    assert_eq!(t.elements_in(15), None);
    // struct { int a[2]; double d; } twice over: the partial element's whole
    // basic elements count (4 bytes: one int; 20 bytes: one struct and an int).
    let dbl = Datatype::predefined(Basic::F64, "MPI_DOUBLE");
    let s = Datatype::create_struct(&[2, 1], &[0, 8], &[int(), dbl]).unwrap();
    let v = Datatype::contiguous(2, &s).unwrap();
    let got: Vec<_> = [0, 4, 8, 16, 20, 24, 32, 12]
        .map(|b| v.elements_in(b))
        .into();
    let want = [0, 1, 2, 3, 4, 5, 6].map(Some).into_iter().chain([None]);
    assert!(got.into_iter().eq(want));
    // A pair type is two basic elements: value, then index.
    let di = Datatype::predefined(Basic::DoubleInt, "MPI_DOUBLE_INT");
    assert_eq!(di.elements_in(8), Some(1));
    assert_eq!(di.elements_in(12), Some(2));
    assert_eq!(di.elements_in(20), Some(3));
}

#[test]
fn reductions() {
    let t = int();
    let mut acc = ints(&[1, 5, -3]);
    Op::Sum.apply(&t, 3, &ints(&[10, 20, 30]), &mut acc);
    assert_eq!(from_ints(&acc), vec![11, 25, 27]);
    Op::Max.apply(&t, 3, &ints(&[100, 0, 0]), &mut acc);
    assert_eq!(from_ints(&acc), vec![100, 25, 27]);
    Op::Band.apply(&t, 3, &ints(&[6, 6, 6]), &mut acc);
    assert_eq!(from_ints(&acc), vec![4, 0, 2]);
    // MINLOC on (double, int) pairs packed as 12 bytes; ties take the lower index.
    let di = Datatype::predefined(Basic::DoubleInt, "MPI_DOUBLE_INT");
    let pair = |v: f64, i: i32| [v.to_ne_bytes().to_vec(), i.to_ne_bytes().to_vec()].concat();
    let mut io = [pair(1.0, 5), pair(2.0, 1)].concat();
    Op::MinLoc.apply(&di, 2, &[pair(1.0, 3), pair(3.0, 0)].concat(), &mut io);
    assert_eq!(io, [pair(1.0, 3), pair(2.0, 1)].concat());
    assert!(Op::MinLoc.check(&int()).is_err());
    assert!(Op::Sum.check(&di).is_err());
    assert!(Op::Sum
        .check(&Datatype::vector(2, 1, 2, &int()).unwrap())
        .is_ok());
}

#[test]
fn user_op_sees_the_layout() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let op = Op::User {
        f: Arc::new(move |_a: usize, _b: usize, n: usize, dt: &Datatype| {
            s2.lock().unwrap().push((n, dt.size))
        }),
        commute: false,
    };
    let t = Datatype::vector(2, 1, 3, &int()).unwrap();
    let mut io = ints(&[1, 2, 3, 4]);
    op.apply(&t, 2, &ints(&[5, 6, 7, 8]), &mut io);
    assert_eq!(*seen.lock().unwrap(), vec![(2, 8)]);
    assert!(!op.commutative());
}

#[test]
fn groups() {
    let w = Group::new((0..6).collect());
    let even = w.incl(&[0, 2, 4]).unwrap();
    let odd = w.excl(&[0, 2, 4]).unwrap();
    assert_eq!(odd.members, vec![1, 3, 5]);
    assert_eq!(Group::compare(&Group::union(&even, &odd), &w), SIMILAR);
    assert_eq!(Group::compare(&Group::difference(&w, &odd), &even), IDENT);
    assert_eq!(Group::compare(&even, &odd), UNEQUAL);
    assert_eq!(Group::intersection(&even, &odd).size(), 0);
    assert_eq!(even.translate(&[0, 1, 2], &w).unwrap(), vec![0, 2, 4]);
    assert_eq!(w.translate(&[1], &even).unwrap(), vec![UNDEFINED]);
    assert!(w.incl(&[0, 0]).is_err());
    assert!(w.incl(&[6]).is_err());
    assert_eq!(w.expand_ranges(&[[5, 0, -2]]).unwrap(), vec![5, 3, 1]);
}

#[test]
fn dims_and_cart() {
    let mut d = [0, 0];
    dims_create(6, &mut d).unwrap();
    assert_eq!(d, [3, 2]);
    let mut d = [0, 0, 0];
    dims_create(8, &mut d).unwrap();
    assert_eq!(d, [2, 2, 2]);
    let mut d = [0, 5];
    assert!(dims_create(12, &mut d).is_err());
    let c = Cart {
        dims: vec![3, 2],
        periods: vec![true, false],
    };
    assert_eq!(c.coords(5), vec![2, 1]);
    assert_eq!(c.rank(&[3, 1]), Some(1));
    assert_eq!(c.rank(&[0, 2]), None);
}

/// Sizes, extents and displacements of derived types are checked: a count
/// near 2^61 wrapped the size, a vector of 2^40 pieces was a loop and an
/// allocation of 2^40, and huge strides overflowed the displacements.
#[test]
fn derived_types_beyond_the_address_space_are_count_errors() {
    use gridwire_mpi::class;
    let d = Datatype::predefined(Basic::F64, "MPI_DOUBLE");
    let code = |r: gridwire_mpi::Result<Arc<Datatype>>| r.err().map(|e| e.class);
    assert_eq!(code(Datatype::contiguous(1 << 61, &d)), Some(class::COUNT));
    assert_eq!(
        code(Datatype::vector(1 << 40, 1, 2, &d)),
        Some(class::COUNT)
    );
    assert_eq!(
        code(Datatype::vector(4, 1, i64::MAX / 4, &d)),
        Some(class::COUNT)
    );
    assert_eq!(
        code(Datatype::hvector(4, 1, isize::MAX / 2, &d)),
        Some(class::COUNT)
    );
    assert_eq!(
        code(Datatype::create_struct(
            &[1 << 61, 1 << 61],
            &[0, 0],
            &[d.clone(), d.clone()]
        )),
        Some(class::COUNT)
    );
    assert_eq!(
        code(Datatype::resized(isize::MAX, 2, &d)),
        Some(class::COUNT)
    );
    assert_eq!(
        code(Datatype::subarray(
            &[1 << 40, 1 << 40],
            &[1, 1],
            &[0, 0],
            true,
            &d
        )),
        Some(class::COUNT)
    );
    // Large but representable: one block, built at once.
    let big = Datatype::contiguous(1 << 40, &d).unwrap();
    assert_eq!((big.size, big.blocks.len()), (8 << 40, 1));
    let bigger = Datatype::contiguous(1 << 10, &big).unwrap();
    assert_eq!(bigger.blocks.len(), 1);
}
