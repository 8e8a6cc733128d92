//! The controller's pod-lease flags, set once at start (`spanset run`) and read by the pure
//! decisions that need them: the clocks' drift bound and the member write deadline (both sides
//! of the lease arithmetic) and the image the guard containers run.

use std::{sync::OnceLock, time::Duration};

/// The controller's pod-lease flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// ρ: the bound on any clock's rate error, a fraction (`--pod-lease-drift`).
    pub drift: f64,
    /// W: how late a write spanset gave up on may still land in a member
    /// (`--member-write-deadline`): a kube-apiserver finishes or drops a request within its
    /// `--request-timeout`, one minute by default.
    pub write_deadline: Duration,
    /// The image of the guard containers (`--guard-image`): spanset's own.
    pub guard_image: String,
}

/// The default guard image: this version's controller image.
pub fn default_guard_image() -> String {
    format!("ghcr.io/spanset/spanset:{}", env!("CARGO_PKG_VERSION"))
}

impl Default for Settings {
    fn default() -> Self {
        Settings { drift: 0.01, write_deadline: Duration::from_secs(60), guard_image: default_guard_image() }
    }
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets the flags for this process (once, before any federation is planned).
pub fn configure(settings: Settings) -> Result<(), String> {
    if !(0.0..0.5).contains(&settings.drift) {
        return Err(format!("--pod-lease-drift: {} is not a fraction in [0, 0.5)", settings.drift));
    }
    if settings.guard_image.trim().is_empty() {
        return Err("--guard-image: empty".into());
    }
    SETTINGS.set(settings).map_err(|_| "pod-lease settings were set twice".to_string())
}

/// The flags in force (the defaults when none were set).
pub fn settings() -> &'static Settings {
    SETTINGS.get_or_init(Settings::default)
}
