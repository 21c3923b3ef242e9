//! Lines on standard output for commands that report (`stats`, `verify`, `repair`, `backup`):
//! a reader that goes away early (`stampkv stats | head -3`) ends the process quietly with
//! status 0 instead of a panic, as `println!` would on a broken pipe.

use std::io::{self, Write};

/// Writes one line (the formatted arguments and `\n`) to standard output.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.write_all(b"\n")) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("stampkv: error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` for the command line: see [`line`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use out;
