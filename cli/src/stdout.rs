//! Standard output for every subcommand (`outln!`, `out!`). A reader that
//! closed the pipe (`causalbench list | head -1`) ends the command quietly
//! with success, as a process killed by SIGPIPE would, where `println!`
//! panics. The signal itself stays ignored: the harness writes to
//! contestants' pipes, and a contestant that exits must not end the run
//! (baselines/PROTOCOL.md).

use std::fmt;
use std::io::{self, Write};

/// Writes `args` (and a newline when `newline`) to standard output.
pub fn write(args: fmt::Arguments<'_>, newline: bool) {
    let mut out = io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                out.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("causalbench: writing to standard output: {e}");
        std::process::exit(1);
    }
}
