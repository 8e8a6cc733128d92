//! `kubectl explain` 1.27–1.33 against the sandbox's `/openapi/v3`: built-in kinds and fields
//! with their real descriptions, spanset's own CRDs (`fsts`, `mc`), `--recursive`, and
//! kubectl's own error for a field that does not exist.

mod support;

use support::{DEADLINE, Kubectl, Sandbox, wait_until};

fn explain(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    let ordinals = k.ok(&["explain", "sts.spec.ordinals"]);
    for want in
        ["GROUP:      apps", "KIND:       StatefulSet", "FIELD: ordinals <StatefulSetOrdinals>", "start\t<integer>"]
    {
        assert!(ordinals.contains(want), "{v}: no {want:?} in:\n{ordinals}");
    }
    assert!(ordinals.contains("progressive movement of replicas"), "{v}: the real description:\n{ordinals}");
    let name = k.ok(&["explain", "pods.spec.containers.name"]);
    assert!(name.contains("KIND:       Pod") && name.contains("FIELD: name <string>"), "{v}:\n{name}");
    let recursive = k.ok(&["explain", "sts", "--recursive"]);
    assert!(recursive.contains("persistentVolumeClaimRetentionPolicy") && recursive.lines().count() > 500, "{v}");
    let nope = k.fails(&["explain", "sts.spec.nope"]);
    assert!(nope.contains(r#"field "nope" does not exist"#), "{v}: {nope}");

    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crds");
    k.ok(&["apply", "-f", crds]);
    wait_until("fsts served", DEADLINE, || k.run(&["get", "fsts"]).status.success());
    let placement = k.ok(&["explain", "fsts.spec.placement"]);
    for want in [
        "GROUP:      spanset.dev",
        "KIND:       FederatedStatefulSet",
        "VERSION:    v1alpha1",
        "clusters\t<[]Object> -required-",
    ] {
        assert!(placement.contains(want), "{v}: no {want:?} in:\n{placement}");
    }
    let weight = k.ok(&["explain", "fsts.spec.placement.clusters.weight"]);
    assert!(weight.contains("Relative share of the replicas"), "{v}:\n{weight}");
    let mc = k.ok(&["explain", "mc.spec"]);
    assert!(mc.contains("KIND:       MemberCluster") && mc.contains("kubeconfigSecret"), "{v}:\n{mc}");
}

macro_rules! per_version {
    ($($name:ident => $minor:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            explain($minor);
        }
    )*};
}

per_version! {
    explain_1_27 => 27,
    explain_1_28 => 28,
    explain_1_29 => 29,
    explain_1_30 => 30,
    explain_1_31 => 31,
    explain_1_32 => 32,
    explain_1_33 => 33,
}
