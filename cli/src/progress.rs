//! Progress of long transfers (imports, uploads, exports) on stderr.

use std::io::IsTerminal;

use crate::output::bytes;

/// Draws progress on stderr: indicatif's bar (with the rate and what is
/// left) on a terminal, else a line at each tenth, for logs.
pub(crate) struct Bar {
    bar: Option<indicatif::ProgressBar>,
    last: Option<u64>,
}

impl Bar {
    pub(crate) fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = indicatif::ProgressStyle::with_template(
                "[{bar:20}] {percent:>3}% {binary_bytes} of {binary_total_bytes} {binary_bytes_per_sec} {eta}",
            )
            .map(|s| s.progress_chars("#>."))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr()).with_style(style)
        });
        Self { bar, last: None }
    }

    pub(crate) fn show(&mut self, done: u64, total: Option<u64>) {
        let total = total.filter(|t| *t > 0);
        if let Some(bar) = &self.bar {
            if let Some(t) = total {
                bar.set_length(t);
            }
            bar.set_position(done);
            return;
        }
        let Some(total) = total else { return };
        let pct = (done.min(total) * 100 / total).min(100);
        if self.last.is_none_or(|l| pct / 10 > l / 10) {
            eprintln!("… {pct}% {} of {}", bytes(done), bytes(total));
        }
        self.last = Some(pct);
    }

    pub(crate) fn end(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
