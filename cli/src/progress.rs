//! Progress bars for long work (`dump`, `load`, `import-deno`, `export-deno`, `backup`,
//! `verify`): drawn on standard error when it is a terminal, silent when it is piped or
//! redirected, so scripts see only the command's own output.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar, or nothing when standard error is not a terminal.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` units (`None`: unknown, a spinner with a count) labelled `what`.
    pub fn new(what: &str, total: Option<u64>) -> Progress {
        let bar = match total {
            Some(total) => ProgressBar::new(total),
            None => ProgressBar::new_spinner(),
        };
        let template = match total {
            Some(_) => "{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta} left)",
            None => "{spinner} {msg} {pos} ({per_sec})",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        Progress { bar }
    }

    /// A bar counting bytes (for copies and checks of files) labelled `what`.
    pub fn bytes(what: &str, total: u64) -> Progress {
        let progress = Progress::new(what, Some(total));
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
        ) {
            progress.bar.set_style(style.progress_chars("=> "));
        }
        progress
    }

    /// Counts `n` more units done.
    pub fn advance(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Removes the bar from the terminal.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
