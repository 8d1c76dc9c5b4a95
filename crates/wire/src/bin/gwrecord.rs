//! `gwrecord dump FILE`: print every record of a record file as JSON.
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [cmd, path] if cmd == "dump" => match std::fs::read(path)
            .map_err(gridwire_wire::WireError::from)
            .and_then(|b| gridwire_wire::file::dump_json(&b))
        {
            Ok(s) => {
                print!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gwrecord: {path}: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: gwrecord dump FILE");
            ExitCode::from(2)
        }
    }
}
