//! A controller replica in the model: its watchers' lists become the `MemberView`s that
//! `spanset run` builds, the real `reconcile::decide` decides, and the decision becomes the
//! ordered effects the coordinator carries out (`controller::effects`).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus, labels::IDENTITY_GATE};
use spanset_controller::{
    actors::messages::MemberView,
    decisions::{
        effects::{self, Stage},
        reconcile::{self, Decision, HandoverKind, Inputs, MemberInput},
        safety::{Rules, claim_precondition},
    },
    member::{
        cache::{ClaimRecord, FederationCache, PodPhase, PodRecord, StsRecord, StsState, UncertainWrite},
        health::Failure,
    },
};
use spanset_plan::{Backend, Slice};

use super::state::{Confirmed, Controller, Effect, HostCopy, MEMBERS, View};

/// What stays fixed while the model runs: the specs a schedule may switch between, and the
/// clocks (reachability comes from the model's views, not from time).
pub struct Fixed {
    /// The federation under each spec, without status.
    pub specs: Vec<FederatedStatefulSet>,
    /// Monotonic now.
    pub now: Instant,
    /// Wall-clock now (constant: condition times do not make states differ).
    pub wall: jiff::Timestamp,
    /// The safety rules the controllers run with (all but in planted-bug tests).
    pub rules: Rules,
}

impl Fixed {
    /// The federation as a controller read it.
    pub fn federation(&self, host: &HostCopy) -> FederatedStatefulSet {
        let mut f = self.specs[host.spec as usize].clone();
        f.metadata.generation = Some(host.generation);
        f.metadata.resource_version = Some(host.rv.to_string());
        f.status = if host.status.is_empty() {
            None
        } else {
            Some(serde_json::from_str::<FederatedStatefulSetStatus>(&host.status).expect("a stored status parses"))
        };
        f
    }
}

/// The `MemberView` a watcher reports, from what the model's watcher listed.
fn member_view(view: &View, now: Instant) -> MemberView {
    let sts = view.sts.as_ref().map(|s| StsRecord {
        kind: Backend::StatefulSet,
        uid: format!("u{}", s.uid),
        rv: s.rv,
        generation: s.generation,
        observed_generation: s.observed,
        slice: Slice { start: s.start, replicas: s.replicas, ..Slice::empty() },
        has_ordinals: true,
        term: Some(s.term),
        template_hash: Some(s.hash.clone()),
        federation_uid: Some("uid-1".into()),
        deleting: false,
        partition: s.partition,
        update_revision: (s.observed >= s.generation).then(|| s.revision()),
        ungated_template: None,
        ungated_revision: None,
        guard: None,
    });
    let pods = view
        .pods
        .iter()
        .map(|(k, p)| {
            let record = PodRecord {
                uid: format!("p{}", p.uid),
                node: Some("node-1".into()),
                phase: if p.phase_running { PodPhase::Running } else { PodPhase::Pending },
                ready: p.ready,
                deleting: p.deleting,
                rv: p.rv,
                gates: if p.gated { vec![IDENTITY_GATE.to_string()] } else { vec![] },
                revision: Some(p.revision.clone()),
                ready_since: p.ready.then_some(jiff::Timestamp::UNIX_EPOCH),
                ready_seen: p
                    .ready
                    .then(|| std::time::Instant::now().checked_sub(std::time::Duration::from_secs(3600)))
                    .flatten(),
                trouble: None,
                ip: None,
                // The model's pods are all its StatefulSet's.
                owner: sts.as_ref().map(|s| s.uid.clone()),
                labelled: true,
                guard: None,
            };
            (*k, record)
        })
        .collect();
    let federation = FederationCache {
        sts: sts.map(Box::new),
        pods,
        confirmed_for: view.confirmed.as_ref().map(|c| match c {
            Confirmed::Absent => StsState::Absent,
            Confirmed::Present(uid, generation) => {
                StsState::Present { uid: format!("u{uid}"), generation: *generation }
            }
        }),
        written_generation: view.written.map(|(uid, g)| (format!("u{uid}"), g)),
        uncertain_write: view.uncertain.map(|expected_rv| UncertainWrite { kind: Backend::StatefulSet, expected_rv }),
        ..Default::default()
    };
    let claims = view
        .claims
        .iter()
        .map(|(k, volume)| {
            let record = ClaimRecord {
                name: format!("data-redis-{k}"),
                uid: format!("c{k}-{volume}"),
                phase: "Bound".into(),
                volume: Some(format!("pv-{volume}")),
                deleting: false,
                rv: 1,
            };
            (*k, vec![record])
        })
        .collect();
    MemberView {
        synced: view.synced,
        federation: federation.into(),
        claims,
        last_contact: Some(if view.reachable { now } else { now - Duration::from_secs(3600) }),
        watching_since: Some(now - Duration::from_secs(7200)),
        failure: (!view.reachable).then(|| (Failure::Refused, "connection refused".to_string())),
        keeps_ordinals: Some(true),
        serves_advanced: Some(false),
        budgets_known: true,
        slices_known: true,
        ..Default::default()
    }
}

/// Runs the real decision of controller `c` on what it knows.
pub fn decide(fixed: &Fixed, c: &Controller) -> Option<(FederatedStatefulSet, Decision)> {
    let host = c.host.as_ref()?;
    let term = c.term?;
    let fsts = fixed.federation(host);
    let members: BTreeMap<String, MemberInput> = MEMBERS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let input = MemberInput {
                exists: true,
                unusable: None,
                fenced: host.fenced[i],
                answered_since_fence: host.fenced[i] && c.views[i].answered_since_fence,
                view: Some(Arc::new(member_view(&c.views[i], fixed.now))),
                duplicate: None,
            };
            (name.to_string(), input)
        })
        .collect();
    let decision = reconcile::decide(&Inputs {
        fsts: &fsts,
        members: &members,
        term,
        template_refusal: None,
        bounds: Default::default(),
        access_refusal: None,
        handover_refusals: BTreeMap::new(),
        rules: fixed.rules,
        now: fixed.now,
        leading_since: fixed.now - Duration::from_secs(7200),
        wall: fixed.wall,
    });
    Some((fsts, decision))
}

fn member_index(name: &str) -> u8 {
    MEMBERS.iter().position(|m| *m == name).expect("a model member") as u8
}

/// The effects of a decision, in the coordinator's order ([`effects::stages`]): the model's
/// part of each stage (the status; the member StatefulSet writes and pod releases; the deletes
/// in a fenced member that answers again). A status equal to the stored one is not written.
pub fn effects(
    fsts: &FederatedStatefulSet,
    decision: &Decision,
    term: u64,
    fenced: &[bool],
    rules: &Rules,
) -> Vec<Effect> {
    let mut out = Vec::new();
    for stage in effects::stages(decision, rules) {
        match stage {
            Stage::StoreStatus if fsts.status.as_ref() != Some(&decision.status) => {
                out.push(Effect::Store {
                    status: serde_json::to_string(&decision.status).expect("a status serializes"),
                });
            }
            Stage::MemberWrites => {
                for w in &decision.writes {
                    let (_, record) =
                        StsRecord::of(&w.object, Backend::StatefulSet).expect("a member StatefulSet of the federation");
                    let member = member_index(&w.cluster);
                    out.push(Effect::Write {
                        member,
                        start: record.slice.start,
                        replicas: record.slice.replicas,
                        partition: record.partition,
                        hash: record.template_hash.unwrap_or_default(),
                        expected_rv: w.expected_rv,
                        term,
                        to_fenced: fenced[member as usize],
                        rehomed: vec![],
                    });
                }
                for r in &decision.releases {
                    let member = member_index(&r.cluster);
                    out.push(Effect::Release {
                        member,
                        ordinal: r.ordinal,
                        uid: r.uid.trim_start_matches('p').parse().expect("a model pod uid"),
                        rv: r.rv,
                        term,
                        to_fenced: fenced[member as usize],
                        rehomed: false,
                    });
                }
            }
            Stage::Handovers => {
                for h in &decision.handovers {
                    let HandoverKind::Retire { arrival, .. } = h.kind else {
                        out.push(Effect::Handover {
                            from: member_index(&h.from),
                            to: member_index(&h.to),
                            ordinal: h.ordinal,
                        });
                        continue;
                    };
                    let member = member_index(if arrival { &h.to } else { &h.from });
                    for c in &h.claims {
                        // The model's claim uid is `c<ordinal>-<volume>`.
                        let volume = claim_precondition(rules, &c.uid, c.rv).map(|(uid, _)| {
                            uid.rsplit('-').next().and_then(|v| v.parse().ok()).expect("a model claim uid")
                        });
                        out.push(Effect::Retire { member, ordinal: h.ordinal, volume, term });
                    }
                }
            }
            Stage::PodDeletes => {
                for d in &decision.pod_deletes {
                    let ordinal =
                        d.name.rsplit('-').next().and_then(|k| k.parse().ok()).expect("a pod name with its ordinal");
                    out.push(Effect::DeletePod {
                        member: member_index(&d.cluster),
                        ordinal,
                        uid: d.uid.trim_start_matches('p').parse().expect("a model pod uid"),
                    });
                }
            }
            // Fences are the operator's in the model (policy Manual); supporting objects,
            // storage, budgets and EndpointSlices are not modelled.
            _ => {}
        }
    }
    out
}
