//! The two loops of `spanset guard`: `wait` (the pod's first init container) polls the Lease
//! until its guard lets the pod run, then hands the guard over in a file; `watch` (a native
//! sidecar) takes it over and keeps polling, and stops the pod when its guard says so. Both
//! poll every P of [`Timing`], each poll's send instant on the node's clock ([`boot`]), and log
//! one line per change of what they are waiting for or doing.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use rustix::process::Signal;

use super::{
    boot,
    handoff::Handoff,
    lease::{LeaseRef, Reading, poll},
    pod,
};
use crate::{
    controller::{
        pod_lease::{
            Timing,
            guard::{Action, Guard, Poll},
            render_ordinals,
        },
        safety::Rules,
    },
    plan::Ordinal,
};

/// What a guard guards, and how.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The member's pod Lease.
    pub lease: LeaseRef,
    /// The pod's ordinal.
    pub ordinal: Ordinal,
    /// The spans agreed with spanset.
    pub timing: Timing,
    /// The hand-over file, in an `emptyDir` both containers mount.
    pub state: PathBuf,
}

/// Polls the Lease through `api` for one guard.
struct Poller {
    api: Api<Lease>,
    settings: Settings,
}

impl Poller {
    /// One poll: its send instant and what it read (or why it read nothing). It waits at most P
    /// for the answer, so that the guard acts at least every P.
    async fn poll(&self) -> (Duration, Result<Reading, String>) {
        let sent = boot::now();
        (sent, poll(&self.api, &self.settings.lease.name, self.settings.timing.poll).await)
    }

    /// Sleeps until P after `started`.
    async fn pace(&self, started: Duration) {
        let due = started + self.settings.timing.poll;
        tokio::time::sleep(due.saturating_sub(boot::now())).await;
    }
}

fn feed(guard: &mut Guard, sent: Duration, read: &Result<Reading, String>) {
    let poll = match read {
        Ok(r) => Poll::Read { extension: r.extension, ordinals: &r.ordinals },
        Err(_) => Poll::Failed,
    };
    guard.polled(sent, poll);
}

/// Why a waiting guard waits, for its log.
fn why_waiting(ordinal: Ordinal, read: &Result<Reading, String>, guard: &Guard) -> String {
    match read {
        Err(e) => format!("lease unreadable: {e}"),
        Ok(r) if !r.ordinals.contains(ordinal) => {
            let named = render_ordinals(&r.ordinals);
            let named = if named.is_empty() { "no ordinals".to_string() } else { format!("ordinals {named}") };
            format!("lease names {named}, not {ordinal}")
        }
        Ok(_) if guard.valid_from().is_some() => "the latest extension is too old to start on".into(),
        Ok(_) => "no extension seen yet".into(),
    }
}

/// An in-cluster client reading the Lease's namespace, or why there is none.
async fn poller(settings: Settings) -> Result<Poller, String> {
    // In-cluster only: a kubeconfig found on the node (the container's root may show the
    // machine's) must not decide which API server the guard believes.
    let config = kube::Config::incluster().map_err(|e| format!("in-cluster config: {e}"))?;
    let client = kube::Client::try_from(config).map_err(|e| format!("in-cluster client: {e}"))?;
    Ok(Poller { api: Api::namespaced(client, &settings.lease.namespace), settings })
}

/// `spanset guard wait`: polls until the Lease, extended naming the ordinal, lets the pod run;
/// writes the hand-over file and answers 0 (1 if the file cannot be written, or if its `watch`
/// could not stop the pod: [`pod::cannot_stop`]).
pub async fn wait(settings: Settings) -> i32 {
    if let Some(why) = pod::cannot_stop() {
        return fail(&format!("{why}: the pod may not run"));
    }
    let boot_id = match boot::boot_id() {
        Ok(id) => id,
        Err(e) => return fail(&e),
    };
    let p = match poller(settings).await {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let s = &p.settings;
    let fresh = || Guard::new(s.ordinal, s.timing, Rules::ALL);
    let mut guard = fresh();
    let mut said = String::new();
    tracing::info!(lease = %s.lease, ordinal = s.ordinal, "waiting for an extension of the lease naming the ordinal");
    loop {
        let started = boot::now();
        let (sent, read) = p.poll().await;
        feed(&mut guard, sent, &read);
        match guard.action(boot::now()) {
            Action::Run => break,
            // Let run once and taken away, or valid too briefly to start: start over, waiting
            // for a fresh extension.
            Action::Term | Action::Kill | Action::Stopped => {
                let why = why_waiting(s.ordinal, &read, &guard);
                say(&mut said, why);
                guard = fresh();
                feed(&mut guard, sent, &read);
            }
            Action::Wait => say(&mut said, why_waiting(s.ordinal, &read, &guard)),
        }
        p.pace(started).await;
    }
    let (Some(valid_from), Some((last_sent, extension))) = (guard.valid_from(), guard.last_poll()) else {
        return fail("the guard let the pod run without a poll");
    };
    let h = Handoff::new(boot_id, s.lease.to_string(), s.ordinal, valid_from, last_sent, extension);
    if let Err(e) = h.write(&s.state) {
        return fail(&e);
    }
    let left = guard.deadline().unwrap_or_default().saturating_sub(boot::now());
    tracing::info!(extension, left_ms = left.as_millis() as u64, "lease extended naming the ordinal: the pod may run");
    0
}

/// `spanset guard watch`: takes the guard over from the hand-over file and keeps polling;
/// stops the pod when the guard says so. Without a usable file it stops the pod at once. Runs
/// until the pod's sandbox ends (with it).
pub async fn watch(settings: Settings) -> i32 {
    let s = settings.clone();
    let resumed =
        boot::boot_id().and_then(|id| Handoff::read(&s.state, &id, &s.lease.to_string(), s.ordinal).map(|h| (id, h)));
    let (boot_id, h) = match resumed {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("{e}: nothing proves the pod may run; stopping it");
            return stop_for_ever().await;
        }
    };
    let mut guard = Guard::resume(s.ordinal, s.timing, Rules::ALL, h.valid_from(), h.last_sent(), h.extension);
    let p = match poller(settings).await {
        Ok(p) => Some(p),
        Err(e) => {
            // The deadline stands: the pod runs until it, unless the client can be made.
            tracing::error!("{e}: the pod stops at its deadline");
            None
        }
    };
    let deadline = guard.deadline().unwrap_or_default();
    tracing::info!(lease = %s.lease, ordinal = s.ordinal, left_ms = deadline.saturating_sub(boot::now()).as_millis() as u64, "watching the lease");
    let mut said = String::new();
    let mut termed = BTreeSet::new();
    loop {
        let started = boot::now();
        act(&mut guard, &mut termed, &mut said);
        let valid_from = guard.valid_from();
        if let Some(p) = &p {
            let (sent, read) = p.poll().await;
            feed(&mut guard, sent, &read);
            if let Err(e) = &read {
                say(&mut said, format!("lease unreadable: {e}"));
            }
        }
        act(&mut guard, &mut termed, &mut said);
        if guard.valid_from() != valid_from
            && let (Some(from), Some((sent, extension))) = (guard.valid_from(), guard.last_poll())
        {
            // A restarted sidecar goes on from here.
            let h = Handoff::new(boot_id.clone(), s.lease.to_string(), s.ordinal, from, sent, extension);
            if let Err(e) = h.write(&s.state) {
                tracing::warn!("{e}");
            }
        }
        match &p {
            Some(p) => p.pace(started).await,
            None => tokio::time::sleep(s.timing.poll).await,
        }
    }
}

/// Does what the guard says now.
fn act(guard: &mut Guard, termed: &mut BTreeSet<i32>, said: &mut String) {
    let now = boot::now();
    match guard.action(now) {
        Action::Run => {
            if !termed.is_empty() {
                // A fresh extension came in time: what was asked to stop may have stopped, and
                // what runs may run on.
                termed.clear();
            }
            say(said, "the pod may run".into());
        }
        Action::Term => {
            let fresh: Vec<i32> = pod::others().into_iter().filter(|pid| !termed.contains(pid)).collect();
            if !fresh.is_empty() && pod::unsafe_to_signal().is_none() {
                let n = pod::signal(&fresh, Signal::TERM);
                tracing::warn!(processes = n, "no extension in time: the lease's deadline is near; SIGTERM");
                termed.extend(fresh);
            }
            say(said, "stopping the pod before the lease's deadline".into());
        }
        Action::Kill | Action::Wait => {
            let why =
                if guard.valid_from().is_none() { "no valid lease" } else { "the lease's deadline or its ordinals" };
            tracing::warn!("{why}: killing the pod's processes and ending its sandbox");
            kill_all();
            guard.stop();
            say(said, "stopped; the pod's sandbox ends".into());
        }
        Action::Stopped => kill_all(),
    }
}

/// SIGKILLs the pod's other processes, then SIGTERMs its sandbox (PID 1).
fn kill_all() {
    if let Some(why) = pod::unsafe_to_signal() {
        tracing::error!("cannot stop the pod: {why}");
        return;
    }
    pod::signal(&pod::others(), Signal::KILL);
    pod::end_sandbox();
}

/// Stops the pod and keeps it stopped (until the sandbox's end ends this process too).
async fn stop_for_ever() -> i32 {
    loop {
        kill_all();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Logs `why` if it is news.
fn say(said: &mut String, why: String) {
    if *said != why {
        tracing::info!("{why}");
        *said = why;
    }
}

fn fail(why: &str) -> i32 {
    tracing::error!("{why}");
    1
}
