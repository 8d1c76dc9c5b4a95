//! Prints how this rank's job secret was made, for the tests of the secret
//! under other launchers (crates/launch/tests/secret.rs): one line
//! `SECRET <rank> <fingerprint> DERIVED <fingerprint of the kvsname-derived secret>`.
//! Fingerprints are public digests; the secret itself is never printed.

use gridwire_core::{auth, Context};

fn main() {
    let ctx = match Context::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("secret_check: init: {e}");
            std::process::exit(2);
        }
    };
    let derived = auth::fingerprint(&auth::derive_secret(&ctx.kvsname()));
    println!(
        "SECRET {} {} DERIVED {derived}",
        ctx.rank(),
        ctx.secret_fingerprint()
    );
    if let Err(e) = ctx.finalize() {
        eprintln!("secret_check: finalize: {e}");
        std::process::exit(1);
    }
}
