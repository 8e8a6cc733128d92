//! The sandbox's scratch directories on this machine (the volumes' files, the containers'
//! roots). A sandbox that ends normally removes its own; one killed with SIGKILL cannot, so
//! each directory carries the process ID of the sandbox that made it, and the next sandbox
//! removes those whose process is gone before it makes its own.

use std::path::Path;

/// A new scratch directory `spanset-KIND-PID-XXXXXX` in the temporary directory, removed when
/// dropped; the ones a killed sandbox left are removed first.
pub fn make(kind: &str) -> std::io::Result<tempfile::TempDir> {
    let base = std::env::temp_dir();
    sweep(&base, kind, |pid| Path::new(&format!("/proc/{pid}")).exists());
    let dir = tempfile::Builder::new().prefix(&format!("spanset-{kind}-{}-", std::process::id())).tempdir_in(base)?;
    // Owner-only: volumes, Secrets written out for pods and containers' layers are no other
    // account's to read.
    #[cfg(unix)]
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    Ok(dir)
}

/// Removes `spanset-KIND-PID-*` under `base` whose PID `alive` says is gone; what cannot be
/// removed (another user's) is left as it is.
fn sweep(base: &Path, kind: &str, alive: impl Fn(u32) -> bool) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let prefix = format!("spanset-{kind}-");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_the_directories_of_gone_processes_only() {
        let base = tempfile::tempdir().unwrap();
        for name in ["spanset-volumes-11-a", "spanset-volumes-22-b", "spanset-volumes-x", "spanset-containers-11-c"] {
            std::fs::create_dir(base.path().join(name)).unwrap();
            std::fs::write(base.path().join(name).join("data"), "x").unwrap();
        }
        sweep(base.path(), "volumes", |pid| pid == 22);
        let mut left: Vec<String> =
            std::fs::read_dir(base.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["spanset-containers-11-c", "spanset-volumes-22-b", "spanset-volumes-x"]);
    }

    #[test]
    fn a_new_directory_names_this_process_and_is_its_owner_s_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = make("unit").unwrap();
        let name = dir.path().file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with(&format!("spanset-unit-{}-", std::process::id())), "{name}");
        assert_eq!(std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777, 0o700);
    }
}
