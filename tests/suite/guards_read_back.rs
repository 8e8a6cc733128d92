//! The member's own guards are seen, not assumed: the controller reads back, by name, every
//! ValidatingAdmissionPolicy and binding `spanset join` installs, at every MemberCluster status
//! refresh. A binding deleted, a policy altered or a binding narrowed in one member turns its
//! `AdmissionPolicies` guard to not in force within one refresh, naming each object, and the
//! federations placed there say so in `GuardsMissing`; `spanset join` again puts them back, and
//! the controller sees that without a restart. A member registered without `spanset join` has
//! no guard in force, and one whose identity may not read them says so. What the read-back
//! costs is counted in the sandbox's audit: one GET per shipped object per member per refresh.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use kube::{
    Api,
    api::{DynamicObject, PostParams},
};
use serde_json::json;
use spanset::cli::join;
use spanset_api::MemberCluster;
use spanset_controller::{
    actors::watcher::GUARDS_READ_PERIOD,
    member::policies::{Kind, shipped},
};
use support::federation::{Controller, Federation, MEMBER_IDENTITY};

use crate::support;

/// The `AdmissionPolicies` guard a MemberCluster's status lists: `(in force, message)`.
async fn admission_guard(f: &Federation, member: &str) -> Option<(bool, String)> {
    let mc = Api::<MemberCluster>::all(f.host.clone()).get(member).await.ok()?;
    let g = mc.status?.guards.into_iter().find(|g| g.name == "AdmissionPolicies")?;
    Some((g.in_force, g.message))
}

/// The `GuardsMissing` condition of federation `name`: `(status, message)`.
async fn guards_missing(f: &Federation, name: &str) -> Option<(String, String)> {
    let c = f.status(name).await.conditions.into_iter().find(|c| c.type_ == "GuardsMissing")?;
    Some((c.status, c.message))
}

/// Waits, polling gently (the wait spans a refresh), until `member`'s `AdmissionPolicies` guard
/// satisfies `ok`, at most one refresh period (plus a probe and the status write) after
/// `since`; answers its message.
async fn guard_within_a_refresh(
    f: &Federation,
    member: &str,
    since: Instant,
    what: &str,
    ok: impl Fn(bool, &str) -> bool,
) -> String {
    let limit = GUARDS_READ_PERIOD + Duration::from_secs(8);
    loop {
        let seen = admission_guard(f, member).await;
        if let Some((in_force, message)) = &seen
            && ok(*in_force, message)
        {
            println!("{member}: {what} after {:?}", since.elapsed());
            return message.clone();
        }
        assert!(since.elapsed() < limit, "{member}: {what}: not seen within one refresh ({limit:?}): {seen:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The read-back GETs spanset's member identity made in `member`, per shipped object (kind
/// plural, name); panics on any other request to those resources (a list, a watch, a write).
fn read_backs(f: &Federation, member: &str) -> BTreeMap<(String, String), usize> {
    let kinds = [Kind::Policy.plural(), Kind::Binding.plural()];
    let mut out = BTreeMap::new();
    for r in f.audit(member) {
        let resource = r["resource"].as_str().unwrap_or_default();
        if r["user"] != MEMBER_IDENTITY || !kinds.contains(&resource) {
            continue;
        }
        assert_eq!(r["verb"], "get", "{member}: spanset only reads its guards, by name: {r}");
        assert_eq!(r["allowed"], true, "{member}: {r}");
        *out.entry((resource.to_string(), r["name"].as_str().unwrap_or_default().to_string())).or_default() += 1;
    }
    out
}

/// Every shipped object as `(plural, name)`.
fn every_shipped() -> Vec<(String, String)> {
    shipped().iter().map(|s| (s.kind.plural().to_string(), s.name.clone())).collect()
}

/// A shipped object as stored in `member`, read as the administrator.
async fn stored(f: &Federation, member: &str, kind: Kind, name: &str) -> (Api<DynamicObject>, DynamicObject) {
    let api: Api<DynamicObject> = Api::all_with(f.member(member).await, &kind.resource());
    let obj = api.get(name).await.unwrap_or_else(|e| panic!("{member}: {} {name}: {e}", kind.singular()));
    (api, obj)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_deleted_or_altered_is_named_within_a_refresh_and_join_restores_it() {
    let start = Instant::now();
    let f = Federation::start_secure(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("redis", &["east", "west"])).await;

    let joined = Instant::now();
    for m in ["east", "west"] {
        let m = guard_within_a_refresh(&f, m, joined, "in force", |in_force, _| in_force).await;
        assert!(m.starts_with("spanset read back every ValidatingAdmissionPolicy and binding"), "{m}");
    }
    support::until("redis misses no guard", || async {
        guards_missing(&f, "redis").await.filter(|(s, _)| s == "False")
    })
    .await;

    // An administrator deletes one binding in east.
    f.delete_bindings("east", &["spanset-owner"]).await;
    let deleted = Instant::now();
    let m = guard_within_a_refresh(&f, "east", deleted, "missing its binding", |in_force, _| !in_force).await;
    assert!(
        m.starts_with(
            "validatingadmissionpolicybinding spanset-owner is missing; spanset counts on none of the member's \
             admission policies until `spanset join` restores them"
        ),
        "{m}"
    );
    let (status, missing) = support::until("redis says what east lacks", || async {
        guards_missing(&f, "redis").await.filter(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(status, "True");
    assert!(
        missing.starts_with(
            "east (v1.33.1) lacks AdmissionPolicies: validatingadmissionpolicybinding spanset-owner is missing"
        ),
        "{missing}"
    );
    assert!(!missing.contains("west"), "west keeps its guards: {missing}");
    assert!(admission_guard(&f, "west").await.is_some_and(|(in_force, _)| in_force), "west untouched");

    // Then one validation of a policy is removed, and a binding is narrowed to nothing (a
    // selector no object matches): each is named as altered.
    let (api, mut term) = stored(&f, "east", Kind::Policy, "spanset-member-term").await;
    term.data["spec"]["validations"] = json!([{"expression": "true"}]);
    api.replace("spanset-member-term", &PostParams::default(), &term).await.expect("policy altered");
    let (api, mut gate) = stored(&f, "east", Kind::Binding, "spanset-identity-gate").await;
    gate.data["spec"]["matchResources"] = json!({"objectSelector": {"matchLabels": {"nothing": "matches"}}});
    api.replace("spanset-identity-gate", &PostParams::default(), &gate).await.expect("binding narrowed");
    let altered = Instant::now();
    let m = guard_within_a_refresh(&f, "east", altered, "naming the altered ones", |_, m| m.contains("differs")).await;
    assert!(
        m.starts_with(
            "validatingadmissionpolicybinding spanset-owner is missing; validatingadmissionpolicybinding \
             spanset-identity-gate: spec.matchResources differs from what spanset join installs; \
             validatingadmissionpolicy spanset-member-term: spec.validations differs from what spanset join \
             installs; spanset counts on none"
        ),
        "{m}"
    );
    let missing = support::until("redis names the altered ones", || async {
        guards_missing(&f, "redis").await.map(|(_, m)| m).filter(|m| m.contains("spec.matchResources"))
    })
    .await;
    assert!(missing.contains("validatingadmissionpolicy spanset-member-term: spec.validations differs"), "{missing}");

    // `spanset join` again: everything as shipped (the narrowed binding's foreign field too), and
    // the controller, still running, sees it within a refresh.
    join_again(&f, "east");
    let (_, gate) = stored(&f, "east", Kind::Binding, "spanset-identity-gate").await;
    assert!(gate.data["spec"].get("matchResources").is_none(), "join removed the selector: {:?}", gate.data);
    let rejoined = Instant::now();
    guard_within_a_refresh(&f, "east", rejoined, "in force again", |in_force, _| in_force).await;
    support::until("redis misses no guard again", || async {
        guards_missing(&f, "redis").await.filter(|(s, _)| s == "False")
    })
    .await;

    // What it cost: each member's every shipped object read once per refresh, by name, and
    // nothing else of them (no list, no watch). Budget: 22 GETs per member per refresh, at
    // most one refresh per period since the controller started, plus one for the watcher a
    // re-join restarts (its credentials changed) and one more for a read in flight at the end.
    let elapsed = start.elapsed();
    let rounds_allowed = (elapsed.as_secs() / GUARDS_READ_PERIOD.as_secs()) as usize + 3;
    for m in ["east", "west"] {
        let reads = read_backs(&f, m);
        let names = every_shipped();
        assert_eq!(names.len(), 22, "11 policies and their 11 bindings");
        let read: BTreeSet<_> = reads.keys().cloned().collect();
        assert_eq!(read, names.iter().cloned().collect(), "{m}: every shipped object read, nothing else");
        let rounds = *reads.values().max().unwrap();
        assert!(reads.values().all(|&n| n + 1 >= rounds), "{m}: each refresh reads every object once: {reads:?}");
        let total: usize = reads.values().sum();
        println!(
            "{m}: {total} read-back GETs in {rounds} refreshes over {elapsed:?} (budget {rounds_allowed} refreshes)"
        );
        assert!(total <= names.len() * rounds, "{m}: {total} GETs in {rounds} refreshes");
        assert!(rounds >= 2 && rounds <= rounds_allowed, "{m}: {rounds} refreshes in {elapsed:?}");
    }
}

/// A member registered without `spanset join` (`spanset sandbox` without `--auth` creates its
/// MemberClusters directly): nothing was installed, and spanset does not count on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_registered_without_join_has_no_admission_guard_in_force() {
    let f = Federation::start_with(&["east"], &[]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("redis", &["east"])).await;
    let m = guard_within_a_refresh(&f, "east", Instant::now(), "not in force", |in_force, _| !in_force).await;
    assert!(
        m.starts_with(
            "none of the 11 validatingadmissionpolicies and 11 validatingadmissionpolicybindings that spanset join \
             installs is there; spanset counts on none"
        ),
        "{m}"
    );
    let missing = f.wait_condition("redis", "GuardsMissing", "GuardsMissing").await;
    assert!(missing.starts_with("east (v1.33.1) lacks AdmissionPolicies: none of the 11"), "{missing}");

    // Installed afterwards by hand (`kubectl apply -f deploy/member/admission.yaml`): seen
    // within a refresh, no restart.
    join::apply_manifest(&f.member("east").await, join::MEMBER_ADMISSION, "deploy/member/admission.yaml")
        .await
        .expect("the guards applied");
    guard_within_a_refresh(&f, "east", Instant::now(), "in force once installed", |in_force, _| in_force).await;
}

/// A member whose spanset identity may not read its guards (joined by an older spanset, or its
/// rule removed by hand) cannot show them: not in force, saying so; `spanset join` grants it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_spanset_may_not_read_are_not_in_force() {
    let mut f = Federation::start_secure(&["east"]).await;
    f.refusals_expected = true;
    let admin = f.member("east").await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    let mut role = roles.get(join::MEMBER_ACCOUNT).await.unwrap();
    role.rules
        .as_mut()
        .unwrap()
        .retain(|r| !r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == Kind::Policy.plural())));
    role.metadata.managed_fields = None;
    roles.replace(join::MEMBER_ACCOUNT, &PostParams::default(), &role).await.unwrap();
    let _c = Controller::start(&f.sandbox, "controller");
    let m = guard_within_a_refresh(&f, "east", Instant::now(), "unreadable", |in_force, _| !in_force).await;
    let names = "spanset-owner, spanset-owner-scale, spanset-owner-scale-kruise, spanset-owner-gates, \
                 spanset-owner-labels, spanset-identity-gate, spanset-identity-gate-names, \
                 spanset-identity-gate-names-kruise, spanset-member-term, spanset-member-scope, spanset-owner-leases";
    assert!(m.starts_with(&format!("validatingadmissionpolicies {names} cannot be read by spanset (403: ")), "{m}");
    assert!(
        m.contains(&format!("; validatingadmissionpolicybindings {names} cannot be read by spanset (403: ")),
        "{m}"
    );
    assert!(m.contains(r#"User "system:serviceaccount:spanset-system:spanset-member" cannot get resource"#), "{m}");
    join_again(&f, "east");
    guard_within_a_refresh(&f, "east", Instant::now(), "in force once join granted it", |in_force, _| in_force).await;
}

/// Runs `spanset join MEMBER` again, as an operator restoring what was removed; panics with its
/// error if it fails.
fn join_again(f: &Federation, member: &str) {
    let kubeconfig = f.sandbox.kubeconfig.to_str().unwrap().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["join", member, "--kubeconfig", &kubeconfig, "--context", member, "--host-context", "host"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
