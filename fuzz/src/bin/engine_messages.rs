//! The MPI engine's envelope, CTS, DATA and FIN handlers against a peer's messages.
gridwire_fuzz::fuzz_main!(gridwire_mpi::fuzzing::engine_messages);
