//! Why a test failed, said again at the end of its output: a failing
//! test's panic message comes before the server's log (printed when the
//! [`crate::Server`] drops), and CI shows the output's end.

use std::sync::{Mutex, Once};

/// The longest part of a panic message that is said again.
const KEEP: usize = 3000;

/// The last panic message of this test process.
static LAST: Mutex<String> = Mutex::new(String::new());

/// Keeps each panic's message (the default hook still prints it).
pub(crate) fn remember() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload_as_str().unwrap_or("(a panic without a message)");
            let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
            if let Ok(mut last) = LAST.lock() {
                *last = format!("{}{at}", message.chars().take(KEEP).collect::<String>());
            }
            previous(info);
        }));
    });
}

/// Prints the last panic's message (its first [`KEEP`] characters, without
/// a server log it carries) on stderr, then the machine's load and free
/// disk: a guest paused on a full disk or starved of CPU fails a wait.
pub(crate) fn repeat() {
    let last = LAST.lock().map(|l| l.clone()).unwrap_or_default();
    if !last.is_empty() {
        let reason = last.split_once(crate::scratch::SERVER_LOG).map_or(last.as_str(), |(reason, _)| reason);
        eprintln!("--- why the test failed (said again after the log) ---\n{reason}\n{}", machine());
    }
}

/// The load averages and the free space of the temporary directory's disk.
fn machine() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let df = std::process::Command::new("df")
        .args(["-h", "--output=target,avail,size"])
        .arg(std::env::temp_dir())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    format!("load average: {}\n{}", load.trim(), df.trim())
}
