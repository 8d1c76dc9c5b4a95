//! What the testbed's tests share: a checked C MPI program built with
//! gwcc against gridwire's libmpi.so, and the build of the project's own
//! binaries into the test's target directory.
#![allow(dead_code)]

pub mod failover;

use gridwire_testbed::harness::run_with_timeout;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// 256 KiB per rank round a ring, then an allreduce of the sums; one line per rank.
pub const RING_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define COUNT (1 << 16)

static unsigned int pattern(int rank, int i) {
    return (unsigned int)rank * 2654435761u + (unsigned int)i * 40503u + 7u;
}

int main(int argc, char **argv) {
    int rank, size, i, r;
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host - 1);
    unsigned int *out = malloc(COUNT * sizeof *out), *in = malloc(COUNT * sizeof *in);
    if (!out || !in) MPI_Abort(MPI_COMM_WORLD, 2);
    for (i = 0; i < COUNT; i++) out[i] = pattern(rank, i);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(out, COUNT, MPI_UNSIGNED, next, 7, in, COUNT, MPI_UNSIGNED, prev, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    unsigned long long got = 0, want = 0, mine = 0, total = 0, want_total = 0;
    for (i = 0; i < COUNT; i++) {
        got += in[i];
        want += pattern(prev, i);
        mine += out[i];
    }
    MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (r = 0; r < size; r++)
        for (i = 0; i < COUNT; i++) want_total += pattern(r, i);
    printf("RANK %d SIZE %d HOST %s RING %s ALLREDUCE %s\n", rank, size, host,
           got == want ? "ok" : "BAD", total == want_total ? "ok" : "BAD");
    fflush(stdout);
    MPI_Finalize();
    return got == want && total == want_total ? 0 : 1;
}
"#;

/// Builds gridwire's libmpi.so into this test's target directory and
/// profile; the directory it is in.
pub fn build_libmpi() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let target_dir = profile_dir.parent().unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["build", "--quiet", "-p", "gridwire-capi", "--lib"])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(&workspace);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(600)).unwrap();
    assert!(
        out.status.success(),
        "building libmpi.so: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir
}

/// Copies libmpi.so into `dir` and builds the ring program there with gwcc
/// (its rpath is `dir`, which every host sees); the program's path.
pub fn stage_program(dir: &Path) -> PathBuf {
    let src = dir.join("ring.c");
    std::fs::write(&src, RING_C).unwrap();
    stage_c_program(dir, &src, "ring")
}

/// Copies libmpi.so into `dir` and builds the C MPI program `tests/mpi/NAME.c`
/// of the repository there with gwcc (rpath `dir`); the program's path.
pub fn stage_mpi_test(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/mpi/{name}.c"));
    stage_c_program(dir, &src, name)
}

/// Copies libmpi.so into `dir` and builds `src` there with gwcc as `dir/name`.
fn stage_c_program(dir: &Path, src: &Path, name: &str) -> PathBuf {
    let lib = build_libmpi().join("libmpi.so");
    std::fs::copy(&lib, dir.join("libmpi.so"))
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", lib.display(), dir.display()));
    let prog = dir.join(name);
    let gwcc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gwcc");
    let out = run_with_timeout(
        Command::new(gwcc)
            .env("GW_MPI_LIBDIR", dir)
            .args(["-Wall", "-O1", "-o"])
            .arg(&prog)
            .arg(src),
        Duration::from_secs(120),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "gwcc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// A directory of the test's own, removed when the test ends.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    /// `CARGO_TARGET_TMPDIR/NAME-PID`, made now (seen by `login` only).
    pub fn new(name: &str) -> ScratchDir {
        let dir = PathBuf::from(format!(
            "{}/{name}-{}",
            env!("CARGO_TARGET_TMPDIR"),
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the testbed can run here: root, and what `harness::ready`
/// checks; says why not (the project's skip rule) when it cannot.
pub fn testbed_ready() -> bool {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("gw-testbed needs root (namespaces, mounts, bridges, nftables)");
        return false;
    }
    if let Err(why) = gridwire_testbed::harness::ready() {
        gridwire_testkit::skip(&why);
        return false;
    }
    true
}

/// Builds a binary of the workspace into this test's target directory
/// and profile; its path.
pub fn build_bin(package: &str, bin: &str) -> PathBuf {
    build_target(package, "--bin", bin)
}

/// Builds an example of the workspace (`gridwire-core`'s `rsr_check`, …)
/// into this test's target directory and profile; its path.
pub fn build_example(package: &str, example: &str) -> PathBuf {
    build_target(package, "--example", example)
}

/// `cargo build -p PACKAGE KIND NAME` into this test's target directory
/// and profile; the built file's path.
fn build_target(package: &str, kind: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let target_dir = profile_dir.parent().unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["build", "--quiet", "-p", package, kind, name])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(&workspace);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(600)).unwrap();
    assert!(
        out.status.success(),
        "building {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if kind == "--example" {
        profile_dir.join("examples").join(name)
    } else {
        profile_dir.join(name)
    }
}

/// Copies libpvm3.so and gwpvm (built into this test's target directory)
/// into `dir`, which the hosts see, and builds the PVM program
/// `crates/pvm/tests/c/remote_host.c` there against them (rpath `dir`);
/// the program's path.
pub fn stage_pvm_program(dir: &Path) -> PathBuf {
    let gwpvm = build_bin("gridwire-pvm", "gwpvm");
    let built = gwpvm.parent().unwrap();
    for f in ["libpvm3.so", "gwpvm"] {
        std::fs::copy(built.join(f), dir.join(f))
            .unwrap_or_else(|e| panic!("copy {f} to {}: {e}", dir.display()));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let prog = dir.join("remote_host");
    let out = run_with_timeout(
        Command::new("gcc")
            .arg("-Wall")
            .arg("-I")
            .arg(root.join("include"))
            .arg("-o")
            .arg(&prog)
            .arg(root.join("crates/pvm/tests/c/remote_host.c"))
            .arg(format!("-L{}", dir.display()))
            .arg("-lpvm3")
            .arg(format!("-Wl,-rpath,{}", dir.display())),
        Duration::from_secs(60),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "gcc remote_host.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}
