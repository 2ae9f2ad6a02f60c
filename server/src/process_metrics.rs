//! The standard `process_*` metrics of a Prometheus client (CPU time,
//! memory, file descriptors, start time), read from `/proc/self` at each
//! scrape. Where `/proc` is not there, nothing is reported.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Reports this process's figures.
#[derive(Debug, Clone, Copy)]
pub struct ProcessCollector;

/// What `/proc/self` says of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessFigures {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: f64,
    /// Virtual memory, in bytes.
    pub virtual_bytes: f64,
    /// Open file descriptors.
    pub open_fds: f64,
    /// The soft limit of open file descriptors.
    pub max_fds: f64,
    /// When the process started, in seconds since the epoch.
    pub start_time_seconds: f64,
}

/// The clock ticks per second and the page size, asked of `getconf` once.
fn sysconf() -> (f64, f64) {
    static CONF: std::sync::OnceLock<(f64, f64)> = std::sync::OnceLock::new();
    *CONF.get_or_init(|| {
        let ask = |name: &str, default: f64| {
            std::process::Command::new("getconf")
                .arg(name)
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(default)
        };
        (ask("CLK_TCK", 100.0), ask("PAGESIZE", 4096.0))
    })
}

/// The CPU time, user and system, that process `pid` has used, in seconds
/// (`self`: this one), if `/proc` has it.
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ProcessFigures::parse(&stat, sysconf(), 0.0, 0.0, 0.0).map(|f| f.cpu_seconds)
}

/// The CPU time, user and system, of the children this process has waited
/// for (and theirs), in seconds, if `/proc` has it: `cutime` and `cstime`.
pub fn waited_children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let field = stat_field(&stat)?;
    Some((field(16)? + field(17)?) / sysconf().0)
}

/// Field `n` (1-based, as `proc(5)` numbers them) of a `/proc/PID/stat`
/// line, read after the command's closing parenthesis (the command may
/// hold spaces and parentheses), from field 3 (state) on.
fn stat_field(stat: &str) -> Option<impl Fn(usize) -> Option<f64> + '_> {
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(move |n: usize| rest.get(n.checked_sub(3)?).and_then(|v| v.parse::<f64>().ok()))
}

impl ProcessFigures {
    /// This process's figures now, if `/proc` has them.
    pub fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
        let boot_ago: f64 = uptime.split_whitespace().next()?.parse().ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0) as f64;
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let max_fds = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
        Self::parse(&stat, sysconf(), now - boot_ago, open_fds, max_fds)
    }

    /// The figures of a `/proc/PID/stat` line, given the clock ticks and
    /// page size, and when the host booted (seconds since the epoch).
    fn parse(stat: &str, (ticks, page): (f64, f64), booted: f64, open_fds: f64, max_fds: f64) -> Option<Self> {
        let field = stat_field(stat)?;
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) / ticks,
            start_time_seconds: booted + field(22)? / ticks,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page,
            open_fds,
            max_fds,
        })
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(f) = ProcessFigures::now() else { return Ok(()) };
        let cpu = ConstCounter::new(f.cpu_seconds);
        cpu.encode(encoder.encode_descriptor("process_cpu", "User and system CPU time spent", Some(&Unit::Seconds), cpu.metric_type())?)?;
        for (name, help, unit, value) in [
            ("process_resident_memory", "Resident memory size", Some(Unit::Bytes), f.resident_bytes),
            ("process_virtual_memory", "Virtual memory size", Some(Unit::Bytes), f.virtual_bytes),
            ("process_open_fds", "Open file descriptors", None, f.open_fds),
            ("process_max_fds", "The most file descriptors the process may open", None, f.max_fds),
            ("process_start_time", "When the process started, since the epoch", Some(Unit::Seconds), f.start_time_seconds),
        ] {
            let g = ConstGauge::new(value);
            g.encode(encoder.encode_descriptor(name, help, unit.as_ref(), g.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_reads_as_figures() {
        // pid (comm with ) and spaces) state ppid … utime=14 stime=15 … starttime=22 vsize=23 rss=24
        let stat = "42 (vmaas server) x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 123456789 300 18446744073709551615";
        let f = ProcessFigures::parse(stat, (100.0, 4096.0), 1_000.0, 7.0, 1024.0).unwrap();
        assert_eq!(f.cpu_seconds, 3.0);
        assert_eq!(f.start_time_seconds, 1_010.0);
        assert_eq!(f.virtual_bytes, 123_456_789.0);
        assert_eq!(f.resident_bytes, 300.0 * 4096.0);
        assert_eq!((f.open_fds, f.max_fds), (7.0, 1024.0));
    }

    #[test]
    fn this_process_has_figures() {
        let f = ProcessFigures::now().expect("/proc");
        assert!(f.resident_bytes > 0.0 && f.open_fds > 0.0 && f.start_time_seconds > 1e9, "{f:?}");
        let pid = std::process::id().to_string();
        assert!(cpu_seconds_of(&pid).is_some_and(|s| s >= 0.0), "another process is read by its pid");
        assert!(cpu_seconds_of("0").is_none(), "no such process");
    }
}
