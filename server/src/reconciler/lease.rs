//! Who holds the reconciler lease: a holder names its host's boot, its pid
//! and the pid's start time, so a replica can tell at once that a holder on
//! its own host is gone (killed, crashed) and take the lease over without
//! waiting for it to expire.

/// This host's boot id (changes on every boot).
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// The start time of process `pid` in clock ticks since boot, if it runs.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process's identity in a lease: `boot/pid/start/random`.
pub fn holder() -> String {
    let pid = std::process::id();
    format!("{}/{pid}/{}/{}", boot_id(), start_time(pid).unwrap_or(0), uuid::Uuid::new_v4())
}

/// Whether `holder` is a process of this host's current boot that is no
/// longer running. Holders on other hosts (or other boots) are never
/// judged: their lease expires instead.
pub fn is_gone(holder: &str) -> bool {
    let mut parts = holder.split('/');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    let here = boot_id();
    !here.is_empty() && boot == here && start_time(pid) != Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_is_not_gone_and_a_dead_one_is() {
        assert!(!is_gone(&holder()), "this process runs");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_time(pid);
        child.wait().unwrap();
        let dead = format!("{}/{pid}/{}/x", boot_id(), start.unwrap_or(1));
        assert!(is_gone(&dead), "{dead}");
        assert!(!is_gone(&format!("another-boot/{pid}/1/x")), "another host's holder is left to expire");
        assert!(!is_gone("a-uuid-from-an-older-release"));
    }
}
