//! The sandbox's resource account end to end: kubectl's writes, a StatefulSet's pods, claims
//! and volumes, and Released volumes left over are counted exactly, under the names of whoever
//! made them; `sim-ctl account` prints and checks them; spanset's controller is named by its
//! User-Agent where every caller is the administrator.

use crate::support;

use support::{
    Kubectl, Sandbox,
    account::{ClusterAccount, WriteCounts},
    federation::{Controller, Federation},
};

/// A StorageClass that keeps a volume once its claim is gone, and a StatefulSet of two pods
/// with a claim each in it.
const WEB: &str = r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: keep}
provisioner: volumes.sim.spanset.dev
reclaimPolicy: Retain
volumeBindingMode: Immediate
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.25}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: keep, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"#;

fn counts(created: u64, deleted: u64, removed: u64) -> WriteCounts {
    WriteCounts { created, deleted, removed, ..Default::default() }
}

/// Waits until the account of `cluster` satisfies `cond`; panics with the account otherwise.
fn wait_account(sandbox: &Sandbox, cluster: &str, what: &str, cond: impl Fn(&ClusterAccount) -> bool) {
    let mut last = ClusterAccount::default();
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        support::wait_until(what, support::DEADLINE, || {
            last = sandbox.account_of(cluster);
            cond(&last)
        })
    }));
    assert!(ok.is_ok(), "timed out waiting for {what}; the account: {last:#?}");
}

#[test]
fn the_account_counts_exactly_what_kubectl_and_the_cluster_did() {
    let sandbox = Sandbox::start("east");
    let kubectl = Kubectl::on_path(&sandbox);
    let start = sandbox.account();

    // kubectl: two ConfigMaps created, one deleted.
    for name in ["a", "b"] {
        kubectl.ok(&["create", "configmap", name, "--from-literal=k=v"]);
    }
    kubectl.ok(&["delete", "configmap", "a"]);
    let cost = sandbox.account().since(&start).cluster("east");
    assert_eq!(cost.of("user:kubectl", "configmaps"), counts(2, 1, 1), "{cost:#?}");
    assert_eq!(cost.by_actor("user:kubectl").writes(), 3, "nothing else of kubectl's: {cost:#?}");

    // A StatefulSet of two: two pods and two claims of the StatefulSet controller's, two
    // volumes of the PersistentVolume controller's.
    let before_set = sandbox.account();
    kubectl.ok_with_stdin(&["apply", "-f", "-"], WEB);
    wait_account(&sandbox, "east", "two volumes Bound", |a| a.left("Bound") == 2);
    let cost = sandbox.account().since(&before_set).cluster("east");
    assert_eq!(cost.of("user:kubectl", "statefulsets.apps").created, 1);
    assert_eq!(cost.of("user:kubectl", "storageclasses.storage.k8s.io").created, 1);
    assert_eq!(cost.created("statefulset-controller", "pods"), 2, "{cost:#?}");
    assert_eq!(cost.created("statefulset-controller", "persistentvolumeclaims"), 2, "{cost:#?}");
    assert_eq!(cost.created("persistentvolume-controller", "persistentvolumes"), 2, "{cost:#?}");
    assert_eq!((cost.provisioned(), cost.released()), (2, 0));
    assert!(cost.events_of("SuccessfulCreate") >= 2, "the StatefulSet controller's Events: {cost:#?}");
    assert_eq!(cost.events_of("ProvisioningSucceeded"), 2, "{cost:#?}");

    // The set scaled to nothing and its claims deleted: both volumes Released, and left so.
    let before_cleanup = sandbox.account();
    kubectl.ok(&["scale", "statefulset", "web", "--replicas=0"]);
    wait_account(&sandbox, "east", "both pods removed", |a| {
        a.since(&before_cleanup.cluster("east")).by_resource("pods").removed == 2
    });
    kubectl.ok(&["delete", "pvc", "data-web-0", "data-web-1"]);
    wait_account(&sandbox, "east", "two volumes left Released", |a| a.left("Released") == 2);
    let cost = sandbox.account().since(&before_cleanup).cluster("east");
    assert_eq!(cost.of("user:kubectl", "persistentvolumeclaims"), counts(0, 2, 2), "{cost:#?}");
    assert_eq!(cost.deleted("statefulset-controller", "pods"), 2, "{cost:#?}");
    assert_eq!(cost.of("kubelet", "pods").removed, 2, "the kubelets confirm the pods' end: {cost:#?}");
    assert_eq!((cost.provisioned(), cost.released(), cost.left("Bound")), (0, 2, 0), "{:?}", cost.volumes);

    // Every write of the story is someone's.
    let all = sandbox.account_of("east");
    assert!(!all.writes.contains_key("unattributed"), "writes nobody owns: {:#?}", all.writes.get("unattributed"));

    // sim-ctl: the table, the JSON, and budgets.
    let table = sandbox.ctl_ok(&["account"]);
    let row = |actor: &str, resource: &str| {
        table
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() > 2 && w[0] == actor && w[1] == resource)
            .unwrap_or_else(|| panic!("no row for {actor} {resource} in:\n{table}"))
            .join(" ")
    };
    assert_eq!(row("user:kubectl", "configmaps"), "user:kubectl configmaps 2 0 0 1 1 0");
    assert!(table.contains("volumes: 2 provisioned, 2 released; now: Released 2"), "{table}");
    let json: support::account::AccountReport =
        serde_json::from_str(&sandbox.ctl_ok(&["account", "-o", "json"])).unwrap();
    assert_eq!(json.cluster("east").of("user:kubectl", "configmaps"), counts(2, 1, 1));

    let held = sandbox.ctl(&[
        "account",
        "--check",
        "--max",
        "east:volumes:left:Released=2",
        "--max",
        "*:user:kubectl:create:configmaps=2",
        "--max",
        "east:statefulset-controller:create:pods=2",
    ]);
    assert_eq!(support::succeeded("a check within budget", held).trim(), "account ok: 3 budget(s) held");
    let over =
        sandbox.ctl(&["account", "--check", "--max", "*:volumes:left:Released=1", "--max", "east:*:create:pods=2"]);
    assert_eq!(over.status.code(), Some(1), "{over:?}");
    assert_eq!(
        String::from_utf8_lossy(&over.stdout).trim(),
        "east: 2 over the budget of 1 (--max *:volumes:left:Released=1)"
    );
    let bad = sandbox.ctl(&["account", "--check", "--max", "east:user:kubectl:destroy:pods=1"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--max east:user:kubectl:destroy:pods=1: the verb \"destroy\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spanset_is_named_by_its_user_agent_where_everyone_is_the_administrator() {
    let f = Federation::start_with(&["east", "west"], &[]).await;
    let _controller = Controller::start(&f.sandbox, "c1");
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "redis over east and west").await;
    let report = f.sandbox.account();
    for member in ["east", "west"] {
        let a = report.cluster(member);
        assert_eq!(a.created("spanset", "statefulsets.apps"), 1, "{member}: {a:#?}");
        // The test's own client is a spanset command, not the controller.
        assert_eq!(a.by_actor("user:spanset-cli").created, 0, "{member}: {a:#?}");
        assert_eq!(a.created("statefulset-controller", "pods"), 3, "{member}: {a:#?}");
    }
    let host = report.cluster("host");
    assert_eq!(host.created("user:spanset-cli", "federatedstatefulsets.spanset.dev"), 1, "{host:#?}");
    assert!(host.of("spanset", "federatedstatefulsets.spanset.dev").status_updated >= 1, "{host:#?}");
    assert_eq!(host.by_actor("user:kubernetes-admin"), WriteCounts::default(), "every caller says who it is");
}
