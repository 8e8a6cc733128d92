//! spanset's CRDs: the committed files match the code, and the sandbox serves them with the
//! printer columns (`kubectl get fsts`: READY, CLUSTERS, MOVING, AGE).

use crate::support;

use support::{Kubectl, Sandbox};

#[test]
fn deploy_crds_match_the_code() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    for (name, yaml) in spanset_api::crd_files() {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(
            committed == yaml,
            "deploy/crds/{name} is out of date: regenerate with `cargo run -- crd --dir deploy/crds`"
        );
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, spanset_api::crd_files().len(), "deploy/crds holds exactly the generated CRDs");
}

#[test]
fn kubectl_lists_federated_statefulsets_with_their_columns() {
    let sandbox = Sandbox::start("host");
    let Some(k) = Kubectl::new(33, &sandbox) else { return };
    k.ok_with_stdin(&["apply", "-f", "-"], &spanset_api::crds_yaml());
    k.ok(&["wait", "--for=condition=Established", "crd/federatedstatefulsets.spanset.dev", "--timeout=60s"]);
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml")).unwrap();
    assert_eq!(
        k.ok_with_stdin(&["apply", "-f", "-"], &example).trim(),
        "federatedstatefulset.spanset.dev/redis-redis-cluster created"
    );
    k.ok(&[
        "patch",
        "fsts",
        "redis-redis-cluster",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"ready":"4/6","clusters":2,"moving":1,"updatedReplicas":3,"availableReplicas":4}}"#,
    ]);
    let table = k.ok(&["get", "fsts"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "CLUSTERS", "MOVING", "UP-TO-DATE", "AVAILABLE", "AGE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..6], ["redis-redis-cluster", "4/6", "2", "1", "3", "4"], "{table}");
    let mc = "apiVersion: spanset.dev/v1alpha1\nkind: MemberCluster\nmetadata: {name: source}\nspec: {context: source, region: eu-west}\n";
    assert_eq!(k.ok_with_stdin(&["apply", "-f", "-"], mc).trim(), "membercluster.spanset.dev/source created");
    assert!(k.ok(&["get", "mc"]).starts_with("NAME"));
}

fn example() -> spanset_api::FederatedStatefulSet {
    serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml")).unwrap(),
    )
    .unwrap()
}

fn refused(f: &spanset_api::FederatedStatefulSet) -> String {
    match f.validate_cel() {
        Ok(()) => panic!("accepted: {:?}", f.spec),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_cel_rules_refuse_what_they_should_when_evaluated() {
    let ok = example();
    ok.validate_cel().expect("the example is valid");
    let mut long = example();
    long.metadata.name = Some("x".repeat(53));
    assert!(refused(&long).contains("must be no more than 52 characters"));
    let mut dup = example();
    dup.spec.placement.clusters[1].name = "source".into();
    assert!(refused(&dup).contains("cluster names must be unique"));
    let mut weightless = example();
    for c in &mut weightless.spec.placement.clusters {
        c.weight = Some(0);
    }
    assert!(refused(&weightless).contains("at least one cluster needs a weight above 0"));
    let mut mins = example();
    mins.spec.placement.clusters[0].min_replicas = Some(4);
    mins.spec.placement.clusters[1].min_replicas = Some(3);
    assert!(refused(&mins).contains("the sum of minReplicas exceeds spec.replicas"));
    let mut bounds = example();
    bounds.spec.placement.clusters[1].min_replicas = Some(3);
    bounds.spec.placement.clusters[1].max_replicas = Some(2);
    assert!(refused(&bounds).contains("minReplicas must not exceed maxReplicas"));
    let mut overflow = example();
    overflow.spec.ordinals = Some(spanset_api::GlobalOrdinals { start: i32::MAX - 2 });
    assert!(refused(&overflow).contains("start + replicas must stay within int32"));
    let mut in_place = example();
    in_place.spec.template.update_strategy = Some(
        serde_json::from_value(serde_json::json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}})).unwrap(),
    );
    assert!(
        refused(&in_place).contains("podUpdatePolicy and scaleStrategy are only for spec.backend AdvancedStatefulSet")
    );
    let mut scaled = example();
    scaled.spec.template.scale_strategy =
        Some(serde_json::from_value(serde_json::json!({"maxUnavailable": 1})).unwrap());
    assert!(refused(&scaled).contains("only for spec.backend AdvancedStatefulSet"));
    in_place.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    in_place.spec.template.scale_strategy = scaled.spec.template.scale_strategy.clone();
    in_place.validate_cel().expect("Kruise's fields with the Advanced backend");
}

#[test]
fn storage_move_with_claims_deleted_on_scale_down_is_refused_naming_both_fields() {
    // The source's shrink garbage-collects the moving ordinal's claim (whenScaled: Delete)
    // before its volume can be handed over.
    let with = |storage: &str, when_scaled: &str| {
        let mut f = example();
        f.spec.migration.storage = Some(serde_json::from_value(storage.into()).unwrap());
        f.spec.template.persistent_volume_claim_retention_policy = Some(
            serde_json::from_value(serde_json::json!({"whenScaled": when_scaled, "whenDeleted": "Retain"})).unwrap(),
        );
        f
    };
    let e = refused(&with("Move", "Delete"));
    assert!(e.contains("spec.migration.storage: Move cannot be combined with"), "{e}");
    assert!(e.contains("spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete"), "{e}");
    with("Move", "Retain").validate_cel().expect("Move keeps claims on scale-down");
    with("Detached", "Delete").validate_cel().expect("Detached does not hand claims over");
    // The controller refuses it too (a federation stored before the rule), naming both fields.
    let errs = with("Move", "Delete").spec.to_desired().unwrap_err();
    let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    assert!(text.starts_with("spec.migration.storage: Move cannot be combined with spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete"), "{text}");
    assert!(with("Move", "Retain").spec.to_desired().is_ok());
}

#[test]
fn selector_service_name_and_claim_templates_are_immutable() {
    let old = example();
    let mut scaled = example();
    scaled.spec.replicas = 8;
    scaled.validate_cel_update(&old).expect("replicas may change");
    let mut renamed = example();
    renamed.spec.template.service_name = "other".into();
    let e = renamed.validate_cel_update(&old).unwrap_err().to_string();
    assert!(e.contains("spec.template.serviceName is immutable"), "{e}");
    let mut reselected = example();
    reselected.spec.template.selector.match_labels = Some([("app".to_string(), "other".to_string())].into());
    assert!(reselected.validate_cel_update(&old).unwrap_err().to_string().contains("selector is immutable"));
    let mut reclaimed = example();
    reclaimed.spec.template.volume_claim_templates.clear();
    assert!(reclaimed.validate_cel_update(&old).unwrap_err().to_string().contains("volumeClaimTemplates is immutable"));
    let mut advanced = example();
    advanced.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    let e = advanced.validate_cel_update(&old).unwrap_err().to_string();
    assert!(e.contains("spec.backend is immutable"), "{e}");
    advanced.validate_cel_update(&advanced.clone()).expect("an unchanged backend passes");
}
