//! A real headless Chromium (Debian's `chromium`) opening a local page, as a person would:
//! the DOM after the page loaded (and any script ran), what it printed to its console, and a
//! screenshot.
//!
//! Chromium calls home on its own (component updates, time, accounts) whatever it is asked to
//! show, so it runs in a network namespace of its own (`unshare --net`): nothing it tries can
//! leave the machine, and a page that needed the network would show it by breaking.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The programs a page test needs: `chromium` and util-linux's `unshare`.
pub struct Chromium {
    chromium: PathBuf,
    unshare: PathBuf,
}

/// A loaded page: its DOM as Chromium serialises it, and its console lines.
pub struct Loaded {
    /// The DOM after loading.
    pub dom: String,
    /// Every line Chromium logged from the page's console (errors, warnings, logs): a page
    /// with no script of its own should log none.
    pub console: Vec<String>,
}

impl Chromium {
    /// Both programs from `PATH`; `None` (the test skips, or fails under `CI`) without them.
    pub fn find() -> Option<Self> {
        let chromium = super::program("chromium", "chromium")?;
        let unshare = super::program("unshare", "util-linux")?;
        Some(Self { chromium, unshare })
    }

    /// Runs headless Chromium with `args` on `page`, in a fresh profile and network namespace.
    fn run(&self, page: &Path, args: &[&str]) -> Output {
        let profile = tempfile::tempdir().expect("a profile directory");
        let url = format!("file://{}", page.canonicalize().expect("the page exists").display());
        let out = Command::new(&self.unshare)
            .arg("--net")
            .arg(&self.chromium)
            .args(["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .args(["--disable-extensions", "--disable-breakpad", "--disable-default-apps"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(args)
            .arg(&url)
            .output()
            .expect("chromium starts");
        assert!(
            out.status.success(),
            "chromium {args:?} {url} failed ({:?}; `unshare --net` needs root or CAP_SYS_ADMIN):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The page's DOM once loaded, and its console output (Chromium logs each console message
    /// to stderr as `...:INFO:CONSOLE:N] "message", source: URL (line)`).
    pub fn load(&self, page: &Path) -> Loaded {
        let out = self.run(page, &["--enable-logging=stderr", "--v=0", "--dump-dom"]);
        let console =
            String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(String::from).collect();
        Loaded { dom: String::from_utf8_lossy(&out.stdout).into_owned(), console }
    }

    /// A screenshot of the page in a `width` × `height` window, written to `png`.
    pub fn screenshot(&self, page: &Path, png: &Path, (width, height): (u32, u32)) {
        let _ = std::fs::remove_file(png);
        self.run(page, &[&format!("--screenshot={}", png.display()), &format!("--window-size={width},{height}")]);
    }
}

/// The width and height a PNG file's header gives, if it is a PNG.
pub fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.len() < 24 || &bytes[..8] != SIGNATURE || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&bytes[16..20]), be(&bytes[20..24])))
}
