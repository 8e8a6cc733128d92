//! A member cluster's own machinery in the model: its API server (resourceVersion
//! preconditions, the term policy that refuses a write of a lower term than the object
//! carries), its StatefulSet controller, its kubelet and its node.

use super::state::{Effect, Member, Node, Pod, Sts};

/// Why a member refused a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 409: the object changed (or exists, for a create) since it was read.
    Conflict,
    /// The term policy: the write carries a lower term than the object.
    StaleTerm,
    /// 404.
    NotFound,
}

impl Member {
    /// A member that runs nothing of the federation yet.
    pub fn empty() -> Member {
        Member {
            sts: None,
            pods: Default::default(),
            rv: 1,
            next_uid: 1,
            api_up: true,
            node: Node::Up,
            fenced: false,
            shrunk_since_fence: false,
            claims: Default::default(),
            kubelet_stalled: false,
            paused_sync: None,
            admission: true,
        }
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn uid(&mut self) -> u32 {
        self.next_uid += 1;
        self.next_uid
    }

    /// The API server applies one request (never a Store: that goes to the host).
    pub fn apply(&mut self, effect: &Effect) -> Result<(), Refused> {
        match effect {
            Effect::Store { .. } => unreachable!("a status is stored in the host"),
            Effect::Write { start, replicas, partition, hash, expected_rv, term, .. } => {
                let (uid, generation) = match (&self.sts, expected_rv) {
                    (Some(_), None) => return Err(Refused::Conflict),
                    (None, Some(_)) => return Err(Refused::NotFound),
                    (Some(s), Some(rv)) if s.rv != *rv => return Err(Refused::Conflict),
                    (Some(s), Some(_)) if self.admission && s.term > *term => return Err(Refused::StaleTerm),
                    (Some(s), Some(_)) => {
                        let same = s.start == *start
                            && s.replicas == *replicas
                            && s.partition == *partition
                            && s.hash == *hash
                            && s.term == *term;
                        (s.uid, if same { s.generation } else { s.generation + 1 })
                    }
                    (None, None) => (self.uid(), 1),
                };
                let observed = self.sts.as_ref().filter(|s| s.uid == uid).map_or(0, |s| s.observed);
                let rv = self.bump();
                self.sts = Some(Sts {
                    uid,
                    rv,
                    generation,
                    observed,
                    start: *start,
                    replicas: *replicas,
                    term: *term,
                    hash: hash.clone(),
                    partition: *partition,
                });
                Ok(())
            }
            Effect::Release { ordinal, uid, rv, term, .. } => {
                let Some(pod) = self.pods.get(ordinal).filter(|p| p.uid == *uid) else { return Err(Refused::NotFound) };
                if pod.rv != *rv {
                    return Err(Refused::Conflict);
                }
                if self.admission && pod.term > *term {
                    return Err(Refused::StaleTerm);
                }
                let rv = self.bump();
                let pod = self.pods.get_mut(ordinal).expect("checked");
                pod.gated = false;
                pod.term = *term;
                pod.rv = rv;
                Ok(())
            }
            Effect::Handover { .. } => unreachable!("a handover is carried out by the model across two members"),
            Effect::Retire { ordinal, volume, .. } => {
                let Some(&there) = self.claims.get(ordinal) else { return Err(Refused::NotFound) };
                if volume.is_some_and(|v| v != there) {
                    // The uid precondition: another claim bears the name by now.
                    return Err(Refused::Conflict);
                }
                self.claims.remove(ordinal);
                self.bump();
                Ok(())
            }
            Effect::DeletePod { ordinal, uid, .. } => {
                if self.pods.get(ordinal).is_none_or(|p| p.uid != *uid) {
                    return Err(Refused::NotFound);
                }
                let rv = self.bump();
                let pod = self.pods.get_mut(ordinal).expect("checked");
                if !pod.deleting {
                    pod.deleting = true;
                    pod.rv = rv;
                }
                Ok(())
            }
        }
    }

    /// The StatefulSet controller's next round: observe the spec, create the missing pods of
    /// the slice (gated when the template gates them), delete the pods outside it. `None`
    /// when it has nothing to do.
    pub fn statefulset_round(&mut self, gated: bool, next_volume: &mut u32) -> Option<()> {
        if self.paused_sync.is_some() {
            return None;
        }
        let sts = self.sts.clone()?;
        self.sync(&sts, gated, next_volume)
    }

    /// The StatefulSet controller stops in the middle of a sync, after it read the StatefulSet
    /// (`None` when there is none, or it is stopped already).
    pub fn pause_sync(&mut self) -> Option<()> {
        if self.paused_sync.is_some() {
            return None;
        }
        self.paused_sync = Some(self.sts.clone()?);
        Some(())
    }

    /// The paused StatefulSet controller resumes and finishes its sync on the copy it read,
    /// however old: it creates and deletes pods for that copy's slice and reports that copy's
    /// generation as observed (never a lower one than the object shows). A copy of an
    /// incarnation since deleted is dropped.
    pub fn finish_sync(&mut self, gated: bool, next_volume: &mut u32) -> Option<()> {
        let copy = self.paused_sync.take()?;
        if self.sts.as_ref().is_some_and(|s| s.uid == copy.uid) {
            self.sync(&copy, gated, next_volume);
        }
        Some(())
    }

    /// One sync of the StatefulSet controller on `sts`, its copy of the object: observe that
    /// generation, create the missing pods of its slice, delete the pods outside it.
    fn sync(&mut self, sts: &Sts, gated: bool, next_volume: &mut u32) -> Option<()> {
        let mut changed = false;
        if self.sts.as_ref().is_some_and(|s| s.uid == sts.uid && s.observed < sts.generation) {
            let rv = self.bump();
            let s = self.sts.as_mut().expect("present");
            s.observed = sts.generation;
            s.rv = rv;
            changed = true;
        }
        for k in sts.start..sts.start + sts.replicas {
            if !self.pods.contains_key(&k) {
                // A new pod's claim comes from the volumeClaimTemplates when there is none.
                if let std::collections::btree_map::Entry::Vacant(e) = self.claims.entry(k) {
                    *next_volume += 1;
                    e.insert(*next_volume);
                    self.bump();
                }
                let uid = self.uid();
                let rv = self.bump();
                let pod = Pod {
                    uid,
                    rv,
                    gated,
                    phase_running: false,
                    ready: false,
                    deleting: false,
                    term: sts.term,
                    revision: sts.revision(),
                    running: false,
                    volume: None,
                };
                self.pods.insert(k, pod);
                changed = true;
            }
        }
        let outside: Vec<u32> =
            self.pods.iter().filter(|(k, p)| !sts.holds(**k) && !p.deleting).map(|(k, _)| *k).collect();
        for k in outside {
            let rv = self.bump();
            let p = self.pods.get_mut(&k).expect("listed");
            p.deleting = true;
            p.rv = rv;
            changed = true;
        }
        changed.then_some(())
    }

    /// The kubelet's next round, on a node that is up: start the released pods (on their
    /// claim's volume), stop and remove the deleted ones. Answers the ordinals started with
    /// their volumes; `None` when it has nothing to do.
    /// `allowed`: whether the pod's guard lets ordinal `k` start (always, without pod leases).
    pub fn kubelet_round(&mut self, allowed: impl Fn(u32) -> bool) -> Option<Vec<(u32, u32)>> {
        if self.node != Node::Up || self.kubelet_stalled {
            return None;
        }
        let mut changed = false;
        let mut started = Vec::new();
        let keys: Vec<u32> = self.pods.keys().copied().collect();
        for k in keys {
            let p = self.pods[&k].clone();
            if p.deleting {
                self.bump();
                self.pods.remove(&k);
                changed = true;
            } else if !(p.gated || p.running && p.phase_running && p.ready || !p.running && !allowed(k)) {
                let rv = self.bump();
                let volume = self.claims.get(&k).copied();
                let p = self.pods.get_mut(&k).expect("listed");
                if !p.running {
                    p.volume = volume;
                    started.extend(volume.map(|v| (k, v)));
                }
                p.running = true;
                p.phase_running = true;
                p.ready = true;
                p.rv = rv;
                changed = true;
            }
        }
        changed.then_some(started)
    }

    /// The node is lost: it powered off (its containers stop now) or lost its network (they
    /// keep running).
    pub fn lose_node(&mut self, power_off: bool) {
        self.node = if power_off { Node::PoweredOff } else { Node::NetLost };
        if power_off {
            for p in self.pods.values_mut() {
                p.running = false;
            }
        }
    }

    /// The node controller evicts the pods of a lost node: they go Terminating and not Ready,
    /// and stay until the node returns (nobody force-deletes them).
    pub fn evict(&mut self) -> Option<()> {
        if self.node == Node::Up || self.pods.values().all(|p| p.deleting) {
            return None;
        }
        let keys: Vec<u32> = self.pods.keys().copied().collect();
        for k in keys {
            let rv = self.bump();
            let p = self.pods.get_mut(&k).expect("listed");
            p.deleting = true;
            p.ready = false;
            p.rv = rv;
        }
        Some(())
    }

    /// The node returns: a powered-off machine restarts the containers of the pods still bound
    /// to it and not being deleted; the kubelet then stops the deleted ones (its next round).
    pub fn return_node(&mut self) {
        if self.node == Node::PoweredOff {
            for p in self.pods.values_mut().filter(|p| !p.deleting && p.phase_running) {
                p.running = true;
            }
        }
        self.node = Node::Up;
    }
}
