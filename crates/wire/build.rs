//! Enables `cfg(gw_avx512)` (the AVX-512 VBMI byte-permute executor for
//! small plans, `src/prog.rs`) on compilers whose AVX-512 intrinsics are
//! stable (1.89 and later); older compilers (the workspace's MSRV is 1.87)
//! build without it.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(gw_avx512)");
    println!("cargo::rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let Some(version) = text.split_whitespace().nth(1) else {
        return;
    };
    let mut it = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    if (major, minor) >= (1, 89) {
        println!("cargo::rustc-cfg=gw_avx512");
    }
}
