//! How member pods are replaced and scaled: a StatefulSet's `updateStrategy`, plus what only
//! OpenKruise's Advanced StatefulSet understands — `rollingUpdate.podUpdatePolicy` (in-place
//! update) and `scaleStrategy.maxUnavailable`. Typed, so that the CRD schema refuses unknown
//! fields instead of spanset dropping them; the Kruise-only fields are refused for apps/v1
//! (by a CEL rule, and by the controller naming the field).

use k8s_openapi::{
    api::apps::v1::{RollingUpdateStatefulSetStrategy, StatefulSetUpdateStrategy},
    apimachinery::pkg::util::intstr::IntOrString,
};
use serde::{Deserialize, Serialize};

/// When pods are replaced after a template change.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
pub enum UpdateStrategyType {
    /// Replace pods, highest ordinal first (the default).
    RollingUpdate,
    /// Replace a pod only when someone deletes it.
    OnDelete,
}

/// How an Advanced StatefulSet replaces a pod for a new template.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
pub enum PodUpdatePolicy {
    /// Delete and recreate (Kruise's default).
    ReCreate,
    /// Update the running pod when only container images change (same uid, node and volumes;
    /// the containers restart); recreate it otherwise.
    InPlaceIfPossible,
    /// Update in place only; other changes are not applied to running pods.
    InPlaceOnly,
}

/// A member StatefulSet's `updateStrategy`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<UpdateStrategyType>,
    /// Rolling update settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdate>,
}

/// `updateStrategy.rollingUpdate`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    /// Pods below this ordinal index of each slice keep the old template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub partition: Option<i32>,
    /// Most pods of a slice unavailable during the update (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// `backend: AdvancedStatefulSet` only: `ReCreate` (default), `InPlaceIfPossible` or
    /// `InPlaceOnly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<PodUpdatePolicy>,
}

/// `backend: AdvancedStatefulSet` only: Kruise's `scaleStrategy`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStrategy {
    /// Most of a slice's wanted pods missing or unavailable at once while it scales
    /// (`podManagementPolicy: Parallel`; a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

impl UpdateStrategy {
    /// The apps/v1 subset (what an apps/v1 member StatefulSet can hold).
    pub fn to_apps_v1(&self) -> StatefulSetUpdateStrategy {
        StatefulSetUpdateStrategy {
            type_: self.type_.map(|t| format!("{t:?}")),
            rolling_update: self.rolling_update.as_ref().map(|r| RollingUpdateStatefulSetStrategy {
                partition: r.partition,
                max_unavailable: r.max_unavailable.clone(),
            }),
        }
    }

    /// The Kruise-only policy, if set.
    pub fn pod_update_policy(&self) -> Option<PodUpdatePolicy> {
        self.rolling_update.as_ref().and_then(|r| r.pod_update_policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apps_v1_subset_keeps_partition_and_drops_only_the_kruise_policy() {
        let s: UpdateStrategy = serde_json::from_value(serde_json::json!({"type": "RollingUpdate",
            "rollingUpdate": {"partition": 2, "maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible"}}))
        .unwrap();
        assert_eq!(s.pod_update_policy(), Some(PodUpdatePolicy::InPlaceIfPossible));
        let v1 = serde_json::to_value(s.to_apps_v1()).unwrap();
        assert_eq!(
            v1,
            serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2, "maxUnavailable": "50%"}})
        );
        assert_eq!(serde_json::to_value(&s).unwrap()["rollingUpdate"]["podUpdatePolicy"], "InPlaceIfPossible");
    }
}
