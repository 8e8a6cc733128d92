//! The Kubernetes release a simulated cluster answers as (`spanset sim --cluster-version
//! NAME=1.MINOR.PATCH`): what `/version` says, which API versions discovery lists, and which
//! behaviour spanset leans on the cluster keeps. Members of a federation are upgraded one at a
//! time, so a sandbox must be able to hold members of different releases side by side; each
//! difference modelled here is listed, with its source, in `docs/version-skew.md`.

use std::fmt;

/// The oldest minor release a simulated cluster can answer as: the first with pod scheduling
/// gates and StatefulSet start ordinals on by default, without which spanset cannot run there.
pub const OLDEST_MINOR: u32 = 27;
/// The newest minor release a simulated cluster can answer as.
pub const NEWEST_MINOR: u32 = 37;

/// The minor release a cluster answers as unless told otherwise: the newest whose kubectl the
/// project's machines carry beside the sandbox (`kubectl.1.27` … `kubectl.1.33`), so that the
/// kubectl a new user has is within its supported skew of the server.
pub const DEFAULT_MINOR: u32 = 33;

/// A Kubernetes release `1.MINOR.PATCH`, within [`OLDEST_MINOR`]..=[`NEWEST_MINOR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    /// The minor version (`27` of `1.27.16`).
    pub minor: u32,
    /// The patch version (`16` of `1.27.16`).
    pub patch: u32,
}

impl Default for Release {
    /// The release every cluster answered as before releases could be chosen.
    fn default() -> Self {
        Self { minor: DEFAULT_MINOR, patch: 1 }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}.{}", self.minor, self.patch)
    }
}

impl Release {
    /// Reads `1.MINOR.PATCH` (a leading `v` is allowed); the error says what is wrong and which
    /// releases are supported.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bare = text.strip_prefix('v').unwrap_or(text);
        let parts: Vec<&str> = bare.split('.').collect();
        let number = |s: &str| s.parse::<u32>().ok().filter(|_| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        let (major, minor, patch) = match parts.as_slice() {
            [major, minor, patch] => (number(major), number(minor), number(patch)),
            _ => (None, None, None),
        };
        let (Some(major), Some(minor), Some(patch)) = (major, minor, patch) else {
            return Err(format!("{text:?} is not a release like 1.30.4"));
        };
        if major != 1 || !(OLDEST_MINOR..=NEWEST_MINOR).contains(&minor) {
            return Err(format!("{text}: only releases 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR} are simulated"));
        }
        Ok(Self { minor, patch })
    }

    /// `gitVersion` of `/version` (and the kubelets' version on their Nodes).
    pub fn git_version(&self) -> String {
        format!("v{self}")
    }

    /// Whether `admissionregistration.k8s.io/v1` serves ValidatingAdmissionPolicy and its
    /// bindings (GA in 1.30). Before, v1beta1 (1.28–1.29) and v1alpha1 (1.26–1.27) were off by
    /// default, so a cluster as installed serves none: the policies cannot be created and guard
    /// nothing.
    pub fn serves_admission_policies(&self) -> bool {
        self.minor >= 30
    }

    /// Whether aggregated discovery is served as `apidiscovery.k8s.io/v2` (GA in 1.30); before
    /// that only `v2beta1` (on by default from 1.27).
    pub fn serves_discovery_v2(&self) -> bool {
        self.minor >= 30
    }

    /// Whether the scheduler holds a pod while its `spec.schedulingGates` are set
    /// (PodSchedulingReadiness: beta and on by default in 1.27, GA in 1.30). True of every
    /// simulated release; kept as a rule so that the floor is said where it is relied on.
    pub fn honours_scheduling_gates(&self) -> bool {
        self.minor >= 27
    }

    /// Whether StatefulSets keep `.spec.ordinals` (StatefulSetStartOrdinal: beta and on by
    /// default in 1.27, GA in 1.31). True of every simulated release, like
    /// [`Release::honours_scheduling_gates`]; a server dropping it is still modelled by the
    /// `drop-ordinals` fault.
    pub fn keeps_start_ordinals(&self) -> bool {
        self.minor >= 27
    }

    /// Whether init containers may be sidecars (`restartPolicy: Always` on an init container;
    /// SidecarContainers: alpha and off by default in 1.28, beta and on by default from 1.29).
    /// Before, the apiserver does not keep the field — 1.28 drops it as a field of a disabled
    /// gate, 1.27 does not know it — so such a container is an ordinary init container, which
    /// must exit before the next one starts.
    pub fn runs_sidecars(&self) -> bool {
        self.minor >= 29
    }

    /// How a CRD's failed `x-kubernetes-validations` rule shows the value of its node. Through
    /// 1.34 the apiserver prints the node's schema type (`spec: Invalid value: "object": …`);
    /// from 1.35 the value itself, and nothing for an object or a list (`spec: Invalid value:
    /// …`, `spec.size: Invalid value: 3: …`). Rules that cannot be evaluated still print the type.
    pub fn shows_failed_rule_values(&self) -> bool {
        self.minor >= 35
    }

    /// Whether the StatefulSet controller's Events title-case their verb (`Create Pod web-0 in
    /// StatefulSet web successful`), as their reasons always did: from 1.35.
    pub fn titles_statefulset_event_verbs(&self) -> bool {
        self.minor >= 35
    }

    /// Whether the StatefulSet controller counts a delete of a pod already gone as done (a
    /// `SuccessfulDelete` Event; before, it failed and recorded nothing): from 1.36.
    pub fn counts_a_gone_pod_as_deleted(&self) -> bool {
        self.minor >= 36
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_supported_releases_and_names_the_range_otherwise() {
        assert_eq!(Release::parse("1.27.16"), Ok(Release { minor: 27, patch: 16 }));
        assert_eq!(Release::parse("v1.30.4").map(|r| r.git_version()), Ok("v1.30.4".to_string()));
        assert_eq!(Release::parse("1.37.2").map(|r| r.to_string()), Ok("1.37.2".to_string()));
        assert_eq!(Release::default().git_version(), "v1.33.1", "the default is not the newest");
        for old_or_new in ["1.26.15", "1.38.0", "2.30.0"] {
            let e = Release::parse(old_or_new).unwrap_err();
            assert!(e.contains("only releases 1.27 to 1.37"), "{old_or_new}: {e}");
        }
        for bad in ["1.30", "1.30.x", "", "1..30.1", "1.30.+1", "1.30.4.1"] {
            assert!(Release::parse(bad).unwrap_err().contains("is not a release like"), "{bad}");
        }
    }

    #[test]
    fn admission_policies_and_discovery_v2_arrive_in_1_30() {
        let at = |minor| Release { minor, patch: 0 };
        assert!(!at(27).serves_admission_policies() && !at(29).serves_admission_policies());
        assert!(at(30).serves_admission_policies() && at(33).serves_admission_policies());
        assert!(!at(29).serves_discovery_v2() && at(30).serves_discovery_v2());
        assert!(at(27).honours_scheduling_gates() && at(27).keeps_start_ordinals());
        assert!(!at(27).runs_sidecars() && !at(28).runs_sidecars() && at(29).runs_sidecars());
    }

    #[test]
    fn rule_values_and_event_verbs_change_in_1_35_and_gone_pods_count_as_deleted_from_1_36() {
        let at = |minor| Release { minor, patch: 0 };
        assert!(!at(34).shows_failed_rule_values() && at(35).shows_failed_rule_values());
        assert!(!at(34).titles_statefulset_event_verbs() && at(35).titles_statefulset_event_verbs());
        assert!(!at(35).counts_a_gone_pod_as_deleted() && at(36).counts_a_gone_pod_as_deleted());
    }
}
