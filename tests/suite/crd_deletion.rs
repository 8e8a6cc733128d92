//! The sandbox deletes a CustomResourceDefinition as kube-apiserver does: `kubectl delete crd`
//! marks it (deletionTimestamp, the finalizer `customresourcecleanup.apiextensions.k8s.io`,
//! `Terminating` True) and keeps serving its resource; its objects are deleted through the
//! normal two-phase deletion (one with a finalizer gets a deletionTimestamp, watchers see
//! MODIFIED, and it stays until its finalizer is removed, then DELETED); a create is refused
//! meanwhile (405, as 1.33 answers); and once no object is left the CRD goes, and its resource
//! leaves discovery.

use crate::support;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams, WatchEvent, WatchParams},
    discovery::Discovery,
};
use serde_json::{Value, json};
use support::{Kubectl, Sandbox, eventually, federation::client_for};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing, listKind: ThingList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn thing(name: &str, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": name, "namespace": "default", "finalizers": finalizers},
        "spec": {"size": 1},
    }))
    .unwrap()
}

fn things(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Thing");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "things"))
}

async fn served(client: &Client) -> bool {
    let discovery = Discovery::new(client.clone()).run_aggregated().await.expect("discovery");
    discovery
        .groups()
        .any(|g| g.name() == "example.com" && g.resources_by_stability().iter().any(|(r, _)| r.plural == "things"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_is_deleted_in_two_phases_and_its_objects_through_their_finalizers() {
    let sandbox = Sandbox::start("host");
    let Some(k) = Kubectl::new(33, &sandbox) else { return };
    let client = client_for(&sandbox.kubeconfig, "host").await;
    k.ok_with_stdin(&["apply", "-f", "-"], CRD);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.get("things.example.com").await.unwrap();
    assert!(created.finalizers().is_empty(), "a CRD gets its finalizer when deleted, not when created");
    let api = things(&client);
    let pp = PostParams::default();
    api.create(&pp, &thing("held", &["example.com/hold"])).await.unwrap();
    api.create(&pp, &thing("free", &[])).await.unwrap();

    // Every event of the resource from here on.
    let seen: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let sink = seen.clone();
    let stream = api.watch(&WatchParams::default(), "0").await.expect("a watch");
    let watching = tokio::spawn(async move {
        let mut stream = stream.boxed();
        while let Some(Ok(ev)) = stream.next().await {
            let (kind, o) = match ev {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                _ => continue,
            };
            sink.lock().unwrap().push((kind.into(), o.name_any(), o.metadata.deletion_timestamp.is_some()));
        }
    });

    k.ok(&["delete", "crd", "things.example.com", "--wait=false"]);
    let crd = serde_json::to_value(crds.get("things.example.com").await.expect("still there")).unwrap();
    assert!(crd["metadata"]["deletionTimestamp"].is_string(), "{crd}");
    assert_eq!(crd["metadata"]["finalizers"], json!(["customresourcecleanup.apiextensions.k8s.io"]));
    let terminating = |crd: &Value| {
        crd["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Terminating").cloned()
    };
    assert_eq!(terminating(&crd).map(|c| c["status"].clone()), Some(json!("True")), "{crd}");

    eventually("the free object is gone and the held one is being deleted", || async {
        let held = api.get_opt("held").await.ok().flatten();
        api.get_opt("free").await.is_ok_and(|o| o.is_none())
            && held.is_some_and(|h| h.metadata.deletion_timestamp.is_some())
    })
    .await;
    eventually("the CRD says its objects are being deleted", || async {
        let crd = serde_json::to_value(crds.get("things.example.com").await.unwrap()).unwrap();
        terminating(&crd).is_some_and(|c| c["status"] == "True" && c["reason"] == "InstanceDeletionInProgress")
    })
    .await;
    // While it terminates: still served and listed in discovery; creates refused as 1.33 does.
    assert!(served(&client).await, "a terminating CRD's resource stays in discovery");
    let refused = api.create(&pp, &thing("late", &[])).await.expect_err("no create while terminating");
    match refused {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed"), "{s:?}");
            assert_eq!(s.message, "create not allowed while custom resource definition is terminating");
        }
        other => panic!("unexpected error: {other}"),
    }
    let late = serde_json::to_string(&thing("late", &[])).unwrap();
    let err = String::from_utf8_lossy(&k.run_with_stdin(&["create", "-f", "-"], &late).stderr).into_owned();
    assert!(
        err.contains("Error from server (MethodNotAllowed)")
            && err.contains("create not allowed while custom resource definition is terminating"),
        "{err}"
    );
    assert!(crds.get_opt("things.example.com").await.unwrap().is_some(), "held by the object's finalizer");

    // The held object's finalizer removed: the object goes, then the CRD, then its resource.
    k.ok(&["patch", "things.example.com", "held", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    eventually("the CRD is gone", || async { crds.get_opt("things.example.com").await.is_ok_and(|c| c.is_none()) })
        .await;
    assert!(!served(&client).await, "a deleted CRD's resource leaves discovery");
    k.fails(&["get", "things.example.com", "held"]);

    watching.abort();
    let events = seen.lock().unwrap().clone();
    let of = |name: &str| -> Vec<(String, bool)> {
        events.iter().filter(|e| e.1 == name).map(|e| (e.0.clone(), e.2)).collect()
    };
    assert_eq!(
        of("held"),
        [("ADDED".into(), false), ("MODIFIED".into(), true), ("DELETED".into(), true)],
        "held: marked, then gone with its finalizer; {events:?}"
    );
    let free: Vec<String> = of("free").into_iter().map(|e| e.0).collect();
    assert_eq!(free, ["ADDED", "DELETED"], "{events:?}");
    assert!(of("late").is_empty(), "nothing was created: {events:?}");
}
