//! What each running VM really costs the host in memory: its QEMU's
//! resident set and, of that, the pages no other process shares (Linux's
//! `/proc/PID/smaps_rollup`: `Private_Clean` + `Private_Dirty`). Pages a
//! guest shares with others (the page cache of its kernel and initramfs
//! files, QEMU's libraries) count in the first figure and not the second.

use vmaas_backend::VmMemory;

use crate::Vms;
use crate::recover::pid_file_qemu;

/// `(resident, unique)` bytes from the text of a `smaps_rollup`.
fn parse_rollup(text: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    let rss = kib("Rss:")?;
    let unique = kib("Private_Clean:")? + kib("Private_Dirty:")?;
    Some((rss * 1024, unique * 1024))
}

/// `(resident, unique)` bytes of process `pid`. Blocking.
pub fn of_process(pid: i32) -> Option<(u64, u64)> {
    parse_rollup(&std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?)
}

impl Vms {
    /// The memory of every VM whose QEMU runs (its pid file names a
    /// process whose command line is that VM's). Blocking: reads `/proc`.
    pub(crate) fn memory_of_vms(&self) -> Vec<VmMemory> {
        let mut out = Vec::new();
        for id in self.map().keys() {
            let Some((pid, _)) = pid_file_qemu(&self.cfg.state_dir.join(id)) else { continue };
            if let Some((resident_bytes, unique_bytes)) = of_process(pid) {
                out.push(VmMemory { id: id.clone(), resident_bytes, unique_bytes });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollup_is_read_in_bytes() {
        let text = "55d0-7ffd ---p 00000000 00:00 0    [rollup]\nRss:              266240 kB\nPss:              250000 kB\n\
                    Shared_Clean:      20480 kB\nPrivate_Clean:      1024 kB\nPrivate_Dirty:    244736 kB\n";
        assert_eq!(parse_rollup(text), Some((266_240 * 1024, 245_760 * 1024)));
        assert_eq!(parse_rollup("Rss: 1 kB\n"), None, "a rollup without private figures");
    }

    #[test]
    fn this_process_has_unique_pages() {
        let (rss, unique) = of_process(std::process::id() as i32).expect("a rollup of this process");
        assert!(unique > 0 && unique <= rss, "{unique} of {rss}");
    }
}
