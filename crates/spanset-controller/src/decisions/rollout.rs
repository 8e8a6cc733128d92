//! Rolling updates of the whole federation, as one StatefulSet rolls: pods are replaced in
//! decreasing ordinal order wherever they run, at most `rollingUpdate.maxUnavailable` pods of
//! the *federation* unavailable at once (counting pods unavailable for any reason, in any
//! member), the next only once the last is Ready for `minReadySeconds`, never below
//! `rollingUpdate.partition`.
//!
//! The mechanism is a global cursor (`status.updatePartition`): pods of ordinals at or above
//! it may run the new template. Each member StatefulSet is written the cursor in its own pod
//! indices as its partition ([`crate::member::objects::member_partition`]), so the
//! members' own StatefulSet controllers replace exactly the pods the cursor lets through, one
//! at a time each. The cursor only goes down within one revision (a raised partition would
//! recreate an updated pod that is deleted later with the old template), and is stored before
//! any member is written with it, so a restarted or new leader resumes where it was.
//!
//! Pure: the reconcile gives the pods it observed, this decides the cursor and the status.

use std::collections::BTreeMap;

use spanset_api::FederatedStatefulSetStatus;
use spanset_plan::Ordinal;

/// One ordinal's pod as the rollout sees it: the pod in the member whose written slice holds
/// it, if that member is reachable and not fenced (otherwise the ordinal counts as unavailable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// The member running it.
    pub cluster: String,
    /// It runs the spec's template (its member's `updateRevision`, for the current template).
    pub updated: bool,
    /// Ready for `minReadySeconds`, and not being deleted.
    pub available: bool,
    /// Ready, and not being deleted.
    pub ready: bool,
    /// Being deleted.
    pub deleting: bool,
    /// What keeps it from being Ready, if it is not.
    pub trouble: Option<String>,
}

/// What a rollout decides from.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The federation's name (pods are `<name>-<ordinal>`).
    pub name: &'a str,
    /// The revision of the spec's template.
    pub revision: String,
    /// The status as stored: the cursor and the revisions.
    pub previous: &'a FederatedStatefulSetStatus,
    /// The federation's ordinal range.
    pub range: std::ops::Range<Ordinal>,
    /// `rollingUpdate.partition` (global ordinals).
    pub partition: Ordinal,
    /// `rollingUpdate.maxUnavailable`, resolved against the replicas (at least 1).
    pub max_unavailable: u32,
    /// `updateStrategy.type: OnDelete`: nothing is rolled; pods are replaced when deleted.
    pub on_delete: bool,
    /// The pod of every ordinal of the range that has one where it is written.
    pub pods: &'a BTreeMap<Ordinal, PodState>,
}

/// What the rollout waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The ordinal.
    pub ordinal: Ordinal,
    /// Why, naming the pod, its member and its state.
    pub message: String,
    /// The pod runs the new template and cannot become Ready by itself (its image cannot be
    /// pulled, it crashes, it cannot be scheduled): the rollout will not go on without help.
    pub stuck: bool,
}

/// The rollout's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    /// `status.updateRevision`.
    pub update_revision: String,
    /// `status.currentRevision`.
    pub current_revision: String,
    /// The cursor: ordinals at or above it may run `update_revision`.
    pub cursor: Ordinal,
    /// Pods running the spec's template.
    pub updated: u32,
    /// Pods running `current_revision`.
    pub current: u32,
    /// Pods available.
    pub available: u32,
    /// Every ordinal from the partition up runs the new template and is available.
    pub complete: bool,
    /// What the rollout waits on, while it is not complete.
    pub waiting: Option<Waiting>,
    /// Ordinals the cursor passed in this round, highest first.
    pub lowered: Vec<Ordinal>,
}

/// Container states a pod does not leave by itself.
const STUCK_REASONS: [&str; 8] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "not scheduled",
];

/// Whether a pod's trouble is one it will not leave by itself.
pub fn stuck(trouble: &str) -> bool {
    STUCK_REASONS.iter().any(|r| trouble.contains(r))
}

/// `rollingUpdate.maxUnavailable` as a count of `replicas`: a number, or a percentage rounded
/// up, at least 1 (as kube-controller-manager resolves a StatefulSet's).
pub fn resolve_max_unavailable(
    value: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    replicas: u32,
) -> u32 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let n = match value {
        None => 1,
        Some(IntOrString::Int(n)) => (*n).max(0) as u32,
        Some(IntOrString::String(s)) => match s.strip_suffix('%').and_then(|p| p.trim().parse::<u64>().ok()) {
            Some(pct) => (u64::from(replicas) * pct).div_ceil(100).min(u64::from(u32::MAX)) as u32,
            None => 1,
        },
    };
    n.max(1)
}

/// Decides the cursor and the rollout's status for this round.
pub fn roll(inp: &Input<'_>) -> Rollout {
    let (start, end) = (inp.range.start, inp.range.end);
    let lo = inp.partition.clamp(start, end);
    let pods = inp.pods;
    let done = |k: Ordinal| pods.get(&k).is_some_and(|p| p.updated && p.available && !p.deleting);
    let available = |k: Ordinal| pods.get(&k).is_some_and(|p| p.available && !p.deleting);
    let old_left = pods.iter().any(|(k, p)| *k >= lo && !p.updated);
    let same = inp.previous.update_revision.as_deref() == Some(inp.revision.as_str());
    let stored = inp.previous.update_partition.map(|p| p.max(0) as Ordinal);
    let mut cursor = match (inp.on_delete, same, stored) {
        (true, ..) => lo,
        (false, true, Some(c)) => c,
        // A new revision (or none stored): nothing updates until the cursor comes down, unless
        // every pod already runs it (a new federation, or a rollback to what runs).
        _ if old_left => end,
        _ => lo,
    }
    .clamp(lo, end);
    let mut lowered = Vec::new();
    if !inp.on_delete && cursor > lo {
        // Pods not done at or above the cursor are (or are about to be) unavailable; pods below
        // it that are unavailable for any reason count too.
        let mut not_done_above = (cursor..end).filter(|k| !done(*k)).count();
        let mut unavailable_below = (start..cursor).filter(|k| !available(*k)).count();
        while cursor > lo {
            let k = cursor - 1;
            let (above, below) =
                (not_done_above + usize::from(!done(k)), unavailable_below - usize::from(!available(k)));
            if above + below > inp.max_unavailable as usize {
                break;
            }
            cursor = k;
            not_done_above = above;
            unavailable_below = below;
            lowered.push(k);
        }
    }
    let complete = (lo..end).all(done);
    let updated = pods.values().filter(|p| p.updated && !p.deleting).count() as u32;
    let live = pods.values().filter(|p| !p.deleting).count() as u32;
    let current_revision = if complete && lo == start {
        inp.revision.clone()
    } else if same || inp.previous.update_revision.is_none() {
        inp.previous.current_revision.clone().unwrap_or_else(|| inp.revision.clone())
    } else {
        // A new revision interrupts a rollout: the pods that are not at either run the
        // revision before.
        inp.previous.current_revision.clone().or(inp.previous.update_revision.clone()).unwrap_or_default()
    };
    let current = if current_revision == inp.revision { updated } else { live - updated };
    let waiting = (!complete && !inp.on_delete).then(|| waiting(inp, cursor, lo)).flatten();
    Rollout {
        update_revision: inp.revision.clone(),
        current_revision,
        cursor,
        updated,
        current,
        available: pods.values().filter(|p| p.available && !p.deleting).count() as u32,
        complete,
        waiting,
        lowered,
    }
}

/// The pod the rollout waits on: the highest ordinal at or above the cursor that is not yet
/// updated and available (the one being replaced); else, when the cursor cannot come down, the
/// lowest unavailable pod below it.
fn waiting(inp: &Input<'_>, cursor: Ordinal, lo: Ordinal) -> Option<Waiting> {
    let pods = inp.pods;
    let pod = |k: Ordinal| format!("{}-{k}", inp.name);
    let describe = |k: Ordinal| match pods.get(&k) {
        None => (format!("{} has no pod in a member that answers", pod(k)), false),
        Some(p) if p.deleting => (format!("{} in {} is being replaced", pod(k), p.cluster), false),
        Some(p) if !p.updated => (format!("{} in {} runs the old template", pod(k), p.cluster), false),
        Some(p) => match &p.trouble {
            Some(t) => (format!("{} in {} is not Ready: {t}", pod(k), p.cluster), stuck(t)),
            None if p.ready => (format!("{} in {} is Ready, not yet for minReadySeconds", pod(k), p.cluster), false),
            None => (format!("{} in {} is not Ready yet", pod(k), p.cluster), false),
        },
    };
    let done = |k: Ordinal| pods.get(&k).is_some_and(|p| p.updated && p.available && !p.deleting);
    if let Some(k) = (cursor..inp.range.end).rev().find(|k| !done(*k)) {
        let (message, stuck) = describe(k);
        return Some(Waiting { ordinal: k, message: format!("updating: {message}"), stuck });
    }
    if cursor > lo {
        let blocking = (inp.range.start..cursor).find(|k| pods.get(k).is_none_or(|p| !p.available || p.deleting))?;
        let (message, _) = describe(blocking);
        return Some(Waiting {
            ordinal: blocking,
            message: format!(
                "{} waits: at most {} pod(s) of the federation may be unavailable and {message}",
                pod(cursor - 1),
                inp.max_unavailable
            ),
            stuck: false,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cluster: &str, updated: bool, available: bool) -> PodState {
        PodState {
            cluster: cluster.into(),
            updated,
            available,
            ready: available,
            deleting: false,
            trouble: (!available).then(|| "container app: waiting: ContainerCreating".into()),
        }
    }

    /// Six pods over three members, two each (east 0-1, central 2-3, west 4-5).
    fn six(updated: &[Ordinal], unavailable: &[Ordinal]) -> BTreeMap<Ordinal, PodState> {
        (0..6)
            .map(|k| {
                let c = ["east", "central", "west"][k as usize / 2];
                (k, pod(c, updated.contains(&k), !unavailable.contains(&k)))
            })
            .collect()
    }

    fn status(rev: &str, cursor: Option<i32>) -> FederatedStatefulSetStatus {
        FederatedStatefulSetStatus {
            update_revision: Some(rev.into()),
            current_revision: Some("r0".into()),
            update_partition: cursor,
            ..Default::default()
        }
    }

    fn input<'a>(prev: &'a FederatedStatefulSetStatus, pods: &'a BTreeMap<Ordinal, PodState>) -> Input<'a> {
        Input {
            name: "db",
            revision: "r1".into(),
            previous: prev,
            range: 0..6,
            partition: 0,
            max_unavailable: 1,
            on_delete: false,
            pods,
        }
    }

    #[test]
    fn a_new_template_lets_exactly_the_highest_ordinal_update_first() {
        let prev = status("r0", Some(0));
        let pods = six(&[], &[]);
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 5, "only ordinal 5 may update");
        assert_eq!(r.lowered, vec![5]);
        assert_eq!(r.waiting.unwrap().ordinal, 5);
        assert_eq!(r.current_revision, "r0");
        assert_eq!((r.updated, r.current), (0, 6));
    }

    #[test]
    fn the_cursor_waits_for_the_updated_pod_to_be_available_then_goes_on() {
        let prev = status("r1", Some(5));
        // 5 was replaced and is not Ready yet.
        let pods = six(&[5], &[5]);
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 5);
        assert!(r.lowered.is_empty());
        let w = r.waiting.unwrap();
        assert_eq!(w.ordinal, 5);
        assert!(w.message.contains("db-5 in west"), "{}", w.message);
        // Available: the next one may go, only one.
        let pods = six(&[5], &[]);
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 4);
    }

    #[test]
    fn a_pod_unavailable_anywhere_holds_the_rollout_with_max_unavailable_one() {
        let prev = status("r1", Some(6));
        // Ordinal 0 in east is down for its own reasons: nothing else may go down.
        let pods = six(&[], &[0]);
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 6, "no pod may be replaced while another is unavailable");
        assert!(r.waiting.unwrap().message.contains("db-0 in east"));
    }

    #[test]
    fn max_unavailable_two_replaces_two_at_once_never_three() {
        let prev = status("r1", Some(6));
        let pods = six(&[], &[]);
        let mut inp = input(&prev, &pods);
        inp.max_unavailable = 2;
        assert_eq!(roll(&inp).cursor, 4);
    }

    #[test]
    fn the_partition_is_global_a_canary_of_one_ordinal_updates_exactly_it() {
        let prev = status("r1", Some(6));
        let pods = six(&[], &[]);
        let mut inp = input(&prev, &pods);
        inp.partition = 5;
        let r = roll(&inp);
        assert_eq!(r.cursor, 5);
        // Once 5 is updated and available, the rollout is complete for partition 5.
        let pods = six(&[5], &[]);
        let prev = status("r1", Some(5));
        let mut inp = input(&prev, &pods);
        inp.partition = 5;
        let r = roll(&inp);
        assert_eq!(r.cursor, 5, "never below the partition");
        assert!(r.complete);
        assert_eq!(r.current_revision, "r0", "partitioned: the other pods keep the current revision");
    }

    #[test]
    fn the_cursor_never_rises_within_a_revision_but_resets_for_a_new_one() {
        // Ordinal 4 done, then crashes: the cursor stays (raising it would recreate 4 old).
        let prev = status("r1", Some(4));
        let pods = six(&[4, 5], &[4]);
        assert_eq!(roll(&input(&prev, &pods)).cursor, 4);
        // A newer template: back to the top (no pod runs it yet).
        let pods = six(&[], &[4]);
        let mut inp = input(&prev, &pods);
        inp.revision = "r2".into();
        let r = roll(&inp);
        assert_eq!(r.cursor, 6);
        assert_eq!(r.current_revision, "r0", "the revision before the interrupted rollout");
    }

    #[test]
    fn a_completed_rollout_makes_the_update_revision_current() {
        let prev = status("r1", Some(0));
        let pods = six(&[0, 1, 2, 3, 4, 5], &[]);
        let r = roll(&input(&prev, &pods));
        assert!(r.complete);
        assert_eq!(r.current_revision, "r1");
        assert_eq!((r.updated, r.current, r.available), (6, 6, 6));
        assert!(r.waiting.is_none());
    }

    #[test]
    fn a_new_federation_or_a_rollback_to_what_runs_does_not_hold_anything() {
        let prev = FederatedStatefulSetStatus::default();
        let pods = BTreeMap::new();
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 0);
        let pods = six(&[0, 1, 2, 3, 4, 5], &[]);
        let prev = status("r9", Some(3));
        let r = roll(&input(&prev, &pods));
        assert_eq!(r.cursor, 0, "every pod runs r1 already");
    }

    #[test]
    fn on_delete_rolls_nothing() {
        let prev = status("r1", None);
        let pods = six(&[], &[]);
        let mut inp = input(&prev, &pods);
        inp.on_delete = true;
        let r = roll(&inp);
        assert_eq!(r.cursor, 0);
        assert!(r.lowered.is_empty());
        assert!(r.waiting.is_none());
    }

    #[test]
    fn a_stuck_updated_pod_is_named_with_its_member_and_state() {
        let prev = status("r1", Some(5));
        let mut pods = six(&[5], &[]);
        let p = pods.get_mut(&5).unwrap();
        p.available = false;
        p.ready = false;
        p.trouble = Some("container app: waiting: ImagePullBackOff: Back-off pulling image \"app:9\"".into());
        let w = roll(&input(&prev, &pods)).waiting.unwrap();
        assert!(w.stuck);
        assert!(
            w.message.contains("db-5 in west is not Ready: container app: waiting: ImagePullBackOff"),
            "{}",
            w.message
        );
    }

    #[test]
    fn percentages_round_up_and_never_below_one() {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        assert_eq!(resolve_max_unavailable(None, 10), 1);
        assert_eq!(resolve_max_unavailable(Some(&IntOrString::String("25%".into())), 10), 3);
        assert_eq!(resolve_max_unavailable(Some(&IntOrString::String("0%".into())), 10), 1);
        assert_eq!(resolve_max_unavailable(Some(&IntOrString::Int(0)), 10), 1);
        assert_eq!(resolve_max_unavailable(Some(&IntOrString::Int(3)), 10), 3);
    }
}
