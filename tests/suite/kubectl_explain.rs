//! `kubectl explain` 1.27–1.33 against the sandbox's `/openapi/v3`: built-in kinds and fields
//! with their real descriptions, spanset's own CRDs (`fsts`, `mc`), `--recursive`, and
//! kubectl's own error for a field that does not exist.

use crate::support;

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

/// A CRD new to kubectl's warm discovery cache, applied and waited for with `kubectl wait
/// --for condition=established`, is at once explained and listed by its plural and its short
/// name (several CRDs in turn, to catch a type served only after it says Established).
fn established_crds_are_served_at_once(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    k.ok(&["get", "pods"]);
    for i in 0..4 {
        let crd = GIZMO_CRD.replace("gizmo", &format!("gizmo{i}")).replace("Gizmo", &format!("Gizmo{i}"));
        let crd = crd.replace("[gz]", &format!("[gz{i}]"));
        k.ok_with_stdin(&["apply", "-f", "-"], &crd);
        k.ok(&["wait", "--for", "condition=established", &format!("crd/gizmo{i}s.example.com"), "--timeout=60s"]);
        let plural = k.ok(&["explain", &format!("gizmo{i}s.spec")]);
        assert!(plural.contains(&format!("KIND:       Gizmo{i}")) && plural.contains("size"), "{v}:\n{plural}");
        let short = k.ok(&["explain", &format!("gz{i}.spec.size")]);
        assert!(short.contains("FIELD: size <integer>"), "{v}:\n{short}");
        let listed = k.run(&["get", &format!("gz{i}")]);
        assert!(listed.status.success(), "{v}: {}", String::from_utf8_lossy(&listed.stderr));
        assert!(String::from_utf8_lossy(&listed.stderr).contains("No resources found"), "{v}");
    }
}

const GIZMO_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer, description: "How big."}}}
"#;

#[test]
fn established_crds_are_served_at_once_1_27() {
    established_crds_are_served_at_once(27);
}

#[test]
fn established_crds_are_served_at_once_1_33() {
    established_crds_are_served_at_once(33);
}
