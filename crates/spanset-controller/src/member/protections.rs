//! The guards spanset relies on in a member, and whether the member's Kubernetes release keeps
//! them: its admission policies (served from 1.30), its identity gate (pod scheduling gates,
//! on by default from 1.27) and its slices' start ordinals (on by default from 1.27). A member
//! of an older release lacks some; spanset says so rather than believe it is guarded
//! (docs/version-skew.md). A member that serves the policies holds them only once spanset has
//! read each one back as `spanset join` installs it ([`super::policies`]).

use std::sync::Arc;

use kube::Client;
use spanset_api::MemberGuard;

use super::policies::Readback;

/// The member's ValidatingAdmissionPolicies (`deploy/member/admission.yaml`).
pub const ADMISSION_POLICIES: &str = "AdmissionPolicies";
/// Pod scheduling gates, which hold a pod of a moving ordinal until spanset lifts its gate.
pub const IDENTITY_GATE: &str = "IdentityGate";
/// StatefulSet `.spec.ordinals`, which a slice needs.
pub const START_ORDINALS: &str = "StartOrdinals";

/// The API group and version serving ValidatingAdmissionPolicies as spanset writes them.
pub const POLICY_GROUP_VERSION: &str = "admissionregistration.k8s.io/v1";
/// Their resource there.
pub const POLICY_RESOURCE: &str = "validatingadmissionpolicies";
/// The first minor release that runs native sidecars by default (SidecarContainers beta): a
/// pod lease's watch is one.
pub const SIDECARS_SINCE_MINOR: u32 = 29;
/// The first minor release with pod scheduling gates on by default (PodSchedulingReadiness beta).
pub const GATES_SINCE_MINOR: u32 = 27;

/// What a member showed that decides its guards; `None` while unread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardFacts {
    /// The minor version of `/version` (`27` of `"27"` or `"27+"`).
    pub minor: Option<u32>,
    /// Whether discovery lists ValidatingAdmissionPolicies in [`POLICY_GROUP_VERSION`].
    pub serves_policies: Option<bool>,
    /// What the latest read-back of the policies and bindings `spanset join` installs found
    /// (shared: every federation's view of the member carries it). Where they are served,
    /// only [`Readback::AsShipped`] puts them in force; unread, they are not.
    pub installed: Option<Arc<Readback>>,
    /// Whether it keeps `.spec.ordinals` of StatefulSets.
    pub keeps_ordinals: Option<bool>,
}

/// The minor version of a `/version` answer: its leading digits (providers append `+`).
pub fn minor_of(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The guards the facts decide, in a fixed order; those still unknown are left out.
pub fn guards(f: &GuardFacts) -> Vec<MemberGuard> {
    let guard = |name: &str, in_force: bool, message: String| MemberGuard { name: name.into(), in_force, message };
    let mut out = Vec::new();
    match (f.serves_policies, f.installed.as_deref()) {
        (Some(true), Some(readback)) if readback.in_force() => out.push(guard(
            ADMISSION_POLICIES,
            true,
            "spanset read back every ValidatingAdmissionPolicy and binding that spanset join installs, each as \
             shipped"
                .into(),
        )),
        // Served but not seen as installed: the member is as unguarded as one that serves none.
        (Some(true), readback) => out.push(guard(
            ADMISSION_POLICIES,
            false,
            format!(
                "{}; spanset counts on none of the member's admission policies until `spanset join` restores them \
                 (only the controller reverts what it finds there)",
                readback.map_or_else(|| "not read back yet".into(), Readback::findings)
            ),
        )),
        (Some(false), _) => out.push(guard(
            ADMISSION_POLICIES,
            false,
            format!(
                "{POLICY_GROUP_VERSION} does not serve {POLICY_RESOURCE} (Kubernetes 1.30 and later do): nothing in the \
                 member refuses others' changes to spanset's StatefulSets and gates, pods created with a federation's \
                 identity, or a stale leader's late write; only the controller reverts what it finds"
            ),
        )),
        (None, _) => {}
    }
    if let Some(minor) = f.minor {
        out.push(if minor >= GATES_SINCE_MINOR {
            guard(IDENTITY_GATE, true, format!("Kubernetes 1.{minor} holds pods at their scheduling gates"))
        } else {
            guard(
                IDENTITY_GATE,
                false,
                format!(
                    "Kubernetes 1.{minor} does not hold pods at scheduling gates by default (1.{GATES_SINCE_MINOR} and \
                     later do): a moving ordinal's pod could start before its old one is gone"
                ),
            )
        });
    }
    match f.keeps_ordinals {
        Some(true) => out.push(guard(START_ORDINALS, true, "the member keeps StatefulSet .spec.ordinals".into())),
        Some(false) => out.push(guard(
            START_ORDINALS,
            false,
            "the member drops StatefulSet .spec.ordinals: it gets no slice".into(),
        )),
        None => {}
    }
    out
}

/// Whether the member's discovery lists ValidatingAdmissionPolicies in
/// [`POLICY_GROUP_VERSION`]: a 404 for the group version means it does not; other failures
/// are the caller's to judge.
pub async fn serves_admission_policies(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(POLICY_GROUP_VERSION).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == POLICY_RESOURCE)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        super::policies::{Amiss, Kind},
        *,
    };

    #[test]
    fn a_provider_suffix_is_read_past() {
        assert_eq!(minor_of("27"), Some(27));
        assert_eq!(minor_of("30+"), Some(30));
        assert_eq!(minor_of(""), None);
    }

    #[test]
    fn each_guard_is_said_once_known_and_in_force_only_when_kept() {
        assert!(guards(&GuardFacts::default()).is_empty(), "nothing read, nothing said");
        let old =
            GuardFacts { minor: Some(29), serves_policies: Some(false), keeps_ordinals: Some(true), installed: None };
        let said: Vec<(String, bool)> = guards(&old).into_iter().map(|g| (g.name, g.in_force)).collect();
        assert_eq!(
            said,
            [(ADMISSION_POLICIES.into(), false), (IDENTITY_GATE.into(), true), (START_ORDINALS.into(), true)]
        );
        let new = GuardFacts {
            minor: Some(33),
            serves_policies: Some(true),
            keeps_ordinals: Some(true),
            installed: Some(Arc::new(Readback::AsShipped)),
        };
        assert!(guards(&new).iter().all(|g| g.in_force));
        let ancient =
            GuardFacts { minor: Some(26), serves_policies: Some(false), keeps_ordinals: Some(false), installed: None };
        assert!(guards(&ancient).iter().all(|g| !g.in_force));
    }

    #[test]
    fn served_policies_are_in_force_only_once_read_back_as_shipped() {
        let policies = |installed: Option<Readback>| {
            let f =
                GuardFacts { serves_policies: Some(true), installed: installed.map(Arc::new), ..Default::default() };
            let g = guards(&f).into_iter().find(|g| g.name == ADMISSION_POLICIES).expect("said once served");
            (g.in_force, g.message)
        };
        let (in_force, message) = policies(None);
        assert!(!in_force, "served is not installed: {message}");
        assert!(message.starts_with("not read back yet; spanset counts on none"), "{message}");
        let missing = Readback::of(vec![(Kind::Binding, "spanset-owner".into(), Amiss::Missing)]);
        let (in_force, message) = policies(Some(missing));
        assert!(!in_force);
        assert!(message.starts_with("validatingadmissionpolicybinding spanset-owner is missing; "), "{message}");
        assert!(message.contains("until `spanset join` restores them"), "{message}");
        assert!(!policies(Some(Readback::Failed("timeout".into()))).0, "nothing seen, nothing claimed");
        assert!(policies(Some(Readback::AsShipped)).0);
        // A member that serves none keeps its own words, whatever was read before.
        let old = GuardFacts {
            serves_policies: Some(false),
            installed: Some(Arc::new(Readback::AsShipped)),
            ..Default::default()
        };
        let said = guards(&old);
        assert!(!said[0].in_force && said[0].message.starts_with("admissionregistration.k8s.io/v1 does not serve"));
    }
}
