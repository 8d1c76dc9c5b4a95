//! A tcp/udp descriptor from a peer (netns key, port, address list): parsed with size limits.
gridwire_fuzz::fuzz_main!(gridwire_core::fuzzing::net_descriptor);
