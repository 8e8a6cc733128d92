//! The guards spanset ships for its members (`deploy/member/admission.yaml`), evaluated by the
//! sandbox's admission on one cluster: each refuses what it must, with its message, and lets
//! through what spanset and the cluster's other users do.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Operation, Request};
use crate::sim::{
    cluster::{Cluster, ClusterConfig},
    store::{
        error::ApiError,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
        tokens::UserInfo,
    },
};

const SHIPPED: &str = include_str!("../../../../deploy/member/admission.yaml");

fn spanset() -> UserInfo {
    UserInfo::service_account("spanset-system", "spanset-member")
}

/// A member with the shipped guards, a spanset StatefulSet `redis` (stamped with term 3) and
/// its pod, a user's StatefulSet `web`, and a PersistentVolume.
fn member() -> Arc<Cluster> {
    member_with(false)
}

/// [`member`], with OpenKruise installed or not.
fn member_with(kruise: bool) -> Arc<Cluster> {
    let c = Cluster::new(ClusterConfig { kruise, ..ClusterConfig::named("member") });
    for doc in serde_yaml::Deserializer::from_str(SHIPPED) {
        let doc: Value = serde::Deserialize::deserialize(doc).unwrap();
        let plural = match doc["kind"].as_str() {
            Some("ValidatingAdmissionPolicy") => "validatingadmissionpolicies",
            _ => "validatingadmissionpolicybindings",
        };
        c.create(&rt(&c, "admissionregistration.k8s.io", plural), None, doc, &WriteOptions::default())
            .expect("the shipped guards are valid");
    }
    let none = WriteOptions::default();
    c.create(&rt(&c, "apps", "statefulsets"), Some("default"), sts("redis", true), &none).unwrap();
    c.create(&rt(&c, "apps", "statefulsets"), Some("default"), sts("web", false), &none).unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "redis-0", "labels": {"app": "redis", "spanset.dev/federation": "redis"}},
        "spec": {"schedulingGates": [{"name": "spanset.dev/identity"}],
                 "containers": [{"name": "c", "image": "redis:7"}]}});
    c.create(&rt(&c, "", "pods"), Some("default"), pod, &none).unwrap();
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": "/data/pv-1"}}});
    c.create(&rt(&c, "", "persistentvolumes"), None, pv, &none).unwrap();
    c
}

fn rt(c: &Cluster, group: &str, plural: &str) -> Arc<ResourceType> {
    c.resources.by_plural(group, plural).unwrap()
}

fn sts(name: &str, spanset: bool) -> Value {
    let (labels, notes) = if spanset {
        (
            json!({"app.kubernetes.io/managed-by": "spanset", "spanset.dev/federation": name,
                   "spanset.dev/federation-namespace": "default"}),
            json!({"spanset.dev/term": "3"}),
        )
    } else {
        (json!({}), json!({}))
    };
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": name, "labels": labels, "annotations": notes},
           "spec": {"replicas": 3, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
}

fn edit(
    c: &Cluster,
    who: UserInfo,
    (group, plural, ns, name): (&str, &str, &str, &str),
    f: impl FnOnce(&mut Value),
) -> Result<(), ApiError> {
    let opts = WriteOptions { user: Some(who), ..Default::default() };
    c.update_with(&rt(c, group, plural), ns, name, Subresource::Main, &opts, |cur| {
        let mut next = cur.clone();
        f(&mut next);
        Ok(next)
    })
    .map(|_| ())
}

fn refused(r: Result<(), ApiError>, policy: &str, says: &str) {
    let e = r.expect_err("refused");
    let head = format!("ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: ");
    assert_eq!((e.code, e.reason), (403, "Forbidden"), "{}", e.message);
    assert!(e.message.contains(&head) && e.message.contains(says), "{}", e.message);
}

const REDIS: (&str, &str, &str, &str) = ("apps", "statefulsets", "default", "redis");

#[test]
fn only_spanset_changes_its_statefulsets() {
    let c = member();
    let admin = UserInfo::admin;
    refused(
        edit(&c, admin(), REDIS, |s| s["spec"]["replicas"] = json!(5)),
        "spanset-owner",
        "the spec of StatefulSet default/redis is owned by spanset (FederatedStatefulSet default/redis in the host cluster)",
    );
    refused(
        edit(&c, admin(), REDIS, |s| s["metadata"]["annotations"]["spanset.dev/term"] = json!("9")),
        "spanset-owner",
        "the spanset.dev/ labels and annotations of StatefulSet default/redis are owned by spanset",
    );
    refused(
        edit(&c, admin(), REDIS, |s| {
            s["metadata"]["labels"].as_object_mut().unwrap().remove("spanset.dev/federation");
        }),
        "spanset-owner",
        "are owned by spanset",
    );
    edit(&c, admin(), REDIS, |s| s["metadata"]["labels"]["team"] = json!("db")).expect("other labels are the user's");
    edit(&c, admin(), ("apps", "statefulsets", "default", "web"), |s| s["spec"]["replicas"] = json!(5))
        .expect("the user's own StatefulSet");
    edit(&c, spanset(), REDIS, |s| s["spec"]["replicas"] = json!(5)).expect("spanset writes its slice");
}

#[test]
fn only_spanset_scales_its_statefulsets() {
    let c = member();
    let sets = rt(&c, "apps", "statefulsets");
    let scale = |name: &str, replicas: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}})
    };
    let admit = |who: &UserInfo, name: &str| {
        c.admit(&Request {
            operation: Operation::Update,
            resource: &sets,
            version: "v1",
            subresource: "scale",
            namespace: "default",
            name,
            object: Some(&scale(name, 5)),
            old_object: Some(&scale(name, 3)),
            kind: Some(("autoscaling", "v1", "Scale")),
            user: who,
            dry_run: false,
        })
    };
    refused(
        admit(&UserInfo::admin(), "redis"),
        "spanset-owner-scale",
        "the replicas of StatefulSet default/redis are owned by spanset (FederatedStatefulSet default/redis in the host cluster)",
    );
    admit(&UserInfo::admin(), "web").expect("the user's own StatefulSet scales");
    // spanset writes its slices through the StatefulSet itself, never through /scale (its role
    // grants no statefulsets/scale): a Scale carries no label, so its scope guard refuses one.
    refused(admit(&spanset(), "redis"), "spanset-member-scope", "UPDATE of statefulsets/scale default/redis refused");
}

#[test]
fn only_spanset_scales_its_advanced_statefulsets() {
    let c = member_with(true);
    let kruise = rt(&c, "apps.kruise.io", "statefulsets");
    let mut asts = sts("kv", true);
    asts["apiVersion"] = json!("apps.kruise.io/v1beta1");
    c.create(&kruise, Some("default"), asts, &WriteOptions::default()).unwrap();
    let scale = |n: i64| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": n}});
    let (after, before) = (scale(5), scale(3));
    let admin = UserInfo::admin();
    let request = Request {
        operation: Operation::Update,
        resource: &kruise,
        version: "v1beta1",
        subresource: "scale",
        namespace: "default",
        name: "kv",
        object: Some(&after),
        old_object: Some(&before),
        kind: Some(("autoscaling", "v1", "Scale")),
        user: &admin,
        dry_run: false,
    };
    refused(
        c.admit(&request),
        "spanset-owner-scale-kruise",
        "the replicas of Advanced StatefulSet default/kv are owned by spanset (FederatedStatefulSet default/kv in the host cluster)",
    );
    // Without OpenKruise the policy's param kind is not served, and nothing asks for it.
    let plain = member();
    let sets = rt(&plain, "apps", "statefulsets");
    let web = Request { resource: &sets, version: "v1", name: "web", ..request };
    plain.admit(&web).expect("an apps/v1 scale of a user's StatefulSet is no business of the kruise guard");
}

#[test]
fn a_stale_term_is_refused_to_spanset_itself() {
    let c = member();
    refused(
        edit(&c, spanset(), REDIS, |s| s["metadata"]["annotations"]["spanset.dev/term"] = json!("2")),
        "spanset-member-term",
        "statefulsets default/redis is stamped with spanset.dev/term 3 and this write carries term 2: a newer spanset leader has written it, this writer is stale",
    );
    refused(
        edit(&c, spanset(), REDIS, |s| {
            s["metadata"]["annotations"].as_object_mut().unwrap().remove("spanset.dev/term");
        }),
        "spanset-member-term",
        "this write carries no term",
    );
    edit(&c, spanset(), REDIS, |s| s["spec"]["replicas"] = json!(4)).expect("the same term");
    edit(&c, spanset(), REDIS, |s| s["metadata"]["annotations"]["spanset.dev/term"] = json!("10"))
        .expect("a newer term (compared as numbers)");
}

#[test]
fn spanset_writes_only_what_it_manages() {
    let c = member();
    let none = WriteOptions::default();
    let as_spanset = WriteOptions { user: Some(spanset()), ..Default::default() };
    let services = rt(&c, "", "services");
    let svc = |ns: &str, name: &str, ours: bool| {
        let labels = if ours { json!({"spanset.dev/federation": "redis"}) } else { json!({}) };
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels},
               "spec": {"ports": [{"port": 53}]}})
    };
    c.create(&services, Some("kube-system"), svc("kube-system", "kube-dns", false), &none).unwrap();
    c.create(&services, Some("default"), svc("default", "users", false), &none).unwrap();
    let delete = |ns: &str, name: &str| {
        let opts = DeleteOptions { user: Some(spanset()), ..Default::default() };
        c.delete(&services, ns, name, &opts).map(|_| ())
    };
    refused(
        delete("kube-system", "kube-dns"),
        "spanset-member-scope",
        "spanset's member identity writes nothing in namespace kube-system",
    );
    refused(
        delete("default", "users"),
        "spanset-member-scope",
        "spanset's member identity writes only what spanset manages (labelled spanset.dev/federation): DELETE of services default/users refused",
    );
    refused(
        c.create(&services, Some("default"), svc("default", "plain", false), &as_spanset).map(|_| ()),
        "spanset-member-scope",
        "CREATE of services default/plain refused",
    );
    c.create(&services, Some("default"), svc("default", "redis", true), &as_spanset).expect("its own Service");
    delete("default", "redis").expect("and deletes it");
    // Namespaces: created labelled as spanset's; nobody else's touched.
    let namespaces = rt(&c, "", "namespaces");
    let ns = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    c.create(&namespaces, None, ns("shop", json!({"app.kubernetes.io/managed-by": "spanset"})), &as_spanset)
        .expect("a namespace spanset creates");
    refused(
        c.create(&namespaces, None, ns("other", json!({})), &as_spanset).map(|_| ()),
        "spanset-member-scope",
        "(labelled app.kubernetes.io/managed-by=spanset): CREATE of namespaces other refused",
    );
    // Pods: spanset lifts its gate; it may not touch a pod that is not a federation's.
    edit(&c, spanset(), ("", "pods", "default", "redis-0"), |p| {
        p["spec"].as_object_mut().unwrap().remove("schedulingGates");
        p["metadata"]["annotations"] = json!({"spanset.dev/term": "3"});
    })
    .expect("spanset releases its pod");
    // The storage handover: Retain on a volume spanset does not manage, and nothing else.
    let pv = ("", "persistentvolumes", "", "pv-1");
    refused(
        edit(&c, spanset(), pv, |v| {
            v["spec"]["persistentVolumeReclaimPolicy"] = json!("Retain");
            v["spec"]["capacity"]["storage"] = json!("2Gi");
        }),
        "spanset-member-scope",
        "UPDATE of persistentvolumes pv-1 refused",
    );
    edit(&c, spanset(), pv, |v| v["spec"]["persistentVolumeReclaimPolicy"] = json!("Retain")).expect("Retain");
}

#[test]
fn nobody_else_lifts_spanset_s_gate() {
    let c = member();
    let pod = ("", "pods", "default", "redis-0");
    refused(
        edit(&c, UserInfo::admin(), pod, |p| {
            p["spec"].as_object_mut().unwrap().remove("schedulingGates");
        }),
        "spanset-owner-gates",
        "pod default/redis-0 waits for spanset to confirm that no other cluster runs its ordinal: only spanset removes its scheduling gate",
    );
    edit(&c, UserInfo::admin(), pod, |p| p["metadata"]["labels"]["team"] = json!("db")).expect("labels are free");
}

/// `spec.disruption`: spanset's identity creates, changes and deletes its own labelled
/// PodDisruptionBudget, and no budget of anyone else's.
#[test]
fn spanset_writes_only_its_own_disruption_budgets() {
    let c = member();
    let pdbs = rt(&c, "policy", "poddisruptionbudgets");
    let as_spanset = WriteOptions { user: Some(spanset()), ..Default::default() };
    let pdb = |name: &str, ours: bool| {
        let labels = if ours { json!({"spanset.dev/federation": name}) } else { json!({}) };
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": name, "namespace": "default", "labels": labels,
                            "annotations": {"spanset.dev/term": "3"}},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}})
    };
    c.create(&pdbs, Some("default"), pdb("web", false), &WriteOptions::default()).unwrap();
    refused(
        c.create(&pdbs, Some("default"), pdb("cache", false), &as_spanset).map(|_| ()),
        "spanset-member-scope",
        "CREATE of poddisruptionbudgets default/cache refused",
    );
    refused(
        edit(&c, spanset(), ("policy", "poddisruptionbudgets", "default", "web"), |p| {
            p["spec"]["minAvailable"] = json!(0);
            p["metadata"]["labels"] = json!({"spanset.dev/federation": "web"});
        }),
        "spanset-member-scope",
        "UPDATE of poddisruptionbudgets default/web refused",
    );
    let opts = DeleteOptions { user: Some(spanset()), ..Default::default() };
    refused(
        c.delete(&pdbs, "default", "web", &opts).map(|_| ()),
        "spanset-member-scope",
        "DELETE of poddisruptionbudgets default/web refused",
    );
    c.create(&pdbs, Some("default"), pdb("redis", true), &as_spanset).expect("its own budget");
    edit(&c, spanset(), ("policy", "poddisruptionbudgets", "default", "redis"), |p| {
        p["spec"]["minAvailable"] = json!(2);
    })
    .expect("changes it");
    c.delete(&pdbs, "default", "redis", &opts).expect("and deletes it");
}
