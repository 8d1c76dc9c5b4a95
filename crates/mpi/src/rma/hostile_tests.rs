//! The target's handler driven directly with hostile messages: whatever
//! the origin says, nothing outside the window is read or written, and a
//! refused operation changes nothing inside it either.
use super::single_copy::SingleCopy;
use super::window::{Flavor, Memory, Owned, Remote, Win};
use super::wire::{self, Header, Layout};
use super::Rma;
use crate::comm::Comm;
use crate::datatype::Block;
use crate::fuzzing::self_only_context;
use crate::group::Group;
use std::sync::Arc;

const GUARD: usize = 32;
const WIN: usize = 16;

/// A window of `WIN` bytes in the middle of a buffer with guard bytes on
/// both sides; members are world ranks 0 and 1 (unit 4).
struct Fixture {
    rma: Arc<Rma>,
    ctx: gridwire_core::Context,
    mem: Vec<u8>,
    win: Arc<Win>,
}

impl Fixture {
    fn new(flavor: Flavor) -> Fixture {
        let ctx = self_only_context();
        let rma = Rma::new(&ctx);
        let mut mem = vec![0xAAu8; GUARD + WIN + GUARD];
        mem[GUARD..GUARD + WIN].fill(0);
        let base = mem.as_mut_ptr() as usize + GUARD;
        let comm = Comm::new(100, Group::new(vec![0, 1]), 0, "");
        let remote = vec![
            Remote {
                size: WIN as u64,
                disp_unit: 4
            };
            2
        ];
        let (b, s) = if flavor == Flavor::Dynamic {
            (0, 0)
        } else {
            (base, WIN)
        };
        let memory = Memory {
            base: b,
            size: s,
            disp_unit: 4,
            owned: Owned::None,
            shared_bases: Vec::new(),
            direct: Vec::new(),
            locks: Vec::new(),
            single_copy: SingleCopy::none(),
            attach_table: None,
        };
        let win = Win::build(comm, flavor, memory, remote);
        if flavor == Flavor::Dynamic {
            win.attached.lock().unwrap().push((base, WIN));
        }
        rma.wins.write().unwrap().insert(win.id, win.clone());
        Fixture { rma, ctx, mem, win }
    }

    /// Delivers a message of `kind` (with operation and type codes `codes`) for window `win`.
    fn send(
        &self,
        from: u32,
        (kind, op, basic): (u8, u8, u8),
        win: u32,
        layout: &[u8],
        data: &[u8],
    ) {
        let mut msg = Header {
            kind,
            op,
            basic,
            arg: 0,
            win,
            op_id: 1,
        }
        .encode()
        .to_vec();
        msg.extend_from_slice(layout);
        msg.extend_from_slice(data);
        let (h, rest) = Header::decode(&msg).unwrap();
        self.rma.on_target(&self.ctx, from, &h, rest);
    }

    fn put(&self, layout: Layout, data: &[u8]) {
        self.send(1, (wire::PUT, 0, 0), self.win.id, &layout.encode(), data);
    }

    fn guards_intact(&self) -> bool {
        self.mem[..GUARD]
            .iter()
            .chain(&self.mem[GUARD + WIN..])
            .all(|&b| b == 0xAA)
    }

    fn window(&self) -> &[u8] {
        &self.mem[GUARD..GUARD + WIN]
    }
}

fn bytes(disp: i64, count: u64, extent: i64, blocks: &[(isize, usize)]) -> Layout {
    Layout {
        disp,
        count,
        extent,
        blocks: blocks
            .iter()
            .map(|&(off, len)| Block { off, len })
            .collect(),
    }
}

#[test]
fn an_honest_put_lands_inside() {
    let f = Fixture::new(Flavor::Create);
    f.put(bytes(1, 1, 4, &[(0, 4)]), &[1, 2, 3, 4]);
    assert_eq!(&f.window()[4..8], &[1, 2, 3, 4]);
    assert!(f.guards_intact());
    assert_eq!(f.rma.rejected(), 0);
}

#[test]
fn puts_outside_the_window_are_refused() {
    let f = Fixture::new(Flavor::Create);
    let cases: Vec<(Layout, Vec<u8>)> = vec![
        // Past the end, by displacement (in the target's units: 4 * 4 = 16).
        (bytes(4, 1, 4, &[(0, 4)]), vec![9; 4]),
        // Straddling the end.
        (bytes(3, 1, 8, &[(0, 8)]), vec![9; 8]),
        // Before the start.
        (bytes(-1, 1, 4, &[(0, 4)]), vec![9; 4]),
        (bytes(0, 1, 4, &[(-4, 4)]), vec![9; 4]),
        // Later elements walk out (extent), or back out (negative extent).
        (bytes(0, 3, 8, &[(0, 4)]), vec![9; 12]),
        (bytes(0, 2, -8, &[(0, 4)]), vec![9; 8]),
        // Displacement whose product with the unit overflows 64 bits.
        (bytes(i64::MAX, 1, 4, &[(0, 4)]), vec![9; 4]),
        (bytes(i64::MIN, 1, 4, &[(0, 4)]), vec![9; 4]),
        // A block longer than the window.
        (bytes(0, 1, 4, &[(0, 1 << 40)]), vec![9; 4]),
        // Data that does not match the layout (shorter and longer).
        (bytes(0, 1, 4, &[(0, 4)]), vec![9; 3]),
        (bytes(0, 1, 4, &[(0, 4)]), vec![9; 5]),
    ];
    for (i, (l, d)) in cases.iter().enumerate() {
        f.put(l.clone(), d);
        assert!(f.guards_intact(), "case {i}: wrote outside the window");
        assert!(
            f.window().iter().all(|&b| b == 0),
            "case {i}: a refused put changed the window"
        );
    }
    assert_eq!(f.rma.rejected(), cases.len() as u64);
}

#[test]
fn malformed_and_foreign_messages_are_refused() {
    let f = Fixture::new(Flavor::Create);
    let ok = bytes(0, 1, 4, &[(0, 4)]).encode();
    // Unknown window, sender not a member, unknown kind, bad op and type codes.
    f.send(1, (wire::PUT, 0, 0), 999, &ok, &[9; 4]);
    f.send(7, (wire::PUT, 0, 0), f.win.id, &ok, &[9; 4]);
    f.send(1, (77, 0, 0), f.win.id, &ok, &[9; 4]);
    f.send(1, (wire::ACC, 200, 3), f.win.id, &ok, &[9; 4]);
    f.send(1, (wire::ACC, 1, 250), f.win.id, &ok, &[9; 4]);
    // Sum is not defined on MINLOC pairs; a 4-byte access is not whole 8-byte elements.
    f.send(
        1,
        (wire::ACC, 1, wire::basic_code(crate::Basic::TwoInt)),
        f.win.id,
        &ok,
        &[9; 4],
    );
    f.send(
        1,
        (wire::ACC, 1, wire::basic_code(crate::Basic::I64)),
        f.win.id,
        &ok,
        &[9; 4],
    );
    // A layout cut short, one claiming 2^60 blocks, one of 2^40 elements.
    f.send(1, (wire::PUT, 0, 0), f.win.id, &ok[..20], &[]);
    let mut many = ok.clone();
    many[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    f.send(1, (wire::PUT, 0, 0), f.win.id, &many, &[9; 4]);
    f.send(
        1,
        (wire::GET, 0, 0),
        f.win.id,
        &bytes(0, 1 << 40, 0, &[(0, 4)]).encode(),
        &[],
    );
    // Unlocking a lock never taken.
    f.send(1, (wire::UNLOCK, 0, 0), f.win.id, &[], &[]);
    assert!(f.guards_intact());
    assert!(f.window().iter().all(|&b| b == 0));
    assert_eq!(f.rma.rejected(), 11);
}

#[test]
fn dynamic_windows_accept_only_attached_memory() {
    let f = Fixture::new(Flavor::Dynamic);
    let base = f.mem.as_ptr() as i64 + GUARD as i64;
    f.put(bytes(base + 8, 1, 4, &[(0, 4)]), &[5; 4]);
    assert_eq!(&f.window()[8..12], &[5; 4]);
    for disp in [
        base - 4,
        base + WIN as i64 - 2,
        base + WIN as i64,
        0,
        i64::MAX - 2,
    ] {
        f.put(bytes(disp, 1, 4, &[(0, 4)]), &[9; 4]);
    }
    assert!(f.guards_intact());
    assert_eq!(f.rma.rejected(), 5);
}

#[test]
fn accumulate_and_compare_and_swap_apply_inside() {
    let f = Fixture::new(Flavor::Create);
    let l = bytes(0, 2, 4, &[(0, 4)]).encode();
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let sum = wire::op_code(&crate::Op::Sum).unwrap();
    let int = wire::basic_code(crate::Basic::I32);
    f.send(1, (wire::ACC, sum, int), f.win.id, &l, &i32s(&[3, -4]));
    f.send(1, (wire::ACC, sum, int), f.win.id, &l, &i32s(&[3, -4]));
    assert_eq!(&f.window()[..8], &i32s(&[6, -8])[..]);
    // Compare-and-swap: equal compare swaps, a different one does not.
    let one = bytes(0, 1, 4, &[(0, 4)]).encode();
    f.send(1, (wire::CAS, 0, int), f.win.id, &one, &i32s(&[42, 6]));
    f.send(1, (wire::CAS, 0, int), f.win.id, &one, &i32s(&[77, 6]));
    assert_eq!(&f.window()[..4], &i32s(&[42])[..]);
    assert!(f.guards_intact());
}

/// Random messages (a fixed-seed generator, biased towards the real window
/// id, known kinds and small layouts so that most get past the header):
/// never a panic, never a byte outside the window.
#[test]
fn random_messages_never_escape_the_window() {
    let f = Fixture::new(Flavor::Create);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..20_000 {
        let r = next();
        let kind = (r % 12) as u8;
        let win = if r & 0x100 != 0 {
            f.win.id
        } else {
            (r >> 9) as u32
        };
        let small = |v: u64| (v % 40) as i64 - 8;
        let nblocks = (next() % 4) as usize;
        let blocks: Vec<(isize, usize)> = (0..nblocks)
            .map(|_| (small(next()) as isize, (next() % 24) as usize))
            .collect();
        let layout = bytes(small(next()), next() % 5, small(next()), &blocks);
        let mut enc = layout.encode();
        if next() % 8 == 0 {
            let cut = (next() as usize) % (enc.len() + 1);
            enc.truncate(cut);
        }
        let data: Vec<u8> = (0..(next() % 48)).map(|_| next() as u8).collect();
        let codes = (kind, (next() % 16) as u8, (next() % 30) as u8);
        f.send((next() % 3) as u32, codes, win, &enc, &data);
        assert!(f.guards_intact(), "a message wrote outside the window");
    }
}

/// Large puts read by a stream method straight into the window
/// (`placed.rs`): only a one-piece put from a member, lying inside the
/// window (or an attached region), with exactly its piece's data, gets a
/// destination, and that is its place in the window; the rest is left to
/// the handler, which judges it.
#[test]
fn only_honest_large_puts_are_placed() {
    use gridwire_core::Placer;
    for flavor in [Flavor::Create, Flavor::Dynamic] {
        let f = Fixture::new(flavor);
        let placer = super::placed::AnswerPlacer {
            rma: Arc::downgrade(&f.rma),
        };
        let base = f
            .win
            .base
            .max(f.win.attached.lock().unwrap().first().map_or(0, |a| a.0));
        // Dynamic windows' displacements are addresses; the others' count units of 4.
        let disp = |off: usize| -> i64 {
            if flavor == Flavor::Dynamic {
                (base + off) as i64
            } else {
                (off / 4) as i64
            }
        };
        let head = |win: u32, d: i64, off: isize, n: usize| -> Vec<u8> {
            let mut v = Header {
                kind: wire::PUT,
                op: 0,
                basic: 0,
                arg: 0,
                win,
                op_id: 1,
            }
            .encode()
            .to_vec();
            v.extend_from_slice(&wire::encode_one_piece(d, off, n));
            v
        };
        let h = head(f.win.id, disp(4), 0, 8);
        let d = placer
            .place(1, &h, h.len() + 8)
            .expect("an honest put is placed");
        assert_eq!((d.at, d.dst, d.len), (h.len(), base + 4, 8));
        // The transport writes the data there, then hands the placement back.
        // SAFETY: the destination lies in the window's 16 bytes (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping([1u8, 2, 3, 4, 5, 6, 7, 8].as_ptr(), d.dst as *mut u8, 8)
        };
        placer.placed(&f.ctx, 1, &h, d);
        assert_eq!(&f.window()[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(f.guards_intact());
        assert_eq!(f.rma.placed_puts(), 1);
        let mut two_blocks = Header {
            kind: wire::PUT,
            op: 0,
            basic: 0,
            arg: 0,
            win: f.win.id,
            op_id: 1,
        }
        .encode()
        .to_vec();
        two_blocks.extend_from_slice(&bytes(disp(0), 1, 8, &[(0, 4), (4, 4)]).encode());
        let mut get = h.clone();
        get[0] = wire::GET;
        let refused: Vec<(u32, Vec<u8>, usize)> = vec![
            // Data longer, or shorter, than the piece.
            (1, h.clone(), h.len() + 9),
            (1, h.clone(), h.len() + 7),
            // Past the end, before the start.
            (1, head(f.win.id, disp(12), 0, 8), h.len() + 8),
            (1, head(f.win.id, disp(0), -4, 8), h.len() + 8),
            // A sender that is not a member, a window this process lacks.
            (7, h.clone(), h.len() + 8),
            (1, head(999, disp(4), 0, 8), h.len() + 8),
            // Not one piece; not a put.
            (1, two_blocks.clone(), two_blocks.len() + 8),
            (1, get, h.len()),
        ];
        for (i, (from, head, len)) in refused.into_iter().enumerate() {
            assert!(
                placer.place(from, &head, len).is_none(),
                "{flavor:?} case {i} placed"
            );
        }
        assert!(f.guards_intact());
        assert_eq!(f.rma.placed_puts(), 1);
    }
}
