//! Least privilege, proven on a sandbox that enforces RBAC (`--auth`): the controller runs as
//! the shipped identities — `spanset-system/spanset` in the host (`deploy/rbac.yaml`) and
//! `spanset-system/spanset-member` in each member joined with `spanset join`
//! (`deploy/member/rbac.yaml`) — through a federation's whole life: placement, carried Secret
//! and ConfigMap (created, then updated), a new namespace, a Service change, an ordinal moved
//! with its volume, a member lost and fenced automatically whose leftover pods spanset deletes
//! when its API returns, and deletion. Every request is audited by the sandbox
//! with the rule that allowed it. The run must see no refusal, and every verb of every
//! resource of every shipped rule must have been used by some request that rule allowed:
//! nothing granted is never needed. Since each allowed request names the one rule that allowed
//! it and no two shipped rules grant the same verb on the same resource, removing any rule
//! refuses the request that used it; one removal is shown end to end, ending in a condition
//! that names the missing permission.
//!
//! The members also guard themselves (`deploy/member/admission.yaml`, installed by `spanset
//! join`): the run above passes every guard (a refusal by a policy is audited as a refusal), and
//! each guard is shown refusing what it must — a hand edit or scale of spanset's StatefulSet, a
//! write of spanset's identity with a stale term, and spanset's identity writing outside what
//! it manages (a Service in kube-system, an unlabelled ConfigMap, a user's Secret).

use std::collections::BTreeSet;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Secret, Service},
    rbac::v1::{ClusterRole, Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use spanset::cli::join;
use spanset_api::FederatedStatefulSet;
use support::{
    Sandbox, eventually,
    federation::{Controller, Federation, client_for},
};

use crate::support;

/// The name of the guards' Role and RoleBinding in each namespace holding a pod lease.
const GUARD_ACCESS: &str = "spanset-pod-leases";

/// The shipped rules: (kind, namespace, name, index, rule).
fn shipped_rules() -> Vec<(String, String, String, usize, Value)> {
    let mut out = Vec::new();
    for text in [join::HOST_RBAC, join::MEMBER_RBAC] {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let doc: Value = serde::Deserialize::deserialize(doc).unwrap();
            let kind = doc["kind"].as_str().unwrap_or("").to_string();
            if kind != "Role" && kind != "ClusterRole" {
                continue;
            }
            let ns = if kind == "Role" {
                doc["metadata"]["namespace"].as_str().unwrap_or("").to_string()
            } else {
                String::new()
            };
            let name = doc["metadata"]["name"].as_str().unwrap().to_string();
            for (i, rule) in doc["rules"].as_array().unwrap().iter().enumerate() {
                out.push((kind.clone(), ns.clone(), name.clone(), i, rule.clone()));
            }
        }
    }
    out
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// Every audit record of the sandbox's clusters.
fn audit(sandbox: &Sandbox, clusters: &[&str]) -> Vec<Value> {
    let mut all = Vec::new();
    for c in clusters {
        let url = format!("{}/clusters/{c}/audit", sandbox.admin);
        let out = std::process::Command::new("curl").args(["-sf", &url]).output().expect("curl runs");
        assert!(out.status.success(), "audit of {c}");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("audit JSON");
        all.extend(doc["records"].as_array().unwrap().iter().cloned().map(|mut r| {
            r["cluster"] = json!(c);
            r
        }));
    }
    all
}

fn federation(name: &str, ns: &str, weights: &[(&str, i32)], replicas: i32) -> FederatedStatefulSet {
    let clusters: Vec<Value> = weights.iter().map(|(n, w)| json!({"name": n, "weight": w})).collect();
    let mut f: FederatedStatefulSet = serde_json::from_value(json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "template": {
                "selector": {"matchLabels": {"app": name}},
                "serviceName": name,
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "db", "image": "postgres:16", "ports": [{"name": "pg", "containerPort": 5432}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            },
            "placement": {"clusters": clusters},
            "migration": {"storage": "Move", "carry": [{"kind": "ConfigMap", "name": "settings"}, {"kind": "Secret", "name": "creds"}]},
            "failover": {"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 1},
        },
    }))
    .expect("a valid federation");
    f.metadata.namespace = Some(ns.into());
    f
}

/// Gives the federation's container its image's entrypoint as its command (what a pod lease needs).
fn with_command(f: &mut FederatedStatefulSet) {
    let pod = f.spec.template.template.spec.as_mut().expect("a pod spec");
    pod.containers[0].command = Some(vec!["docker-entrypoint.sh".into(), "postgres".into()]);
}

/// The carried ConfigMap `settings` and Secret `creds` in `ns`, holding `value`; the Secret
/// labelled by its owner as one federations may carry.
async fn carried(host: &Client, ns: &str, value: &str) {
    carried_secret(host, ns, value, true).await;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings", "namespace": ns}, "data": {"mode": value}}))
            .unwrap();
    Api::<ConfigMap>::namespaced(host.clone(), ns)
        .patch("settings", &PatchParams::apply("test").force(), &Patch::Apply(&cm))
        .await
        .unwrap();
}

/// The Secret `creds` in `ns`, holding `value`, with its owner's consent to be carried or not.
async fn carried_secret(host: &Client, ns: &str, value: &str, may_carry: bool) {
    let labels = if may_carry { json!({"spanset.dev/carry": "true"}) } else { json!({}) };
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds", "namespace": ns, "labels": labels}, "stringData": {"password": value}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(host.clone(), ns)
        .patch("creds", &PatchParams::apply("test").force(), &Patch::Apply(&secret))
        .await
        .unwrap();
}

/// Within one role, no two rules grant the same verb on the same resource (and the host's
/// and members' identities are bound to one role each, plus the leader Role for Leases only),
/// so each audited use names the only rule that could allow it.
#[test]
fn no_two_shipped_rules_overlap() {
    let mut seen = std::collections::BTreeMap::new();
    for (kind, ns, name, index, rule) in shipped_rules() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(verb != "*" && resource != "*" && group != "*", "{name} rule {index} uses a wildcard");
                    let names = strings(&rule["resourceNames"]).join(",");
                    // Host and member roles bind different identities in different clusters.
                    let key = (name.clone(), group.clone(), resource.clone(), verb.clone(), names);
                    if let Some(other) = seen.insert(key.clone(), format!("{kind} {ns}/{name} rule {index}")) {
                        panic!("{key:?} granted twice: {other} and {kind} {ns}/{name} rule {index}");
                    }
                }
            }
        }
    }
    assert!(seen.len() > 20, "the shipped rules were read: {}", seen.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_permissions_are_enough_and_each_is_needed() {
    let f = Federation::start_secure_with(&["east", "west"], &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    carried(&f.host, "default", "one").await;
    // An Advanced StatefulSet federation beside it, whose ordinal 0 moves west → east and back.
    let mut kv = federation("kv", "default", &[("east", 1), ("west", 1)], 2);
    kv.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    // With storage: Detached, the claim an ordinal leaves behind is deleted in its source
    // (`delete` on claims, migration.staleClaims).
    kv.spec.migration.storage = Some(spanset_api::StorageMode::Detached);
    f.create(&kv).await;
    // With a disruption budget: spanset's PodDisruptionBudget in each member is created, replaced
    // as pods come and go, deleted in west once its slice is empty, and read and deleted with the
    // federation (`policy` poddisruptionbudgets); cordons are watched (nodes).
    let mut db = federation("db", "default", &[("east", 1), ("west", 1)], 2);
    db.spec.disruption = Some(serde_json::from_value(json!({"maxUnavailable": 1})).unwrap());
    f.create(&db).await;
    // With a pod lease: spanset keeps a Lease in each member (read when not known, created,
    // extended: `coordination.k8s.io` leases) and gives the guards read access to it (the
    // namespace's Role and RoleBinding `spanset-pod-leases`, to the pods' ServiceAccount); the
    // Lease goes with the federation, and the pair with the last federation it serves.
    let mut leased = federation("leased", "default", &[("east", 1)], 1);
    leased.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
    // A pod lease runs each container's command through its guard: it must be given.
    with_command(&mut leased);
    f.create(&leased).await;
    f.wait_settled("db", &[("east", 0, 1), ("west", 1, 1)], "placed").await;
    let east = f.member("east").await;
    let lease_extended = |c: Client| async move {
        let lease = Api::<Lease>::namespaced(c, "default").get_opt("leased-pods").await.ok().flatten();
        lease.and_then(|l| l.metadata.annotations?.get("spanset.dev/extension")?.parse::<u64>().ok()).unwrap_or(0) >= 2
    };
    eventually("leased's Lease in east was created and extended", || lease_extended(east.clone())).await;
    // Someone widens the guards' Role by hand, and the pods get another account: the next
    // ensure (the template changed) puts the Role back and binds the new account instead of
    // the old one (`update`).
    let roles = Api::<Role>::namespaced(east.clone(), "default");
    let mut role = roles.get(GUARD_ACCESS).await.unwrap();
    role.rules.as_mut().unwrap()[0].verbs.push("update".into());
    roles.replace(GUARD_ACCESS, &PostParams::default(), &role).await.unwrap();
    let account = json!({"spec": {"template": {"template": {"spec": {"serviceAccountName": "leased"}}}}});
    f.api().patch("leased", &PatchParams::default(), &Patch::Merge(&account)).await.unwrap();
    let bindings = Api::<RoleBinding>::namespaced(east.clone(), "default");
    eventually("the guards' Role is read-only again and bound to the new account", || async {
        let role = roles.get_opt(GUARD_ACCESS).await.ok().flatten();
        let binding = bindings.get_opt(GUARD_ACCESS).await.ok().flatten();
        role.and_then(|r| r.rules).is_some_and(|r| r.len() == 1 && r[0].verbs == ["get"])
            && binding.and_then(|b| b.subjects).is_some_and(|s| s.len() == 1 && s[0].name == "leased")
    })
    .await;

    // Carried data changed, then a second port in the template: the members' Service and the
    // carried objects are updated with the new template (`update` in the members).
    carried(&f.host, "default", "two").await;
    let ports = json!({"spec": {"template": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:16",
        "ports": [{"name": "pg", "containerPort": 5432}, {"name": "metrics", "containerPort": 9187}]}]}}}}});
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&ports)).await.unwrap();
    eventually("east's Service has both ports and the carried ConfigMap its new data", || async {
        let svc = Api::<Service>::namespaced(east.clone(), "default").get_opt("db").await.ok().flatten();
        let cm = Api::<ConfigMap>::namespaced(east.clone(), "default").get_opt("settings").await.ok().flatten();
        svc.and_then(|s| s.spec).and_then(|s| s.ports).map(|p| p.len()) == Some(2)
            && cm.and_then(|c| c.data).and_then(|d| d.get("mode").cloned()).as_deref() == Some("two")
    })
    .await;
    // A federation in a namespace the members lack (created there).
    let shop = Api::<Namespace>::all(f.host.clone());
    shop.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "shop"}})).unwrap())
        .await
        .unwrap();
    carried(&f.host, "shop", "three").await;
    // Its operator lets spanset read what federations there carry (`deploy/rbac.yaml`).
    spanset::cli::sandbox::allow_carry(&f.host, "shop").await.unwrap();
    Api::<FederatedStatefulSet>::namespaced(f.host.clone(), "shop")
        .create(&PostParams::default(), &federation("cart", "shop", &[("east", 1)], 1))
        .await
        .unwrap();
    eventually("east runs shop/cart", || async {
        Api::<StatefulSet>::namespaced(east.clone(), "shop").get_opt("cart").await.ok().flatten().is_some()
    })
    .await;
    // An ordinal moves west → east with its volume.
    let weights =
        json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 0}]}}});
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&weights)).await.unwrap();
    f.wait_settled("db", &[("east", 0, 2)], "ordinal 1 moved to east").await;
    // Back and forth: the same move again repeats its Events, which bumps their count (`patch`).
    let both =
        json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 1}]}}});
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&both)).await.unwrap();
    f.wait_settled("db", &[("east", 0, 1), ("west", 1, 1)], "ordinal 1 back in west").await;
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&weights)).await.unwrap();
    f.wait_settled("db", &[("east", 0, 2)], "ordinal 1 in east again").await;
    let kv_east =
        json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 0}]}}});
    f.api().patch("kv", &PatchParams::default(), &Patch::Merge(&kv_east)).await.unwrap();
    let kruise = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "StatefulSet"),
        "statefulsets",
    );
    let west = f.member("west").await;
    eventually("kv's ordinals both run in east, and west's Advanced StatefulSet is empty", || async {
        let replicas = |c: Client| {
            let api = Api::<kube::api::DynamicObject>::namespaced_with(c, "default", &kruise);
            async move { api.get_opt("kv").await.ok().flatten().and_then(|o| o.data["spec"]["replicas"].as_i64()) }
        };
        replicas(east.clone()).await == Some(2)
            && replicas(west.clone()).await == Some(0)
            && f.status("kv").await.ready.as_deref() == Some("2/2")
    })
    .await;
    // A federation with two pods in west, which tolerate an unreachable node as databases do.
    let mut pair = federation("pair", "default", &[("east", 1), ("west", 1)], 4);
    pair.spec.template.template.spec.as_mut().unwrap().tolerations =
        Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("node.kubernetes.io/unreachable".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        }]);
    f.create(&pair).await;
    f.wait_settled("pair", &[("east", 0, 2), ("west", 2, 2)], "pair placed").await;
    // West is lost (its machines power off, then its API goes): the automatic policy fences it
    // and pair is re-homed in east.
    let nodes: Vec<String> = {
        let clusters: Value = serde_json::from_str(&f.sandbox.ctl_ok(&["clusters"])).unwrap();
        let west = clusters["clusters"].as_array().unwrap().iter().find(|c| c["name"] == "west").unwrap().clone();
        strings(&west["nodes"])
    };
    for n in &nodes {
        f.sandbox.ctl_ok(&["node-down", "west", n, "--power-off"]);
    }
    f.sandbox.ctl_ok(&["partition", "west"]);
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("west is fenced automatically", || async { mcs.get("west").await.is_ok_and(|m| m.spec.fenced) }).await;
    eventually("pair re-homed in east", || async {
        let s = f.status("pair").await;
        s.moves.is_empty() && s.slices.iter().any(|x| x.cluster == "east" && x.replicas == 4 && x.ready_replicas == 4)
    })
    .await;
    // Its API returns first: spanset shrinks pair there, then deletes the pod its StatefulSet
    // controller leaves behind the one stuck Terminating (`delete` on pods); only then do its
    // machines power on.
    f.sandbox.ctl_ok(&["heal", "west"]);
    let west_pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(west.clone(), "default");
    // West's pods cannot finish terminating while its machines are off: both are listed, and
    // a list that fails (the first request after the heal may) or is empty proves nothing.
    eventually("both pods of pair in west are being deleted", || async {
        let Ok(pods) = west_pods.list(&Default::default()).await else { return false };
        let pair: Vec<_> =
            pods.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("pair-"))).collect();
        pair.len() == 2 && pair.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    for n in &nodes {
        f.sandbox.ctl_ok(&["node-up", "west", n]);
    }
    mcs.patch("west", &PatchParams::default(), &Patch::Merge(json!({"spec": {"fenced": false}}))).await.unwrap();
    // Deletion removes the members' objects, then the finalizer.
    f.api().delete("db", &DeleteParams::default()).await.unwrap();
    f.api().delete("kv", &DeleteParams::default()).await.unwrap();
    f.api().delete("pair", &DeleteParams::default()).await.unwrap();
    f.api().delete("leased", &DeleteParams::default()).await.unwrap();
    Api::<FederatedStatefulSet>::namespaced(f.host.clone(), "shop")
        .delete("cart", &DeleteParams::default())
        .await
        .unwrap();
    eventually("every federation is gone", || async {
        f.api().get_opt("db").await.is_ok_and(|o| o.is_none())
            && f.api().get_opt("kv").await.is_ok_and(|o| o.is_none())
            && f.api().get_opt("pair").await.is_ok_and(|o| o.is_none())
            && f.api().get_opt("leased").await.is_ok_and(|o| o.is_none())
            && Api::<FederatedStatefulSet>::namespaced(f.host.clone(), "shop")
                .get_opt("cart")
                .await
                .is_ok_and(|o| o.is_none())
    })
    .await;
    assert!(
        Api::<Lease>::namespaced(east.clone(), "default").get_opt("leased-pods").await.unwrap().is_none()
            && roles.get_opt(GUARD_ACCESS).await.unwrap().is_none()
            && bindings.get_opt(GUARD_ACCESS).await.unwrap().is_none(),
        "the pod lease's objects went with the federation"
    );

    // The guards were there all along.
    let policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding> =
        Api::all(client_for(&f.sandbox.kubeconfig, "east").await);
    let shipped = support::docs::admission_policies_shipped();
    assert_eq!(policies.list(&Default::default()).await.unwrap().items.len(), shipped, "the member's guards are bound");
    let records = audit(&f.sandbox, &["host", "east", "west"]);
    let ours = |r: &&Value| {
        let u = r["user"].as_str().unwrap_or("");
        u == "system:serviceaccount:spanset-system:spanset"
            || u == "system:serviceaccount:spanset-system:spanset-member"
    };
    let refused: Vec<&Value> = records.iter().filter(ours).filter(|r| r["allowed"] == false).collect();
    assert!(refused.is_empty(), "the shipped permissions were not enough: {refused:#?}");
    // Each member's identity (the uid of its kube-system Namespace) was read by spanset's
    // member identity, through the member rule's `get` of namespaces: no rule of its own.
    for m in ["east", "west"] {
        let read = records.iter().filter(ours).any(|r| {
            r["cluster"] == m
                && r["allowed"] == true
                && r["verb"] == "get"
                && r["resource"] == "namespaces"
                && r["name"] == "kube-system"
        });
        assert!(read, "{m}: spanset read its kube-system Namespace (the cluster id)");
    }

    // Every verb of every resource of every shipped rule was used through that rule.
    let used: BTreeSet<(String, String, String, u64, String, String)> = records
        .iter()
        .filter(ours)
        .filter_map(|r| {
            let rule = r.get("rule").filter(|v| v.is_object())?;
            let resource = match r["subresource"].as_str().unwrap_or("") {
                "" => r["resource"].as_str().unwrap_or("").to_string(),
                sub => format!("{}/{sub}", r["resource"].as_str().unwrap_or("")),
            };
            Some((
                rule["kind"].as_str()?.to_string(),
                rule["namespace"].as_str()?.to_string(),
                rule["name"].as_str()?.to_string(),
                rule["index"].as_u64()?,
                r["verb"].as_str()?.to_string(),
                resource,
            ))
        })
        .collect();
    let mut unused = Vec::new();
    for (kind, ns, name, index, rule) in shipped_rules() {
        for verb in strings(&rule["verbs"]) {
            for resource in strings(&rule["resources"]) {
                if !used.contains(&(
                    kind.clone(),
                    ns.clone(),
                    name.clone(),
                    index as u64,
                    verb.clone(),
                    resource.clone(),
                )) {
                    unused.push(format!("{kind} {name} rule {index}: {verb} {resource}"));
                }
            }
        }
    }
    assert!(unused.is_empty(), "granted but never used:\n{}", unused.join("\n"));
}

/// Removes every rule naming `resource` from spanset's member ClusterRole in `member`, as an
/// administrator might.
async fn take_member_rule(f: &Federation, member: &str, resource: &str) {
    let roles: Api<ClusterRole> = Api::all(client_for(&f.sandbox.kubeconfig, member).await);
    let mut role = roles.get(join::MEMBER_ACCOUNT).await.unwrap();
    role.rules.as_mut().unwrap().retain(|r| !r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == resource)));
    role.metadata.managed_fields = None;
    roles.replace(join::MEMBER_ACCOUNT, &PostParams::default(), &role).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_member_permission_ends_in_a_condition_that_names_it() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    // Take away the member's right to create namespaces.
    take_member_rule(&f, "east", "namespaces").await;
    let c = Controller::start(&f.sandbox, "controller");
    let shop = Api::<Namespace>::all(f.host.clone());
    shop.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "shop"}})).unwrap())
        .await
        .unwrap();
    carried(&f.host, "shop", "x").await;
    spanset::cli::sandbox::allow_carry(&f.host, "shop").await.unwrap();
    let api = Api::<FederatedStatefulSet>::namespaced(f.host.clone(), "shop");
    api.create(&PostParams::default(), &federation("cart", "shop", &[("east", 1)], 1)).await.unwrap();
    let start = std::time::Instant::now();
    let message = loop {
        let status = api.get("cart").await.unwrap().status.unwrap_or_default();
        if let Some(c) = status.conditions.iter().find(|c| c.message.contains("is forbidden")) {
            break c.message.clone();
        }
        if start.elapsed() > support::DEADLINE {
            let log = c.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "no condition names the refusal: {status:?}\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        message
            .contains(r#"User "system:serviceaccount:spanset-system:spanset-member" cannot get resource "namespaces""#)
            || message.contains(
                r#"User "system:serviceaccount:spanset-system:spanset-member" cannot create resource "namespaces""#
            ),
        "the condition names the missing permission: {message}"
    );
    let east = f.member("east").await;
    assert!(Api::<StatefulSet>::namespaced(east, "shop").get_opt("cart").await.unwrap().is_none(), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_lease_is_said_in_an_event_that_names_the_member_and_its_answer() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    // Take away the member's rule on Leases: the federation's pod Lease can be neither read nor
    // written there, so its pods never start (their guards wait for it).
    take_member_rule(&f, "east", "leases").await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut leased = federation("leased", "default", &[("east", 1)], 1);
    leased.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
    with_command(&mut leased);
    f.create(&leased).await;
    let message = support::until("an Event says the member refused the pod lease", || async {
        let events = f.events("leased").await;
        events.into_iter().find(|(_, reason, _)| reason == "PodLeaseRefused").map(|(_, _, m)| m)
    })
    .await;
    assert!(message.starts_with("east refused its pod lease (default/leased-pods)"), "{message}");
    assert!(
        message.contains(r#"User "system:serviceaccount:spanset-system:spanset-member" cannot get resource "leases""#),
        "the member's own answer: {message}"
    );
    assert!(message.ends_with("(403)"), "its status code: {message}");
}

/// The refusal of a write by a guard: 403, naming the policy and its binding.
fn guarded<T: std::fmt::Debug>(r: Result<T, kube::Error>, policy: &str) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let head = format!("ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: ");
            assert!(s.message.contains(&head), "refused by {policy}: {}", s.message);
            s.message
        }
        other => panic!("expected {policy} to refuse, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_member_guard_refuses_what_it_must() {
    let mut f = Federation::start_secure(&["east"]).await;
    // Refusals of spanset's identity are provoked here; they are checked below, one by one.
    f.refusals_expected = true;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut redis = f.placing("redis", &["east"]);
    redis.spec.replicas = 1;
    f.create(&redis).await;
    f.wait_settled("redis", &[("east", 0, 1)], "placed").await;
    let admin = f.member("east").await;
    let spanset = f.spanset_identity("east").await;
    let sets = |c: &Client| Api::<StatefulSet>::namespaced(c.clone(), "default");

    // (a) Nobody but spanset changes spanset's StatefulSet: spec, scale, or spanset's stamps.
    let pp = PatchParams::default();
    let m = guarded(
        sets(&admin).patch("redis", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await,
        "spanset-owner",
    );
    assert!(m.contains("is owned by spanset (FederatedStatefulSet default/redis in the host cluster)"), "{m}");
    guarded(
        sets(&admin).patch_scale("redis", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await,
        "spanset-owner-scale",
    );
    let stamp = json!({"metadata": {"annotations": {"spanset.dev/term": "999"}}});
    guarded(sets(&admin).patch("redis", &pp, &Patch::Merge(&stamp)).await, "spanset-owner");
    sets(&admin)
        .patch("redis", &pp, &Patch::Merge(json!({"metadata": {"labels": {"team": "db"}}})))
        .await
        .expect("the user's own labels stay the user's");

    // (b) spanset's identity writing below the stored term (a stale leader's late write).
    let mut stale = sets(&spanset).get("redis").await.unwrap();
    let term = stale.metadata.annotations.as_ref().unwrap()["spanset.dev/term"].clone();
    stale.metadata.annotations.as_mut().unwrap().insert("spanset.dev/term".into(), "0".into());
    let m = guarded(sets(&spanset).replace("redis", &PostParams::default(), &stale).await, "spanset-member-term");
    assert!(m.contains(&format!("stamped with spanset.dev/term {term} and this write carries term 0")), "{m}");

    // (c) spanset's identity writes only what spanset manages, never in kube-system.
    let svc: Service =
        serde_json::from_value(json!({"metadata": {"name": "kube-dns"}, "spec": {"ports": [{"port": 53}]}})).unwrap();
    Api::<Service>::namespaced(admin.clone(), "kube-system").create(&PostParams::default(), &svc).await.unwrap();
    let m = guarded(
        Api::<Service>::namespaced(spanset.clone(), "kube-system").delete("kube-dns", &DeleteParams::default()).await,
        "spanset-member-scope",
    );
    assert!(m.ends_with("writes nothing in namespace kube-system"), "{m}");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "not-ours"}, "data": {"k": "v"}})).unwrap();
    guarded(
        Api::<ConfigMap>::namespaced(spanset.clone(), "default").create(&PostParams::default(), &cm).await,
        "spanset-member-scope",
    );
    let users: Secret =
        serde_json::from_value(json!({"metadata": {"name": "users"}, "stringData": {"k": "v"}})).unwrap();
    let secrets = |c: &Client| Api::<Secret>::namespaced(c.clone(), "default");
    secrets(&admin).create(&PostParams::default(), &users).await.unwrap();
    let mut taken = secrets(&admin).get("users").await.unwrap();
    taken.string_data = Some([("k".to_string(), "spanset's now".to_string())].into());
    let m = guarded(secrets(&spanset).replace("users", &PostParams::default(), &taken).await, "spanset-member-scope");
    assert!(m.ends_with("UPDATE of secrets default/users refused"), "{m}");

    // Each refusal is in the audit, naming its guard; spanset's controller met none.
    let records = audit(&f.sandbox, &["east"]);
    let denied: Vec<(String, String)> = records
        .iter()
        .filter_map(|r| Some((r["user"].as_str()?.to_string(), r.get("deniedBy")?.as_str()?.to_string())))
        .collect();
    let by = |p: &str| format!("ValidatingAdmissionPolicy '{p}' with binding '{p}'");
    let member = "system:serviceaccount:spanset-system:spanset-member".to_string();
    let admin_user = "kubernetes-admin".to_string();
    assert_eq!(
        denied,
        vec![
            (admin_user.clone(), by("spanset-owner")),
            (admin_user.clone(), by("spanset-owner-scale")),
            (admin_user, by("spanset-owner")),
            (member.clone(), by("spanset-member-term")),
            (member.clone(), by("spanset-member-scope")),
            (member.clone(), by("spanset-member-scope")),
            (member, by("spanset-member-scope")),
        ]
    );
    assert_eq!(f.refused_requests().len(), 4, "only the provoked refusals of spanset's identity");
    f.assert_ledger_clean();
}

/// A 403 of RBAC itself (not of a policy): its message.
fn forbidden_by_rbac<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 && !s.message.contains("ValidatingAdmissionPolicy") => s.message,
        other => panic!("expected RBAC to refuse, got {other:?}"),
    }
}

/// What a stolen member credential can do with RBAC in a member whose guards were taken away
/// (`spanset-member-scope` unbound): it reads, changes and deletes no Role or RoleBinding but
/// the pod-lease guards' pair (`resourceNames`), and creates none that grants more than it
/// holds (RBAC's escalation prevention, which the sandbox applies as the apiserver does). What
/// is left, since Kubernetes cannot limit `create` by name: it can hand what it holds to another
/// subject, one namespace per RoleBinding. With its guards back, the member refuses that too:
/// spanset's identity writes no RBAC but the guards' pair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_member_credential_grants_nothing_it_does_not_hold_and_touches_no_one_s_rbac() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    let admin = f.member("east").await;
    let stolen = f.spanset_identity("east").await;
    let pp = PostParams::default();
    let labels = json!({"spanset.dev/federation": "redis", "app.kubernetes.io/managed-by": "spanset"});
    let binding = |name: &str, kind: &str, role: &str| -> RoleBinding {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "thief", "namespace": "default"}]}))
        .unwrap()
    };
    // A user's Role and RoleBinding, labelled as if spanset's: only RBAC stands in the way.
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "app", "labels": labels},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "default").create(&pp, &role).await.unwrap();
    let users = binding("app", "Role", "app");
    Api::<RoleBinding>::namespaced(admin.clone(), "default").create(&pp, &users).await.unwrap();
    f.delete_bindings("east", &["spanset-member-scope"]).await;

    let roles = Api::<Role>::namespaced(stolen.clone(), "default");
    let bindings = Api::<RoleBinding>::namespaced(stolen.clone(), "default");
    let m = forbidden_by_rbac(bindings.delete("app", &DeleteParams::default()).await);
    assert!(m.contains(r#"cannot delete resource "rolebindings""#), "{m}");
    let m = forbidden_by_rbac(roles.replace("app", &pp, &role).await);
    assert!(m.contains(r#"cannot update resource "roles""#), "{m}");
    forbidden_by_rbac(bindings.get("app").await);
    // More than it holds: refused, naming what it lacks.
    let m = forbidden_by_rbac(bindings.create(&pp, &binding("grab", "ClusterRole", "cluster-admin")).await);
    assert!(m.contains("is attempting to grant RBAC permissions not currently held:"), "{m}");
    let wide: Role = serde_json::from_value(json!({"metadata": {"name": "wide", "labels": labels},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}))
    .unwrap();
    let m = forbidden_by_rbac(roles.create(&pp, &wide).await);
    assert!(m.ends_with(r#"{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}"#), "{m}");
    // What it holds: RBAC lets it hand that on. This is what remains without the guards.
    bindings.create(&pp, &binding("handed", "ClusterRole", join::MEMBER_ACCOUNT)).await.expect("its own powers");

    // The guards back: not even that.
    join::apply_manifest(&admin, join::MEMBER_ADMISSION, "deploy/member/admission.yaml").await.unwrap();
    let m = guarded(
        bindings.create(&pp, &binding("handed-again", "ClusterRole", join::MEMBER_ACCOUNT)).await,
        "spanset-member-scope",
    );
    assert!(m.contains("writes no RBAC but the pod-lease guards' Role and RoleBinding spanset-pod-leases"), "{m}");
    let names: Vec<String> = Api::<RoleBinding>::namespaced(admin, "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .collect();
    assert_eq!(names, ["app", "handed"], "the user's binding stands; only the one RBAC let through was made");
}

/// Two federations with a pod lease in one namespace share its guards' Role and RoleBinding:
/// the Role names both Leases, the binding both pods' accounts; deleting one leaves the other's
/// access whole, deleting the last removes the pair. (The guards themselves read through it in
/// `pod_lease.rs`, whose pods run for real.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn federations_with_pod_leases_share_their_namespace_s_guard_access() {
    let f = Federation::start_secure(&["east"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    for (name, account) in [("a", "a"), ("b", "default")] {
        let mut leased = federation(name, "default", &[("east", 1)], 1);
        leased.spec.migration = Default::default();
        leased.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
        with_command(&mut leased);
        if account != "default" {
            leased.spec.template.template.spec.as_mut().unwrap().service_account_name = Some(account.into());
        }
        f.create(&leased).await;
    }
    let east = f.member("east").await;
    let roles = Api::<Role>::namespaced(east.clone(), "default");
    let bindings = Api::<RoleBinding>::namespaced(east.clone(), "default");
    let access = || async {
        let role = roles.get_opt(GUARD_ACCESS).await.unwrap();
        let leases = role.and_then(|r| r.rules).and_then(|r| r[0].resource_names.clone()).unwrap_or_default();
        let binding = bindings.get_opt(GUARD_ACCESS).await.unwrap();
        let accounts: Vec<String> =
            binding.and_then(|b| b.subjects).unwrap_or_default().into_iter().map(|s| s.name).collect();
        (leases, accounts)
    };
    let both = (vec!["a-pods".to_string(), "b-pods".to_string()], vec!["a".to_string(), "default".to_string()]);
    eventually("the pair serves both federations", || async { access().await == both }).await;
    f.api().delete("a", &DeleteParams::default()).await.unwrap();
    eventually("a is gone", || async { f.api().get_opt("a").await.is_ok_and(|o| o.is_none()) }).await;
    assert_eq!(access().await, (vec!["b-pods".into()], vec!["default".into()]), "b's access is whole");
    f.api().delete("b", &DeleteParams::default()).await.unwrap();
    eventually("the pair went with the last federation it served", || async {
        roles.get_opt(GUARD_ACCESS).await.is_ok_and(|r| r.is_none())
            && bindings.get_opt(GUARD_ACCESS).await.is_ok_and(|b| b.is_none())
    })
    .await;
}

/// A host client acting as a new ServiceAccount `default/NAME`, granted `rules` in `default`
/// (by a Role and RoleBinding the administrator writes): a tenant of the host.
async fn tenant(f: &Federation, name: &str, rules: Value) -> Client {
    let pp = PostParams::default();
    let sas = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(f.host.clone(), "default");
    sas.create(&pp, &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()).await.unwrap();
    let role: Role = serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap();
    Api::<Role>::namespaced(f.host.clone(), "default").create(&pp, &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(f.host.clone(), "default").create(&pp, &binding).await.unwrap();
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}})).unwrap();
    let minted: k8s_openapi::api::authentication::v1::TokenRequest =
        sas.create_subresource("token", name, &pp, &request).await.unwrap();
    let token = minted.status.expect("a token").token;
    let cluster = join::cluster_entry(&f.sandbox.kubeconfig, "host").unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&join::identity_kubeconfig("host", cluster, name, &token)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

/// The confused deputy: spanset may read the Secrets of a federation's namespace, and a
/// federation's author need not. An author who may create federations but not read Secrets
/// names one in `spec.migration.carry`: spanset must not copy it into a member, where the
/// author's pods could mount it. The federation is `Blocked` naming the Secret and what it
/// lacks (the opt-in label only someone who may change the Secret can set), and nothing is
/// written in the member: not the Secret, not anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_author_who_may_not_read_a_secret_cannot_carry_it_into_a_member() {
    let f = Federation::start_secure(&["east"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    // The Secret's owner did not let federations carry it.
    carried_secret(&f.host, "default", "one", false).await;
    let author = tenant(
        &f,
        "author",
        json!([{"apiGroups": ["spanset.dev"], "resources": ["federatedstatefulsets"], "verbs": ["create", "get"]}]),
    )
    .await;
    let m = forbidden_by_rbac(Api::<Secret>::namespaced(author.clone(), "default").get("creds").await);
    assert!(m.contains(r#"cannot get resource "secrets""#), "the author may not read it: {m}");
    let east = f.member("east").await;
    let member_secrets = || async {
        let all = Api::<Secret>::all(east.clone()).list(&Default::default()).await.unwrap().items;
        all.into_iter()
            .filter_map(|s| Some(format!("{}/{}", s.metadata.namespace?, s.metadata.name?)))
            .collect::<Vec<_>>()
    };
    // The watcher's own probe of east (a dry-run create: does it keep .spec.ordinals?) is done
    // before the count starts: what follows is the federation's alone.
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("east was probed", || async {
        mcs.get("east").await.ok().and_then(|m| m.status).is_some_and(|s| s.keeps_ordinals.is_some())
    })
    .await;
    let before = member_secrets().await;
    let since = f.audit("east").len();
    let mark = f.sandbox.account();
    let mut fsts = federation("exfil", "default", &[("east", 1)], 1);
    fsts.spec.migration.carry = vec![spanset_api::CarriedObject { kind: "Secret".into(), name: "creds".into() }];
    let authors = Api::<FederatedStatefulSet>::namespaced(author, "default");
    authors.create(&PostParams::default(), &fsts).await.expect("the author may create federations");
    let verdict = support::until("the federation is refused, or the Secret reaches east", || async {
        let blocked = authors
            .get("exfil")
            .await
            .ok()?
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Blocked" && c.status == "True");
        let copied = Api::<Secret>::namespaced(east.clone(), "default").get_opt("creds").await.ok()?.is_some();
        match (blocked, copied) {
            (_, true) => Some(Err("the Secret was copied into east".to_string())),
            (Some(c), false) => Some(Ok(c)),
            _ => None,
        }
    })
    .await
    .expect("refused, not carried");
    assert_eq!(verdict.reason, "CarryNotAllowed", "{verdict:?}");
    assert!(
        verdict.message.starts_with("spec.migration.carry[0]: Secret default/creds is not marked for carrying")
            && verdict.message.contains("spanset.dev/carry=true"),
        "the condition names the Secret and what it lacks: {}",
        verdict.message
    );
    // Held a little longer than a reconcile: still nothing there.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(member_secrets().await, before, "no Secret written in east");
    assert_eq!(
        f.spanset_write_requests("east", since),
        Vec::<String>::new(),
        "nothing sent to east, not even a dry run"
    );
    assert!(f.sandbox.spanset_changes_since(&mark, &f.members).is_empty(), "nothing changed in east");
}

/// The host's `spanset-carry` is needed where federations carry: without its binding in the
/// federation's namespace, spanset may not read what is carried, and the federation is
/// `Blocked` naming the object, the host's answer and the binding to make; nothing is written
/// in any member. Once an administrator binds it there, the federation goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carrying_from_a_namespace_spanset_may_not_read_is_blocked_naming_the_binding_to_make() {
    let mut f = Federation::start_secure(&["east"]).await;
    // spanset's refused reads of the carried objects are the point.
    f.refusals_expected = true;
    let _c = Controller::start(&f.sandbox, "controller");
    let namespaces = Api::<Namespace>::all(f.host.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "shop"}})).unwrap())
        .await
        .unwrap();
    carried(&f.host, "shop", "x").await;
    let api = Api::<FederatedStatefulSet>::namespaced(f.host.clone(), "shop");
    api.create(&PostParams::default(), &federation("cart", "shop", &[("east", 1)], 1)).await.unwrap();
    let blocked = support::until("cart is blocked", || async {
        let status = api.get("cart").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Blocked" && c.status == "True")
    })
    .await;
    assert_eq!(blocked.reason, "CarryUnreadable", "{blocked:?}");
    assert!(
        blocked
            .message
            .starts_with("spec.migration.carry[0]: spanset may not read ConfigMap shop/settings in the host (")
            && blocked
                .message
                .contains(r#"User "system:serviceaccount:spanset-system:spanset" cannot get resource "configmaps""#)
            && blocked.message.contains("kubectl -n shop create rolebinding spanset-carry --clusterrole=spanset-carry"),
        "{}",
        blocked.message
    );
    let east = f.member("east").await;
    assert!(
        Api::<StatefulSet>::namespaced(east.clone(), "shop").get_opt("cart").await.unwrap().is_none(),
        "nothing written"
    );
    spanset::cli::sandbox::allow_carry(&f.host, "shop").await.unwrap();
    // The refusal is checked again after REFUSAL_RECHECK (30 s).
    support::until_within("east runs shop/cart, its Secret carried", std::time::Duration::from_secs(90), || async {
        let sts = Api::<StatefulSet>::namespaced(east.clone(), "shop").get_opt("cart").await.ok()??;
        Api::<Secret>::namespaced(east.clone(), "shop").get_opt("creds").await.ok()??;
        Some(sts)
    })
    .await;
}

/// The host's `spanset-members` Role is needed to reach a member: without it the controller
/// may not read the member's kubeconfig Secret, and the MemberCluster says so (`Reachable`
/// False, `BadKubeconfig`, naming the Secret and the host's answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_members_role_a_member_s_kubeconfig_cannot_be_read_and_its_member_says_so() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    Api::<RoleBinding>::namespaced(f.host.clone(), join::SYSTEM_NAMESPACE)
        .delete("spanset-members", &DeleteParams::default())
        .await
        .unwrap();
    let _c = Controller::start(&f.sandbox, "controller");
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    let reachable = support::until("east says why it cannot be reached", || async {
        let status = mcs.get("east").await.ok()?.status?;
        status.conditions.into_iter().find(|c| c.type_ == "Reachable" && c.status == "False")
    })
    .await;
    assert_eq!(reachable.reason, "BadKubeconfig", "{reachable:?}");
    assert!(
        reachable.message.contains("spanset-system/spanset-member-east")
            && reachable
                .message
                .contains(r#"cannot get resource "secrets" in API group "" in the namespace "spanset-system""#),
        "{}",
        reachable.message
    );
}

/// A member joined with its kubeconfig Secret outside `spanset-system` (`join --namespace`):
/// `join` gives the controller the same `spanset-members` Role there, and the member is reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_kubeconfig_join_wrote_elsewhere_is_reached() {
    let f = Federation::start_secure(&["east"]).await;
    let member = f.member("east").await;
    let args = join::JoinArgs {
        name: "east".into(),
        kubeconfig: f.sandbox.kubeconfig.clone(),
        context: "east".into(),
        host_kubeconfig: None,
        host_context: Some("host".into()),
        namespace: "members".into(),
        token_seconds: 3600,
        region: None,
    };
    let joined = join::join(&f.host, &member, &args).await.expect("joined again, into another namespace");
    assert_eq!(joined.secret, "members/spanset-member-east");
    let _c = Controller::start(&f.sandbox, "controller");
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("east is reached through the Secret in members", || async {
        let status = mcs.get("east").await.ok().and_then(|m| m.status).unwrap_or_default();
        status.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "True")
    })
    .await;
}
