//! The example federation of the README and the sandbox: 6 replicas of redis over the members.
//! Unit tests of the controller build on it too, so it is here rather than in the sandbox
//! (which the production build leaves out).

use super::{FederatedStatefulSet, FederatedStatefulSetSpec};

/// The example federation: 6 replicas of redis, weights 1:1:1 over the members.
pub fn example(members: &[String]) -> FederatedStatefulSet {
    let clusters: Vec<serde_json::Value> =
        members.iter().map(|m| serde_json::json!({"name": m, "weight": 1})).collect();
    let spec: FederatedStatefulSetSpec = serde_json::from_value(serde_json::json!({
        "replicas": 6,
        "template": {
            "selector": {"matchLabels": {"app": "redis"}},
            "serviceName": "redis",
            "template": {
                "metadata": {"labels": {"app": "redis"}},
                "spec": {"containers": [{"name": "redis", "image": "redis:7",
                    "ports": [{"name": "redis", "containerPort": 6379}]}]}
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        },
        "placement": {"clusters": clusters},
    }))
    .expect("the example spec is valid");
    let mut f = FederatedStatefulSet::new("redis", spec);
    f.metadata.namespace = Some("default".into());
    f
}
