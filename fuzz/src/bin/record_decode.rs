//! The record decoder: any bytes as a record file and as a framed record.
gridwire_fuzz::fuzz_main!(gridwire_wire::fuzzing::record_decode);
