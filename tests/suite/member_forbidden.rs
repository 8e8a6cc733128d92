//! A member's 403 told apart, end to end on a sandbox that enforces RBAC: a permission the
//! member's role lacks is `Blocked`/`MemberForbidden`, held without flipping over many
//! reconciles (a recheck among them) until the permission is granted and a write there
//! succeeds; an admission policy's denial (also a 403) is reported as the refusal of the
//! template, naming the policy, never as `MemberForbidden`.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{discovery::v1::EndpointSlice, rbac::v1::ClusterRole};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;
use spanset::cli::join;
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus};
use support::federation::{Controller, Federation, client_for};

use crate::support;

/// The `Blocked` condition's `(reason, lastTransitionTime)` while it is True.
fn blocked(status: &FederatedStatefulSetStatus) -> Option<(String, String)> {
    let c = status.conditions.iter().find(|c| c.type_ == "Blocked" && c.status == "True")?;
    Some((c.reason.clone(), c.last_transition_time.0.to_string()))
}

/// The times the controller logged a member's refusal of its writes.
fn refusals_logged(c: &Controller) -> usize {
    c.log_text().lines().filter(|l| l.contains("a member refuses spanset's writes")).count()
}

/// Every version of `cart` a watch from resourceVersion `rv` delivers: `(resourceVersion,
/// Blocked)`.
async fn status_versions(
    api: &Api<FederatedStatefulSet>,
    rv: &str,
) -> Arc<Mutex<Vec<(String, Option<(String, String)>)>>> {
    let versions = Arc::new(Mutex::new(Vec::new()));
    let into = versions.clone();
    let mut stream = api.watch(&WatchParams::default().timeout(290), rv).await.expect("a watch opens").boxed();
    tokio::spawn(async move {
        while let Some(Ok(WatchEvent::Modified(f))) = stream.next().await {
            if f.metadata.name.as_deref() == Some("cart") {
                let rv = f.metadata.resource_version.clone().unwrap_or_default();
                into.lock().unwrap().push((rv, blocked(&f.status.unwrap_or_default())));
            }
        }
    });
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_is_member_forbidden_until_granted_and_a_write_succeeds() {
    let mut f = Federation::start_secure(&["east", "west"]).await;
    f.refusals_expected = true;
    // East's role loses the right to create and update EndpointSlices (kept: watching them),
    // which spanset writes there to list west's pod (spec.network's default mode). Those
    // writes come after the round's status is stored, so each refused round stored a status
    // without the refusal, and the condition came and went.
    let roles: Api<ClusterRole> = Api::all(client_for(&f.sandbox.kubeconfig, "east").await);
    let granted = roles.get(join::MEMBER_ACCOUNT).await.unwrap();
    let mut role = granted.clone();
    for r in role.rules.as_mut().unwrap() {
        if r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == "endpointslices")) {
            r.verbs.retain(|v| v != "create" && v != "update");
        }
    }
    role.metadata.managed_fields = None;
    roles.replace(join::MEMBER_ACCOUNT, &PostParams::default(), &role).await.unwrap();
    let c = Controller::start(&f.sandbox, "controller");
    let mut cart = f.placing("cart", &["east", "west"]);
    cart.spec.replicas = 2;
    f.create(&cart).await;
    let api = f.api();
    let status = || async { api.get("cart").await.unwrap().status.unwrap_or_default() };

    let start = Instant::now();
    let first = loop {
        let s = status().await;
        if let Some(b) = blocked(&s) {
            break b;
        }
        assert!(start.elapsed() < support::DEADLINE, "never Blocked: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(first.0, "MemberForbidden", "{first:?}");
    let message = status().await.conditions.into_iter().find(|c| c.type_ == "Blocked").unwrap().message;
    assert!(
        message.contains(
            r#"User "system:serviceaccount:spanset-system:spanset-member" cannot create resource "endpointslices""#
        ),
        "names the permission: {message}"
    );

    // Held, unchanged, over reconciles that events bring and over the recheck that tries the
    // member again (a second refusal logged): every version of the status stored meanwhile,
    // as a watch delivers them, shows the same condition.
    let now = api.get("cart").await.unwrap().metadata.resource_version.unwrap();
    let versions = status_versions(&api, &now).await;
    let seen = refusals_logged(&c);
    let mut touches = 0;
    let start = Instant::now();
    while refusals_logged(&c) <= seen || touches < 5 {
        assert!(start.elapsed() < Duration::from_secs(120), "no recheck of the member logged");
        if touches < 5 {
            let touch = json!({"metadata": {"annotations": {"example.com/touch": touches.to_string()}}});
            api.patch("cart", &PatchParams::default(), &Patch::Merge(&touch)).await.unwrap();
            touches += 1;
        }
        assert_eq!(blocked(&status().await), Some(first.clone()), "the condition held, after {touches} touches");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The watch delivers what was stored before this point.
    let touched = api.get("cart").await.unwrap().metadata.resource_version.unwrap();
    support::eventually("the watch caught up", || async {
        versions.lock().unwrap().iter().any(|(rv, _)| *rv == touched)
    })
    .await;
    let stored = versions.lock().unwrap().clone();
    assert!(stored.len() >= 5, "the touches were seen: {stored:?}");
    for (rv, b) in &stored {
        assert_eq!(b.as_ref(), Some(&first), "version {rv} of the status: {stored:?}");
    }
    let east: Api<EndpointSlice> = Api::namespaced(f.member("east").await, "default");
    let published = || async {
        east.list(&Default::default()).await.unwrap().items.iter().any(|s| {
            s.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get("endpointslice.kubernetes.io/managed-by").is_some_and(|m| m == "spanset.dev"))
        })
    };
    assert!(!published().await, "nothing written while refused");

    // Granted again: the next recheck writes, and the condition goes, never to come back.
    let mut restored = granted;
    restored.metadata.managed_fields = None;
    restored.metadata.resource_version = None;
    roles.replace(join::MEMBER_ACCOUNT, &PostParams::default(), &restored).await.unwrap();
    let start = Instant::now();
    let mut cleared = false;
    loop {
        let s = status().await;
        match blocked(&s) {
            Some(b) => {
                assert!(!cleared, "MemberForbidden came back after it cleared: {b:?}");
                assert_eq!(b, first, "held until cleared");
            }
            None => cleared = true,
        }
        if cleared && published().await {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "never cleared or written: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f.wait_settled("cart", &[("east", 0, 1), ("west", 1, 1)], "settled once granted").await;
    assert_eq!(blocked(&status().await), None, "cleared for good");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_policys_403_names_the_policy_and_is_not_member_forbidden() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    let admin = client_for(&f.sandbox.kubeconfig, "east").await;
    let resource = |kind: &str| {
        ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind))
    };
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-cart"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["statefulsets"]}]},
            "validations": [{"expression": "object.metadata.name != 'cart'", "message": "no cart here", "reason": "Forbidden"}],
        },
    }))
    .unwrap();
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-cart"},
        "spec": {"policyName": "no-cart", "validationActions": ["Deny"]},
    }))
    .unwrap();
    let policies: Api<DynamicObject> = Api::all_with(admin.clone(), &resource("ValidatingAdmissionPolicy"));
    policies.create(&PostParams::default(), &policy).await.unwrap();
    let bindings: Api<DynamicObject> = Api::all_with(admin, &resource("ValidatingAdmissionPolicyBinding"));
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let _c = Controller::start(&f.sandbox, "controller");
    let mut cart = f.placing("cart", &["east"]);
    cart.spec.replicas = 1;
    f.create(&cart).await;
    let start = Instant::now();
    let (reason, message) = loop {
        let s = f.status("cart").await;
        if let Some(c) = s.conditions.iter().find(|c| c.type_ == "Blocked" && c.status == "True") {
            break (c.reason.clone(), c.message.clone());
        }
        assert!(start.elapsed() < support::DEADLINE, "never Blocked: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(reason, "MemberForbidden", "{message}");
    assert_eq!(reason, "TemplateRefused", "{message}");
    assert!(
        message.contains("ValidatingAdmissionPolicy 'no-cart' with binding 'no-cart' denied request: no cart here"),
        "names the policy: {message}"
    );
    assert!(message.contains("(403)"), "{message}");
}
