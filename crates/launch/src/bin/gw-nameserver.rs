//! `gw-nameserver [ADDR]`: the name server of `MPI_Publish_name` that
//! outlives single jobs (docs/mpi.md). Listens on ADDR (default
//! `127.0.0.1:7077`); start gwrun with `GW_NAMESERVER=ADDR` to use it.

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7077".to_string());
    let listener = match std::net::TcpListener::bind(&addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gw-nameserver: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    if let Ok(a) = listener.local_addr() {
        println!("gw-nameserver: listening on {a}");
    }
    if let Err(e) = gridwire_launch::names::serve(listener) {
        eprintln!("gw-nameserver: {e}");
        std::process::exit(1);
    }
}
