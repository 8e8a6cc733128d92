//! What `/proc` says about a process: CPU seconds, resident memory, open descriptors, and its
//! TCP sockets by remote port (each simulated member serves its API on its own port, so the
//! port says which member a connection goes to).

use std::collections::{BTreeMap, BTreeSet};

/// User plus system CPU seconds of a process so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    ticks / clock_ticks()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every Linux this runs on).
fn clock_ticks() -> f64 {
    100.0
}

/// Resident set size in bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// The targets of a process's open descriptors (`socket:[123]`, `/dev/null`, …).
fn fd_targets(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok()).map(|p| p.to_string_lossy().into_owned()).collect()
}

/// Open descriptors of a process, by kind.
#[derive(Debug, Default, Clone)]
pub struct Descriptors {
    /// Every open descriptor.
    pub total: usize,
    /// TCP sockets by remote port (connections; listeners have remote port 0).
    pub tcp_by_remote_port: BTreeMap<u16, usize>,
    /// Sockets not found among TCP rows (UDP, Unix, …).
    pub other_sockets: usize,
}

/// Counts a process's descriptors and maps its sockets to TCP rows of its network namespace.
pub fn descriptors(pid: u32) -> Descriptors {
    let targets = fd_targets(pid);
    let inodes: BTreeSet<u64> =
        targets.iter().filter_map(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()).collect();
    let rows = tcp_rows(pid);
    let mut d = Descriptors { total: targets.len(), ..Descriptors::default() };
    for inode in &inodes {
        match rows.get(inode) {
            Some(port) => *d.tcp_by_remote_port.entry(*port).or_default() += 1,
            None => d.other_sockets += 1,
        }
    }
    d
}

/// TCP sockets of a process's network namespace: inode → remote port.
fn tcp_rows(pid: u32) -> BTreeMap<u64, u16> {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).ok())
        .flat_map(|text| text.lines().skip(1).filter_map(tcp_row).collect::<Vec<_>>())
        .collect()
}

/// One row of `/proc/net/tcp`: `sl local rem st queues timer retr uid timeout inode …`.
fn tcp_row(line: &str) -> Option<(u64, u16)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = u16::from_str_radix(f.get(2)?.rsplit_once(':')?.1, 16).ok()?;
    Some((f.get(9)?.parse().ok()?, port))
}
