//! Block merging: huge counts of touching runs stay one block.

use super::*;

fn double() -> Arc<Datatype> {
    Datatype::predefined(Basic::F64, "MPI_DOUBLE")
}

#[test]
fn contiguous_of_a_huge_count_is_one_block() {
    let t = Datatype::contiguous(
        3_000_000_000,
        &Datatype::predefined(Basic::Byte, "MPI_BYTE"),
    )
    .unwrap();
    assert_eq!(
        t.blocks,
        vec![Block {
            off: 0,
            len: 3_000_000_000
        }]
    );
    assert_eq!(t.size, 3_000_000_000);
    assert!(t.contig);
    let t = Datatype::contiguous(1 << 30, &double()).unwrap();
    assert_eq!(t.blocks.len(), 1);
    assert_eq!(t.extent, 8 << 30);
}

#[test]
fn vector_whose_stride_is_its_blocklength_is_one_block() {
    let t = Datatype::vector(1 << 31, 4, 4, &double()).unwrap();
    assert_eq!(
        t.blocks,
        vec![Block {
            off: 0,
            len: 32 << 31
        }]
    );
    assert!(t.contig);
    assert!(matches!(t.combiner, Combiner::Vector { count, .. } if count == 1 << 31));
    let h = Datatype::hvector(1 << 31, 2, 16, &double()).unwrap();
    assert_eq!(h.blocks.len(), 1);
    assert_eq!(h.size, 16 << 31);
    // A real stride keeps its pieces.
    let v = Datatype::vector(3, 1, 2, &double()).unwrap();
    assert_eq!(v.blocks.len(), 3);
    assert_eq!(v.blocks[2], Block { off: 32, len: 8 });
}

#[test]
fn contiguous_of_a_contiguous_vector_stays_one_block() {
    let inner = Datatype::vector(1 << 20, 2, 2, &double()).unwrap();
    let outer = Datatype::contiguous(1 << 20, &inner).unwrap();
    assert_eq!(outer.blocks.len(), 1);
    assert_eq!(outer.size, 16usize << 40);
}

#[test]
fn too_many_separate_pieces_are_refused_with_a_count_error() {
    let e = Datatype::vector(1 << 40, 1, 2, &double()).unwrap_err();
    assert_eq!(e.class, class::COUNT);
    let strided = Datatype::vector(2, 1, 2, &double()).unwrap();
    let e = Datatype::contiguous(1 << 30, &strided).unwrap_err();
    assert_eq!(e.class, class::COUNT);
}

#[test]
fn pack_of_a_merged_vector_reads_consecutive_elements() {
    let t = Datatype::vector(3, 2, 2, &double()).unwrap();
    let src: Vec<f64> = (0..6).map(f64::from).collect();
    let mut out = vec![0u8; 48];
    // SAFETY: `src` holds the 6 doubles the type map covers.
    unsafe { t.pack(src.as_ptr() as usize, 1, &mut out) };
    let back: Vec<f64> = out
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, src);
}
