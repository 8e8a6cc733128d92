//! The loops of `spanset guard`: `wait` (the pod's first init container) puts the containers'
//! first process in place, then polls the Lease until its guard lets the pod run and posts that
//! in the state file; `watch` (a native sidecar) takes the guard over from the file, keeps
//! polling, and posts after every poll what its guard concludes — the deadline, a stop, a
//! release — for every container's first process to act on ([`spanset_controller::pod_lease::exec`]);
//! `ready` is the watch's probe. The watch signals nothing: it could not, in general (the
//! containers are in PID namespaces of their own and may run as other users), and the
//! containers must stop by the deadline even when it is not running.
//!
//! Both loops poll every P of [`Timing`], each poll's send instant on the node's clock
//! ([`boot`]), and log one line per change of what they are waiting for or doing. A guard that
//! cannot read its Lease fails closed, out loud: `wait` ends with the reason in its
//! termination message (the pod's status shows it, and the kubelet retries after its back-off),
//! the watch's probes fail with it (the kubelet records them as the pod's Events).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use spanset_controller::{
    decisions::safety::Rules,
    pod_lease::{
        Timing,
        exec::Phase,
        guard::{Action, Guard, Poll},
        render_ordinals,
    },
};
use spanset_plan::Ordinal;

use super::{
    boot,
    lease::{LeaseRef, Reading, poll},
    state::{GuardState, nanos},
};

/// The file name of the containers' first process, beside `spanset` in its image and in the
/// directory `wait` copies it to.
pub const EXEC_BINARY: &str = spanset_guard_exec::PROGRAM;

/// What a guard guards, and how.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The member's pod Lease.
    pub lease: LeaseRef,
    /// The uid of the federation the Lease is written for: a Lease written for another one
    /// (the federation deleted and made again) names nothing for this pod.
    pub federation_uid: Option<String>,
    /// The pod's ordinal.
    pub ordinal: Ordinal,
    /// The spans agreed with spanset.
    pub timing: Timing,
    /// The state file, in an `emptyDir` every container mounts.
    pub state: PathBuf,
    /// Where `wait` puts the containers' first process (an `emptyDir` they mount), if anywhere.
    pub exec_dir: Option<PathBuf>,
    /// Where `wait` writes why it failed, for the pod's status (`terminationMessagePath`).
    pub termination_log: PathBuf,
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
        let s = &self.settings;
        let sent = boot::now();
        (sent, poll(&self.api, &s.lease.name, s.federation_uid.as_deref(), s.timing.poll).await)
    }

    /// Sleeps until P after `started`.
    async fn pace(&self, started: Duration) {
        let due = started + self.settings.timing.poll;
        tokio::time::sleep(due.saturating_sub(boot::now())).await;
    }
}

fn feed(guard: &mut Guard, sent: Duration, read: &Result<Reading, String>) {
    let poll = match read {
        Ok(r) => Poll::Read { extension: r.extension, ordinals: &r.ordinals, released: r.released },
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
    let config = kube::Config::incluster().map_err(|e| {
        format!("no in-cluster API access ({e}): the pod needs its ServiceAccount token (automountServiceAccountToken)")
    })?;
    let client = kube::Client::try_from(config).map_err(|e| format!("in-cluster client: {e}"))?;
    Ok(Poller { api: Api::namespaced(client, &settings.lease.namespace), settings })
}

/// The state a guard posts: its phase, the deadline and SIGTERM instant of a valid lease, and
/// the latest poll.
fn state_of(
    s: &Settings,
    boot_id: &str,
    epoch: u64,
    guard: &Guard,
    phase: Phase,
    last_error: Option<String>,
) -> GuardState {
    let valid = phase == Phase::Valid;
    let deadline = guard.deadline().filter(|_| valid);
    GuardState {
        boot_id: boot_id.to_string(),
        lease: s.lease.to_string(),
        ordinal: s.ordinal,
        epoch,
        phase,
        valid_from_nanos: guard.valid_from().map(nanos),
        last_sent_nanos: guard.last_poll().map(|(sent, _)| nanos(sent)),
        extension: guard.last_poll().map(|(_, e)| e),
        deadline_nanos: deadline.map(nanos),
        term_nanos: deadline.map(|d| nanos(d.saturating_sub(s.timing.stop_budget))),
        last_error,
    }
}

/// The containers' first process put where they run it, executable by every user of the pod:
/// copied from beside this binary (a temporary file renamed over the old one).
fn install_exec(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let source = exe.with_file_name(EXEC_BINARY);
    let target = dir.join(EXEC_BINARY);
    let tmp = dir.join(format!(".{EXEC_BINARY}.tmp"));
    let at = |what: &str, e: std::io::Error| format!("cannot {what} {EXEC_BINARY}: {e}");
    std::fs::copy(&source, &tmp).map_err(|e| {
        at(&format!("copy {} to {} (is it built beside spanset?):", source.display(), dir.display()), e)
    })?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(|e| at("make executable", e))?;
    std::fs::rename(&tmp, &target).map_err(|e| at("install", e))
}

/// `spanset guard wait`: puts the containers' first process in place, polls until the Lease,
/// extended naming the ordinal (or released), lets the pod run, and posts that in the state
/// file; answers 0. It fails (1, the reason in its termination message) when it cannot do its
/// part, or when the Lease stays unreadable for a whole lease: the kubelet runs it again after
/// its back-off, and meanwhile the pod's status says why it does not start.
pub async fn wait(settings: Settings) -> i32 {
    let log = settings.termination_log.clone();
    let boot_id = match boot::boot_id() {
        Ok(id) => id,
        Err(e) => return fail(&log, &e),
    };
    if let Some(dir) = &settings.exec_dir
        && let Err(e) = install_exec(dir)
    {
        return fail(&log, &e);
    }
    let p = match poller(settings).await {
        Ok(p) => p,
        Err(e) => return fail(&log, &e),
    };
    let s = &p.settings;
    let fresh = || Guard::new(s.ordinal, s.timing, Rules::ALL);
    let mut guard = fresh();
    let mut said = String::new();
    // The previous run's epoch, if this pod ran before (the kubelet runs init containers again
    // when it makes the pod's sandbox anew): a container it started then must not go on.
    let epoch = GuardState::read(&s.state, &boot_id, &s.lease.to_string(), s.ordinal).map_or(0, |old| old.epoch + 1);
    let mut failing_since: Option<Duration> = None;
    tracing::info!(lease = %s.lease, ordinal = s.ordinal, "waiting for an extension of the lease naming the ordinal");
    let phase = loop {
        let started = boot::now();
        let (sent, read) = p.poll().await;
        feed(&mut guard, sent, &read);
        match &read {
            Err(e) => {
                let since = *failing_since.get_or_insert(sent);
                if boot::now().saturating_sub(since) >= s.timing.lease {
                    let why = format!(
                        "lease {} unreadable for {} s: {e}: the pod may not run",
                        s.lease,
                        s.timing.lease.as_secs()
                    );
                    return fail(&log, &why);
                }
            }
            Ok(_) => failing_since = None,
        }
        match guard.action(boot::now()) {
            Action::Run => break Phase::Valid,
            Action::Released => break Phase::Released,
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
    };
    let state = state_of(s, &boot_id, epoch, &guard, phase, None);
    if let Err(e) = state.write(&s.state) {
        return fail(&log, &e);
    }
    match phase {
        Phase::Released => {
            tracing::warn!("the lease is released (spanset let the federation go): the pod runs unguarded")
        }
        _ => {
            let left = guard.deadline().unwrap_or_default().saturating_sub(boot::now());
            tracing::info!(extension = ?guard.last_poll().map(|p| p.1), left_ms = left.as_millis() as u64,
                "lease extended naming the ordinal: the pod may run");
        }
    }
    0
}

/// `spanset guard watch`: takes the guard over from the state file and keeps polling, posting
/// after every poll what the guard concludes. Without a usable file it posts that nothing may
/// run (a new epoch, waiting) and starts over with a fresh guard. Runs until the pod ends.
pub async fn watch(settings: Settings) -> i32 {
    let s = settings.clone();
    let lease = s.lease.to_string();
    let boot_id = match boot::boot_id() {
        Ok(id) => id,
        Err(e) => {
            // Without the boot id no instant can be posted: the containers' first processes keep
            // the deadline they read last, and stop by it.
            tracing::error!("{e}: the pod stops at its deadline");
            return hold().await;
        }
    };
    let fresh = || Guard::new(s.ordinal, s.timing, Rules::ALL);
    let (mut guard, mut epoch, mut phase) = match GuardState::read(&s.state, &boot_id, &lease, s.ordinal) {
        Ok(st) => match (st.phase, st.valid_from(), st.last_poll()) {
            (Phase::Valid, Some(from), Some((sent, extension))) => {
                (Guard::resume(s.ordinal, s.timing, Rules::ALL, from, sent, extension), st.epoch, Phase::Valid)
            }
            (Phase::Released, ..) => (released_guard(&s), st.epoch, Phase::Released),
            (p, ..) => (fresh(), st.epoch, p),
        },
        Err(e) => {
            // Whatever a container started under, it may not go on: a new epoch that none of
            // them saw (the boot clock's reading is none of the small counts before it), waiting.
            tracing::error!("{e}: nothing proves the pod may run; it stops, and waits for a fresh extension");
            (fresh(), nanos(boot::now()), Phase::Waiting)
        }
    };
    let post = |guard: &Guard, epoch: u64, phase: Phase, error: Option<String>| {
        if let Err(e) = state_of(&s, &boot_id, epoch, guard, phase, error).write(&s.state) {
            tracing::warn!("{e}");
        }
    };
    post(&guard, epoch, phase, None);
    let p = match poller(settings).await {
        Ok(p) => p,
        Err(e) => {
            // The deadline stands: the pod runs until it. The probes say why.
            tracing::error!("{e}: the pod stops at its deadline");
            post(&guard, epoch, phase, Some(e));
            return hold().await;
        }
    };
    let left = guard.deadline().unwrap_or_default().saturating_sub(boot::now());
    tracing::info!(lease = %lease, ordinal = s.ordinal, left_ms = left.as_millis() as u64, "watching the lease");
    let mut said = String::new();
    let mut failing_since: Option<Duration> = None;
    loop {
        let started = boot::now();
        let (sent, read) = p.poll().await;
        feed(&mut guard, sent, &read);
        let error = read.as_ref().err().cloned();
        if let Some(e) = &error {
            say(&mut said, format!("lease unreadable: {e}"));
            // A whole lease without a read: the pod has stopped by now (its containers keep the
            // deadline); the watch ends, so that its status says why in its own words.
            let since = *failing_since.get_or_insert(sent);
            if boot::now().saturating_sub(since) >= s.timing.lease {
                post(&guard, epoch, phase, error.clone());
                let why = format!("lease {lease} unreadable for {} s: {e}", s.timing.lease.as_secs());
                return fail(&s.termination_log, &why);
            }
        } else {
            failing_since = None;
        }
        match guard.action(boot::now()) {
            Action::Run | Action::Term => {
                if phase != Phase::Valid {
                    tracing::info!(epoch, "lease extended naming the ordinal: the pod may run");
                }
                phase = Phase::Valid;
            }
            Action::Released => {
                if phase != Phase::Released {
                    tracing::warn!("the lease is released (spanset let the federation go): the pod runs unguarded");
                }
                phase = Phase::Released;
            }
            Action::Kill | Action::Stopped => {
                let why = if guard.valid_from().is_some() && !matches!(&read, Ok(r) if !r.ordinals.contains(s.ordinal))
                {
                    "the lease's deadline came with no extension"
                } else {
                    "the lease no longer names the ordinal"
                };
                tracing::warn!(epoch = epoch + 1, "{why}: the pod's containers stop");
                epoch += 1;
                phase = Phase::Stopped;
                guard = fresh();
                feed(&mut guard, sent, &read);
            }
            Action::Wait => {
                if phase == Phase::Valid {
                    // Never from a valid guard; kept safe should it happen.
                    epoch += 1;
                    phase = Phase::Stopped;
                }
                say(&mut said, why_waiting(s.ordinal, &read, &guard));
            }
        }
        post(&guard, epoch, phase, error);
        p.pace(started).await;
    }
}

/// A guard that stays released (resumed from a state that says so).
fn released_guard(s: &Settings) -> Guard {
    let mut g = Guard::new(s.ordinal, s.timing, Rules::ALL);
    let named = spanset_plan::Ordinals::from_iter([s.ordinal]);
    g.polled(Duration::ZERO, Poll::Read { extension: 0, ordinals: &named, released: true });
    g
}

/// Waits for the pod's end, doing nothing.
async fn hold() -> i32 {
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

/// Logs `why` if it is news.
fn say(said: &mut String, why: String) {
    if *said != why {
        tracing::info!("{why}");
        *said = why;
    }
}

/// Logs `why`, writes it as the container's termination message, and answers 1.
fn fail(termination_log: &Path, why: &str) -> i32 {
    tracing::error!("{why}");
    if let Err(e) = std::fs::write(termination_log, why) {
        tracing::debug!("termination message {}: {e}", termination_log.display());
    }
    1
}
