//! Which version of the controller wrote an object. During a rolling update of the controller
//! two versions run side by side; an older replica that takes the Lease after a newer one must
//! not undo the newer one's writes (it may not know a field the newer one sets, and would drop
//! it). So every object spanset writes carries [`WRITTEN_BY`] beside its term stamp, and a
//! leader that reads a version newer than its own stops leading (see [`newer_writer`]).

use std::{
    cmp::Ordering,
    collections::BTreeMap,
    sync::{
        OnceLock,
        atomic::{AtomicBool, Ordering as Atomic},
    },
};

/// Annotation: the version of the spanset controller that last wrote the object.
pub const WRITTEN_BY: &str = "spanset.dev/written-by";

/// Environment variable that overrides this binary's version (test only: the upgrade tests
/// run one binary as two versions). `spanset run --written-by-version` sets the same.
pub const VERSION_OVERRIDE_ENV: &str = "SPANSET_TEST_WRITER_VERSION";

static VERSION: OnceLock<String> = OnceLock::new();

/// Set by `spanset run --accept-downgrade`: a deliberate rollback, whose older version must
/// lead over a newer version's stamps.
static ACCEPT_DOWNGRADE: AtomicBool = AtomicBool::new(false);

/// Makes this process lead over objects a newer version wrote (`--accept-downgrade`).
pub fn accept_downgrade() {
    ACCEPT_DOWNGRADE.store(true, Atomic::SeqCst);
}

/// What this process obeys: [`newer_writer`] against its own version, unless it was told to
/// accept a downgrade.
pub fn newer_than_this(annotations: &BTreeMap<String, String>) -> Option<Newer> {
    if ACCEPT_DOWNGRADE.load(Atomic::SeqCst) {
        return None;
    }
    newer_writer(annotations, version())
}

/// Sets this process's version (test only, before anything is written); an invalid version is
/// refused with the reason. Later calls keep the first value.
pub fn set_version(version: &str) -> Result<(), String> {
    Version::parse(version).ok_or_else(|| format!("written-by version {version:?}: not a semantic version (x.y.z)"))?;
    let _ = VERSION.set(version.to_string());
    Ok(())
}

/// The version this process stamps: the override, else the crate's version.
pub fn version() -> &'static str {
    VERSION.get().map_or(env!("CARGO_PKG_VERSION"), String::as_str)
}

/// Stamps this process's version on an object's annotations.
pub fn stamp(annotations: &mut BTreeMap<String, String>) {
    annotations.insert(WRITTEN_BY.to_string(), version().to_string());
}

/// The annotations of a write in `term`: the term stamp and, beside it, this process's version.
pub fn stamps(term: u64) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::from([(spanset_api::labels::TERM.to_string(), term.to_string())]);
    stamp(&mut annotations);
    annotations
}

/// A semantic version (`major.minor.patch`, an optional `-pre` release and `+build` ignored
/// for the build): enough to order the controller's releases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    core: [u64; 3],
    pre: Vec<String>,
}

impl Version {
    /// Parses `x.y.z[-pre][+build]`; `None` when it is not one.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().trim_start_matches('v');
        let s = s.split_once('+').map_or(s, |(v, _)| v);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) if !p.is_empty() => (c, p.split('.').map(str::to_string).collect()),
            Some(_) => return None,
            None => (s, Vec::new()),
        };
        let mut parts = core.split('.');
        let mut n = [0u64; 3];
        for slot in &mut n {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            *slot = p.parse().ok()?;
        }
        parts.next().is_none().then_some(Self { core: n, pre })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.core.cmp(&other.core).then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            // A release is newer than its pre-releases.
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                for (a, b) in self.pre.iter().zip(&other.pre) {
                    let o = match (a.parse::<u64>(), b.parse::<u64>()) {
                        (Ok(x), Ok(y)) => x.cmp(&y),
                        (Ok(_), Err(_)) => Ordering::Less,
                        (Err(_), Ok(_)) => Ordering::Greater,
                        (Err(_), Err(_)) => a.cmp(b),
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                self.pre.len().cmp(&other.pre.len())
            }
        })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An object written by a newer controller than this one: why this one must stop leading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newer {
    /// The version stamped on the object.
    pub theirs: String,
    /// This process's version.
    pub mine: String,
}

/// Whether `annotations` say a controller newer than `mine` wrote the object (pure). An
/// absent or unreadable stamp is not newer: objects written before the stamp existed, or by
/// hand, do not stop a leader (an unreadable one is named by the caller's log, not obeyed).
pub fn newer_writer(annotations: &BTreeMap<String, String>, mine: &str) -> Option<Newer> {
    let theirs = annotations.get(WRITTEN_BY)?;
    let (t, m) = (Version::parse(theirs)?, Version::parse(mine)?);
    (t > m).then(|| Newer { theirs: theirs.clone(), mine: mine.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn versions_order_as_semver() {
        assert!(v("0.10.0") > v("0.9.9"), "numeric, not lexical");
        assert!(v("1.0.0") > v("0.99.99"));
        assert!(v("0.2.0") > v("0.2.0-rc.1"), "a release is newer than its pre-release");
        assert!(v("0.2.0-rc.10") > v("0.2.0-rc.9"));
        assert!(v("0.2.0-rc.1") > v("0.2.0-beta"), "alphanumeric identifiers order lexically");
        assert!(v("0.2.0-alpha.1") > v("0.2.0-alpha"));
        assert_eq!(v("0.2.0+build.5"), v("0.2.0"), "build metadata does not order");
        assert_eq!(v("v1.2.3"), v("1.2.3"));
    }

    #[test]
    fn what_is_not_a_version_is_refused() {
        for bad in ["", "1", "1.2", "1.2.3.4", "a.b.c", "1.-2.3", "1.2.3-", "1..3"] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        assert!(set_version("later").is_err());
    }

    #[test]
    fn only_a_newer_stamp_is_a_newer_writer() {
        let ann = |s: &str| BTreeMap::from([(WRITTEN_BY.to_string(), s.to_string())]);
        assert_eq!(newer_writer(&ann("0.3.0"), "0.2.9"), Some(Newer { theirs: "0.3.0".into(), mine: "0.2.9".into() }));
        assert_eq!(newer_writer(&ann("0.2.9"), "0.2.9"), None, "the same version");
        assert_eq!(newer_writer(&ann("0.2.0"), "0.2.9"), None, "an older one");
        assert_eq!(newer_writer(&ann("garbage"), "0.2.9"), None, "unreadable");
        assert_eq!(newer_writer(&BTreeMap::new(), "0.2.9"), None, "written before stamps existed");
    }

    #[test]
    fn a_stamp_carries_this_process_s_version() {
        let mut ann = BTreeMap::new();
        stamp(&mut ann);
        assert_eq!(ann[WRITTEN_BY], version());
    }
}
