//! `--report FILE.html` of the sandbox drills: the run as one self-contained page a person can
//! read at a glance — a lane per ordinal coloured by the member it ran in, the fault and the
//! drill's phases as vertical lines, the verdict and figures as a table.
//!
//! The drill hands over what it saw ([`Seen`]: its phases' wall-clock times and the sandbox's
//! ledger, which records every pod incarnation with its start and end, so nothing needs
//! sampling); [`lanes`] reads the ledger into lanes, [`html`] renders a [`Picture`] into a
//! String, and [`write()`] puts it on disk. Everything but the writing is pure, so the page's
//! shape is unit-tested without a sandbox.

pub mod html;
pub mod lanes;

use std::path::Path;

use jiff::Timestamp;

/// What a drill saw over time, kept beside its report for the picture (not in its JSON: the
/// ledger is the sandbox's, and large).
#[derive(Debug, Clone)]
pub struct Seen {
    /// Start of the picture: a little before the first fault, to show the steady state.
    pub from: Timestamp,
    /// End of the picture: when the drill finished.
    pub until: Timestamp,
    /// The faults and phases, at their wall-clock times.
    pub marks: Vec<Mark>,
    /// The sandbox's ledger document (`{"incarnations": [...]}`) read at the end.
    pub ledger: serde_json::Value,
    /// The federation's namespace.
    pub namespace: String,
    /// The federation's name (its member StatefulSets' too).
    pub name: String,
    /// The members of its placement, in legend order.
    pub members: Vec<String>,
    /// Its replicas at the end: ordinals `0..replicas` get a lane even if they never ran.
    pub replicas: u32,
}

impl Seen {
    /// Where a picture of a drill that started at `started` and ended at `until` begins: a
    /// twentieth of its length earlier (a second at least), to show the steady state before.
    pub fn lead_in(started: Timestamp, until: Timestamp) -> Timestamp {
        started - (until.duration_since(started) / 20).max(jiff::SignedDuration::from_secs(1))
    }

    /// The picture of what was seen, with the drill's own heading, verdict and figures.
    pub fn picture(&self, title: String, verdict: String, clean: bool, figures: Vec<(String, String)>) -> Picture {
        let lanes = lanes::lanes(&self.ledger, &self.namespace, &self.name, (self.from, self.until), 0..self.replicas);
        let mut marks = self.marks.clone();
        marks.sort_by_key(|m| m.at);
        Picture {
            title,
            from: self.from,
            until: self.until,
            clusters: self.members.clone(),
            lanes,
            marks,
            verdict,
            clean,
            figures,
            problems: Vec::new(),
        }
    }
}

/// Whether a mark is something done to the federation or a stage the drill reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// Something the drill did to a member (power off, partition, heal...).
    Fault,
    /// A stage the drill saw reached (detected, fenced, re-homed...).
    Phase,
}

/// A vertical line across the lanes.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// When.
    pub at: Timestamp,
    /// What, as printed above the line (or in its tooltip when `minor`).
    pub label: String,
    /// Fault or phase.
    pub kind: MarkKind,
    /// Drawn thin and without a printed label: the chaos soak's many faults would otherwise
    /// bury the phases under their labels.
    pub minor: bool,
}

impl Mark {
    /// A labelled mark.
    pub fn new(at: Timestamp, kind: MarkKind, label: impl Into<String>) -> Self {
        Self { at, label: label.into(), kind, minor: false }
    }
}

/// One ordinal's row of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    /// The ordinal.
    pub ordinal: u32,
    /// Its runs inside the picture's window, in start order.
    pub segments: Vec<Segment>,
}

/// One run (pod incarnation) of an ordinal in one member, clipped to the picture's window.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// The member it ran in.
    pub cluster: String,
    /// Start (or the window's start).
    pub from: Timestamp,
    /// End (or the window's end, for a run still going or going past it).
    pub until: Timestamp,
    /// The spans it was Ready, clipped likewise: the rest of the segment ran unready.
    pub ready: Vec<(Timestamp, Timestamp)>,
    /// It started while an earlier run of the same ordinal still ran: an at-most-one
    /// violation, drawn so that it cannot be missed.
    pub overlap: bool,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// The heading (`cluster-loss central in default/redis`).
    pub title: String,
    /// The window shown.
    pub from: Timestamp,
    /// The window's end.
    pub until: Timestamp,
    /// The members, in legend order (a member seen only in the lanes is added after them).
    pub clusters: Vec<String>,
    /// One per ordinal.
    pub lanes: Vec<Lane>,
    /// Faults and phases.
    pub marks: Vec<Mark>,
    /// `clean`, or what went wrong.
    pub verdict: String,
    /// Whether the verdict passes.
    pub clean: bool,
    /// The drill's figures, name and value, in table order.
    pub figures: Vec<(String, String)>,
    /// Violations and other findings, each a line.
    pub problems: Vec<String>,
}

/// Seconds for a figure: `5.95 s`.
pub fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

/// Fails early when `path` could not be written, so that a long drill does not run for a
/// page it cannot keep: its directory must exist and take a new file.
pub fn check_writable(path: &Path) -> Result<(), String> {
    let probe = temp_beside(path)?;
    std::fs::write(&probe, b"").map_err(|e| format!("cannot write the report {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes the page atomically: a reader (or a browser reloading it) sees the old file or the
/// whole new one, never half of it.
pub fn write(path: &Path, page: &str) -> Result<(), String> {
    let tmp = temp_beside(path)?;
    let fail = |e: std::io::Error| format!("cannot write the report {}: {e}", path.display());
    if let Err(e) = std::fs::write(&tmp, page) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// A temporary name in the target's own directory (a rename across file systems is no rename).
fn temp_beside(path: &Path) -> Result<std::path::PathBuf, String> {
    let name =
        path.file_name().ok_or_else(|| format!("cannot write the report {}: it names no file", path.display()))?;
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".tmp-{}", std::process::id()));
    Ok(path.with_file_name(tmp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_written_whole_and_a_path_that_cannot_be_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drill.html");
        check_writable(&path).unwrap();
        write(&path, "<p>one</p>").unwrap();
        write(&path, "<p>two</p>").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<p>two</p>");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("drill.html")], "no temporary file is left behind");

        let missing = dir.path().join("no-such-dir").join("drill.html");
        for err in [check_writable(&missing).unwrap_err(), write(&missing, "x").unwrap_err()] {
            assert!(err.contains(&missing.display().to_string()), "{err}");
        }
        assert!(write(Path::new("/"), "x").unwrap_err().contains("names no file"));
    }
}
