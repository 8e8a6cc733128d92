//! `spanset run` checks the CRDs before it starts: one that lacks a field this version reads or
//! writes (an upgrade that rolled the image but not the CRDs) stops it at once, with the CRD
//! and the field named, instead of a controller looping on what the old schema prunes.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, api::PostParams};
use support::federation::{Controller, Federation};

use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_missing_a_field_stops_the_controller_naming_both() {
    let f = Federation::start(&["east"]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(f.host.clone());
    let name = "federatedstatefulsets.spanset.dev";
    let mut crd = crds.get(name).await.expect("the CRD is installed");
    let schema = crd.spec.versions[0].schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()).expect("a schema");
    let status = schema.properties.as_mut().and_then(|p| p.get_mut("status")).expect("a status schema");
    let removed = status.properties.as_mut().and_then(|p| p.remove("observedGeneration"));
    assert!(removed.is_some(), "the generated schema has .status.observedGeneration");
    crds.replace(name, &PostParams::default(), &crd).await.expect("the older CRD replaces it");

    let mut c = Controller::start(&f.sandbox, "checked");
    let code = c.wait_exit();
    let log = c.log_text();
    assert_eq!(code, Some(1), "spanset run exits non-zero: {log}");
    assert!(
        log.contains(&format!("CRD {name}: version v1alpha1 has no field .status.observedGeneration")),
        "the error names the CRD and the field: {log}"
    );
    assert!(!log.contains("acquired leadership"), "it never campaigned: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crds_this_binary_generates_let_it_start() {
    let f = Federation::start(&["east"]).await;
    let c = Controller::start(&f.sandbox, "checked");
    support::wait_until("the controller to lead", support::DEADLINE, || c.log_text().contains("acquired leadership"));
}
