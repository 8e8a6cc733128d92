//! The node's clock as a guard reads it: CLOCK_BOOTTIME, monotonic and counting suspended time
//! (a suspended node's pods do not run, but the lease's time passes), as a [`Duration`] since
//! boot. Its readings are only comparable within one boot, hence the boot id.

use std::time::Duration;

/// Where the kernel says which boot this is (a random UUID per boot).
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The time since this node booted, on CLOCK_BOOTTIME.
pub fn now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// This boot's id, or why it cannot be read.
pub fn boot_id() -> Result<String, String> {
    std::fs::read_to_string(BOOT_ID)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read the boot id {BOOT_ID}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_and_the_boot_is_named() {
        let (a, b) = (now(), now());
        assert!(a > Duration::ZERO && b >= a);
        let id = boot_id().unwrap();
        assert_eq!(id, boot_id().unwrap());
        assert_eq!(id.len(), 36, "a UUID: {id}");
    }
}
