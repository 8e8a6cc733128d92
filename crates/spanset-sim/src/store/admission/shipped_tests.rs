//! The guards spanset ships for its members (`deploy/member/admission.yaml`), evaluated by the
//! sandbox's admission on one cluster: each refuses what it must, with its message, and lets
//! through what spanset and the cluster's other users do.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Operation, Request};
use crate::{
    cluster::{Cluster, ClusterConfig},
    store::{
        error::ApiError,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
        tokens::UserInfo,
    },
};

const SHIPPED: &str = include_str!("../../../../../deploy/member/admission.yaml");

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

/// A pod's or claim's spanset labels and annotations are how spanset counts an identity's pods:
/// spanset and the member's own controllers change them, nobody else (a removed label was how a
/// pod hid from a selector).
#[test]
fn only_spanset_and_the_member_s_controllers_change_spanset_s_labels_on_pods_and_claims() {
    let c = member();
    let none = WriteOptions::default();
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-redis-0", "labels": {"app": "redis", "spanset.dev/federation": "redis"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    c.create(&rt(&c, "", "persistentvolumeclaims"), Some("default"), claim, &none).unwrap();
    let web = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    c.create(&rt(&c, "", "pods"), Some("default"), web, &none).unwrap();
    let pod = ("", "pods", "default", "redis-0");
    let unlabel = |p: &mut Value| {
        p["metadata"]["labels"].as_object_mut().unwrap().remove("spanset.dev/federation");
    };
    refused(
        edit(&c, UserInfo::admin(), pod, unlabel),
        "spanset-owner-labels",
        "the spanset.dev/ labels and annotations of pod default/redis-0 are owned by spanset \
         (FederatedStatefulSet default/redis in the host cluster): spanset counts the pods of each identity by them",
    );
    refused(
        edit(&c, UserInfo::admin(), pod, |p| p["metadata"]["labels"]["spanset.dev/federation"] = json!("pg")),
        "spanset-owner-labels",
        "of pod default/redis-0 are owned by spanset",
    );
    refused(
        edit(&c, UserInfo::admin(), pod, |p| p["metadata"]["annotations"] = json!({"spanset.dev/term": "9"})),
        "spanset-owner-labels",
        "of pod default/redis-0 are owned by spanset",
    );
    refused(
        edit(&c, UserInfo::admin(), ("", "persistentvolumeclaims", "default", "data-redis-0"), unlabel),
        "spanset-owner-labels",
        "the spanset.dev/ labels and annotations of PersistentVolumeClaim default/data-redis-0 are owned by spanset",
    );
    // Nor is another workload's pod made to look like one of a federation's.
    refused(
        edit(&c, UserInfo::admin(), ("", "pods", "default", "web-0"), |p| {
            p["metadata"]["labels"]["spanset.dev/federation"] = json!("web");
        }),
        "spanset-owner-labels",
        "of pod default/web-0 are owned by spanset",
    );
    edit(&c, UserInfo::admin(), pod, |p| p["metadata"]["labels"]["team"] = json!("db")).expect("other labels are free");
    edit(&c, spanset(), pod, |p| p["metadata"]["annotations"] = json!({"spanset.dev/term": "4"}))
        .expect("spanset stamps its release");
    for controller in [
        UserInfo::service_account("kube-system", "statefulset-controller"),
        UserInfo::service_account("kube-system", "generic-garbage-collector"),
        UserInfo::named("system:kube-controller-manager", vec![]),
    ] {
        edit(&c, controller.clone(), pod, |p| p["metadata"]["annotations"]["spanset.dev/x"] = json!("1"))
            .unwrap_or_else(|e| panic!("{}: {}", controller.name, e.message));
    }
    edit(
        &c,
        UserInfo::service_account("kube-system", "persistent-volume-binder"),
        ("", "persistentvolumeclaims", "default", "data-redis-0"),
        |p| p["metadata"]["annotations"] = json!({"spanset.dev/x": "1", "pv.kubernetes.io/bind-completed": "yes"}),
    )
    .expect("the volume binder");
}

/// Creates pod `name` in `default` as `who`, labelled with `label` (the federation) and gated or
/// not, on member `c`.
fn create_pod(c: &Cluster, who: UserInfo, name: &str, label: Option<&str>, gated: bool) -> Result<(), ApiError> {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "redis:7"}]}});
    if let Some(f) = label {
        pod["metadata"]["labels"]["spanset.dev/federation"] = json!(f);
    }
    if gated {
        pod["spec"]["schedulingGates"] = json!([{"name": "spanset.dev/identity"}]);
    }
    let opts = WriteOptions { user: Some(who), ..Default::default() };
    c.create(&rt(c, "", "pods"), Some("default"), pod, &opts).map(|_| ())
}

/// A pod bearing a federation's identity, by label or by the name of a spanset StatefulSet's
/// pod, is created behind spanset's identity gate unless the member's StatefulSet controller
/// creates it.
#[test]
fn a_pod_bearing_an_identity_is_created_only_behind_spanset_s_gate() {
    let c = member();
    let admin = UserInfo::admin;
    refused(
        create_pod(&c, admin(), "redis-1", None, false),
        "spanset-identity-gate-names",
        "pod default/redis-1 bears the name of a pod of StatefulSet default/redis (FederatedStatefulSet \
         default/redis in the host cluster) without the spanset.dev/identity scheduling gate: only spanset starts \
         a pod of a federation, once no other cluster runs its ordinal",
    );
    // Labelled, in a name no spanset StatefulSet here has (its federation has no slice here).
    refused(
        create_pod(&c, admin(), "cache-0", Some("cache"), false),
        "spanset-identity-gate",
        "pod default/cache-0 carries the identity of FederatedStatefulSet default/cache (label \
         spanset.dev/federation) without the spanset.dev/identity scheduling gate",
    );
    // Labelled and named both: refused, by one guard or the other.
    let e = create_pod(&c, admin(), "redis-2", Some("redis"), false).expect_err("refused");
    assert!(e.message.contains("pod default/redis-2") && e.message.contains("spanset.dev/identity"), "{}", e.message);
    create_pod(&c, admin(), "redis-3", Some("redis"), true).expect("behind the gate it waits for spanset");
    create_pod(&c, admin(), "redis-4", None, true).expect("behind the gate, unlabelled");
    for other in ["web-1", "redis-04", "redis-cache-0", "redis-x", "redis"] {
        create_pod(&c, admin(), other, None, false).unwrap_or_else(|e| panic!("{other}: {}", e.message));
    }
    let controller = UserInfo::service_account("kube-system", "statefulset-controller");
    create_pod(&c, controller, "redis-5", Some("redis"), false).expect("the member's StatefulSet controller");
    create_pod(&c, UserInfo::named("system:kube-controller-manager", vec![]), "redis-6", None, false)
        .expect("the controller manager's shared identity");
}

#[test]
fn a_pod_bearing_an_advanced_statefulset_s_pod_name_waits_behind_the_gate_too() {
    let c = member_with(true);
    let mut asts = sts("kv", true);
    asts["apiVersion"] = json!("apps.kruise.io/v1beta1");
    c.create(&rt(&c, "apps.kruise.io", "statefulsets"), Some("default"), asts, &WriteOptions::default()).unwrap();
    refused(
        create_pod(&c, UserInfo::admin(), "kv-0", None, false),
        "spanset-identity-gate-names-kruise",
        "pod default/kv-0 bears the name of a pod of Advanced StatefulSet default/kv",
    );
    let kruise = UserInfo::service_account("kruise-system", "kruise-manager");
    create_pod(&c, kruise, "kv-1", Some("kv"), false).expect("OpenKruise's manager creates its pods");
}

/// A federation's pod Lease is extended by spanset only: anyone else's write of one (create,
/// update, delete) is refused, the member's namespace controller may delete it, and other
/// Leases stay free.
#[test]
fn only_spanset_writes_a_federation_s_pod_lease() {
    let c = member();
    let leases = rt(&c, "coordination.k8s.io", "leases");
    let lease = |name: &str, ours: bool| {
        let notes = if ours { json!({"spanset.dev/ordinals": "0-1", "spanset.dev/extension": "7"}) } else { json!({}) };
        let labels = if ours { json!({"spanset.dev/federation": "redis"}) } else { json!({}) };
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": notes},
               "spec": {"holderIdentity": "spanset", "leaseDurationSeconds": 30}})
    };
    let as_user = |who: UserInfo| WriteOptions { user: Some(who), ..Default::default() };
    refused(
        c.create(&leases, Some("default"), lease("redis-pods", true), &as_user(UserInfo::admin())).map(|_| ()),
        "spanset-owner-leases",
        "Lease default/redis-pods is a spanset pod lease: only spanset extends it",
    );
    c.create(&leases, Some("default"), lease("redis-pods", true), &as_user(spanset())).expect("spanset makes it");
    let pod_lease = ("coordination.k8s.io", "leases", "default", "redis-pods");
    refused(
        edit(&c, UserInfo::admin(), pod_lease, |l| l["metadata"]["annotations"]["spanset.dev/extension"] = json!("8")),
        "spanset-owner-leases",
        "only spanset extends it",
    );
    // Nor is it turned into a plain Lease first.
    refused(
        edit(&c, UserInfo::admin(), pod_lease, |l| l["metadata"]["annotations"] = json!({})),
        "spanset-owner-leases",
        "only spanset extends it",
    );
    let delete = |who: UserInfo, name: &str| {
        c.delete(&leases, "default", name, &DeleteOptions { user: Some(who), ..Default::default() }).map(|_| ())
    };
    refused(delete(UserInfo::admin(), "redis-pods"), "spanset-owner-leases", "only spanset extends it");
    edit(&c, spanset(), pod_lease, |l| l["metadata"]["annotations"]["spanset.dev/extension"] = json!("8"))
        .expect("spanset extends it");
    delete(UserInfo::service_account("kube-system", "namespace-controller"), "redis-pods")
        .expect("a namespace being deleted takes it along");
    // Any other Lease is the cluster's own business.
    c.create(&leases, Some("default"), lease("elector", false), &as_user(UserInfo::admin())).expect("a plain Lease");
    edit(&c, UserInfo::admin(), ("coordination.k8s.io", "leases", "default", "elector"), |l| {
        l["spec"]["leaseDurationSeconds"] = json!(15);
    })
    .expect("renewed by its holder");
    delete(UserInfo::admin(), "elector").expect("and deleted");
}

/// RBAC cannot limit a `create` by name, so the guard does: spanset's identity writes no Role or
/// RoleBinding but the pod-lease guards' pair, which grants `get` on Leases by name and binds
/// that Role only to ServiceAccounts of its own namespace. A stolen member credential can then
/// neither hand its own powers to another subject nor make a Role of its choosing, even with
/// spanset's labels on it.
#[test]
fn spanset_writes_no_rbac_but_the_pod_lease_guards_pair() {
    let c = member();
    let as_spanset = WriteOptions { user: Some(spanset()), ..Default::default() };
    let (roles, bindings) =
        (rt(&c, "rbac.authorization.k8s.io", "roles"), rt(&c, "rbac.authorization.k8s.io", "rolebindings"));
    let labels = json!({"spanset.dev/federation": "redis", "app.kubernetes.io/managed-by": "spanset"});
    let role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "labels": labels}, "rules": rules})
    };
    let lease_get = json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "resourceNames": ["redis-pods"], "verbs": ["get"]}]);
    c.create(&roles, Some("default"), role("spanset-pod-leases", lease_get.clone()), &as_spanset)
        .expect("the guards' Role");
    let says =
        "spanset's member identity writes no RBAC but the pod-lease guards' Role and RoleBinding spanset-pod-leases";
    refused(
        c.create(&roles, Some("default"), role("spanset-pod-leases-2", lease_get), &as_spanset).map(|_| ()),
        "spanset-member-scope",
        &format!(
            "{says} (get on Leases by name, bound to ServiceAccounts of their namespace): CREATE of roles default/spanset-pod-leases-2 refused"
        ),
    );
    let wider = json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]);
    refused(
        edit(&c, spanset(), ("rbac.authorization.k8s.io", "roles", "default", "spanset-pod-leases"), |r| {
            r["rules"] = wider
        }),
        "spanset-member-scope",
        says,
    );
    let binding = |name: &str, kind: &str, role: &str, subject: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
               "subjects": [subject]})
    };
    let account = |ns: &str| json!({"kind": "ServiceAccount", "name": "redis", "namespace": ns});
    c.create(
        &bindings,
        Some("default"),
        binding("spanset-pod-leases", "Role", "spanset-pod-leases", account("default")),
        &as_spanset,
    )
    .expect("the guards' RoleBinding");
    for (name, kind, role, subject) in [
        ("spanset-pod-leases-2", "Role", "spanset-pod-leases", account("default")),
        ("theirs", "ClusterRole", "spanset-member", account("default")),
    ] {
        refused(
            c.create(&bindings, Some("default"), binding(name, kind, role, subject), &as_spanset).map(|_| ()),
            "spanset-member-scope",
            says,
        );
    }
    c.delete(
        &bindings,
        "default",
        "spanset-pod-leases",
        &DeleteOptions { user: Some(spanset()), ..Default::default() },
    )
    .expect("deleted with the last federation it serves");
    for subject in [account("kube-public"), json!({"kind": "User", "name": "eve"})] {
        let b = binding("spanset-pod-leases", "Role", "spanset-pod-leases", subject);
        refused(c.create(&bindings, Some("default"), b, &as_spanset).map(|_| ()), "spanset-member-scope", says);
    }
}
