//! One cluster, one MemberCluster, end to end on the sandbox: a second MemberCluster reaching
//! the same cluster as another (here through the very same kubeconfig Secret) is refused
//! (`Reachable=False`, `DuplicateCluster`, naming the other and the id), gets no slice and is
//! never written through. Before, a federation over both made that cluster's StatefulSet flap
//! (each member wrote its own slice into the same object) while identity conflicts climbed.
//! Each member's `status.clusterID` is the uid of its `kube-system` Namespace, read by
//! spanset's least-privilege member identity.

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Namespace};
use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams},
};
use serde_json::{Value, json};
use spanset_api::MemberCluster;
use support::{
    eventually,
    federation::{Controller, Federation},
};

use crate::support;

/// A MemberCluster as stored (JSON, so that what is asserted does not depend on this build's
/// view of its status).
async fn member_cluster(f: &Federation, name: &str) -> Value {
    let api: Api<DynamicObject> = Api::all_with(f.host.clone(), &ApiResource::erase::<MemberCluster>(&()));
    api.get_opt(name).await.ok().flatten().map(|o| serde_json::to_value(o).unwrap_or_default()).unwrap_or_default()
}

fn reachable(mc: &Value) -> (String, String, String) {
    let conditions = mc["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let c = conditions.iter().find(|c| c["type"] == "Reachable").cloned().unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

/// `spanset_identity_conflicts_total` over every federation.
fn conflicts(c: &Controller) -> f64 {
    c.metrics_text()
        .lines()
        .filter(|l| l.starts_with("spanset_identity_conflicts_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn generation(f: &Federation, member: &str) -> i64 {
    let api: Api<StatefulSet> = Api::namespaced(f.member(member).await, "default");
    api.get_opt("redis").await.ok().flatten().and_then(|s| s.metadata.generation).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_member_cluster_reaching_the_same_cluster_is_refused_and_nothing_flaps() {
    let f = Federation::start(&["east", "west"]).await;
    // east-2 reaches east's cluster, the way east does (its kubeconfig Secret, or its context).
    let east = member_cluster(&f, "east").await;
    let east_2: MemberCluster = serde_json::from_value(json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": "east-2"},
        "spec": east["spec"].clone(),
    }))
    .unwrap();
    Api::<MemberCluster>::all(f.host.clone()).create(&PostParams::default(), &east_2).await.unwrap();
    let c = Controller::start(&f.sandbox, "c1");
    support::wait_until("the controller serves its metrics", support::DEADLINE, || {
        c.log_text().contains("metrics_addr")
    });
    f.create(&f.placing("redis", &["east", "east-2", "west"])).await;

    // Over many reconciles from the start (not only once settled): east's StatefulSet is
    // written a few times, not once per reconcile of each member, and no ordinal is ever seen
    // running twice.
    for round in 0..8 {
        c.wait_reconciles("redis", 3);
        let g = generation(&f, "east").await;
        let n = conflicts(&c);
        assert!(g <= 6, "round {round}: east's StatefulSet flaps (generation {g}), identity conflicts {n}");
        assert_eq!(n, 0.0, "round {round}: identity conflicts counted (east's generation {g})");
    }

    // The duplicate is refused, naming the member kept and the id, which is east's kube-system uid.
    let uid = Api::<Namespace>::all(f.member("east").await).get("kube-system").await.unwrap().metadata.uid.unwrap();
    eventually("east-2 refused as a duplicate of east", || async {
        let mc = member_cluster(&f, "east-2").await;
        let (status, reason, message) = reachable(&mc);
        status == "False"
            && reason == "DuplicateCluster"
            && message.contains(r#"MemberCluster "east""#)
            && message.contains(&uid)
            && mc["status"]["clusterID"] == uid.as_str()
    })
    .await;
    eventually("east's clusterID recorded", || async {
        let mc = member_cluster(&f, "east").await;
        mc["status"]["clusterID"] == uid.as_str() && reachable(&mc).0 == "True"
    })
    .await;
    let west_uid =
        Api::<Namespace>::all(f.member("west").await).get("kube-system").await.unwrap().metadata.uid.unwrap();
    assert_ne!(uid, west_uid, "each sandbox cluster has its own identity");
    eventually("west's clusterID recorded", || async {
        member_cluster(&f, "west").await["status"]["clusterID"] == west_uid.as_str()
    })
    .await;

    // The federation settles on the other members and says why east-2 has no slice.
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "settled on east and west").await;
    let status = f.status("redis").await;
    assert!(status.slices.iter().all(|s| s.cluster != "east-2"), "{:?}", status.slices);
    let degraded = status.conditions.iter().find(|c| c.type_ == "Degraded").expect("Degraded");
    assert!(degraded.message.contains("east-2 (DuplicateCluster: "), "{}", degraded.message);
    // And stays so: nothing rewrites east's StatefulSet over further reconciles.
    let settled = generation(&f, "east").await;
    for _ in 0..4 {
        c.wait_reconciles("redis", 3);
        assert_eq!(generation(&f, "east").await, settled, "east's StatefulSet rewritten after settling");
    }
    assert_eq!(conflicts(&c), 0.0);
    f.assert_ledger_clean();

    // When the member kept goes (here once no federation holds anything there), the other is
    // used after a fresh probe of its identity.
    f.api().delete("redis", &DeleteParams::default()).await.unwrap();
    eventually("the federation deleted", || async { f.api().get_opt("redis").await.ok().flatten().is_none() }).await;
    Api::<MemberCluster>::all(f.host.clone()).delete("east", &DeleteParams::default()).await.unwrap();
    eventually("east-2 used once east is gone", || async {
        let mc = member_cluster(&f, "east-2").await;
        reachable(&mc).0 == "True" && mc["status"]["clusterID"] == uid.as_str()
    })
    .await;
    f.assert_ledger_clean();
}
