//! Terms keep growing past what the Lease remembers (issue 19, item 15): the stamps in the
//! members are a record of past terms too, so a new leader takes a term above every stamp it
//! sees, whether the Lease was deleted or renamed; and a write refused as stale says so loudly.

mod support;

use k8s_openapi::api::{apps::v1::StatefulSet, coordination::v1::Lease};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use spanset::{cli::sandbox::example, controller::labels::TERM};
use support::federation::{Controller, Federation};

const HALVES: [(&str, i32, i32); 2] = [("east", 0, 3), ("west", 3, 3)];

/// The term stamped on the federation's StatefulSet in each member (`None`: none there yet).
async fn stamps(f: &Federation) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for m in &f.members {
        let api: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        let sts = api.get_opt("redis").await.ok().flatten();
        out.push(sts.and_then(|s| s.metadata.annotations?.get(TERM)?.parse().ok()));
    }
    out
}

/// Settles the example over east and west, then has a second controller take over, so that
/// every member carries term 2; leaves the second controller killed (its Lease still held).
async fn stamped_in_term_two(f: &Federation) {
    let mut first = Controller::start(&f.sandbox, "first");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &HALVES, "initial slices").await;
    first.kill();
    let mut second = Controller::start(&f.sandbox, "second");
    support::eventually("term 2 stamped in every member", || async { stamps(f).await.iter().all(|t| *t == Some(2)) })
        .await;
    second.kill();
}

/// Checks that the new leader stamps every member above term 2 and that its writes go
/// through (a scale to 8 settles), with no ordinal ever running twice.
async fn stamps_grow_and_writes_go_through(f: &Federation, leader: &Controller) {
    support::eventually("every member stamped above term 2", || async {
        stamps(f).await.iter().all(|t| t.is_some_and(|t| t > 2))
    })
    .await;
    let body = serde_json::json!({"spec": {"replicas": 8}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("scaled");
    f.wait_settled("redis", &[("east", 0, 4), ("west", 4, 4)], "the scale written by the new leader").await;
    let log = without_colours(&leader.log_text());
    let terms: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("acquired leadership"))
        .filter_map(|l| l.split("term=").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    assert!(!terms.is_empty() && terms.iter().all(|t| *t > 2), "every term taken is above the stamps: {terms:?}");
    f.assert_ledger_clean();
}

/// The text without its terminal colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_after_the_lease_was_deleted_takes_a_term_above_every_stamp() {
    let f = Federation::start(&["east", "west"]).await;
    stamped_in_term_two(&f).await;
    let leases: Api<Lease> = Api::namespaced(f.host.clone(), f.lease_namespace());
    leases.delete("spanset-leader", &DeleteParams::default()).await.expect("the Lease deleted");
    let third = Controller::start(&f.sandbox, "third");
    stamps_grow_and_writes_go_through(&f, &third).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_of_a_renamed_lease_takes_a_term_above_every_stamp() {
    // As the administrator: the shipped Role names the default Lease only.
    let f = Federation::start_with(&["east", "west"], &[]).await;
    stamped_in_term_two(&f).await;
    let third = Controller::start_full(&f.sandbox, "third", &[], &["--lease-name", "spanset-renamed"]);
    stamps_grow_and_writes_go_through(&f, &third).await;
}
