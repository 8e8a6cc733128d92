//! The member's own guards read back, every [`GUARDS_READ_PERIOD`] while it serves them: one GET
//! of each policy and binding `spanset join` installs, all at once, apart from the probe (a slow
//! read-back never makes the member look unreachable). What is read and what it means are
//! [`crate::member::policies`]'; when it is due is
//! [`super::decide::health::read_back_due`]'s; this sends it and notes the result.

use std::{sync::Arc, time::Instant};

use actix::prelude::*;

use super::{ClusterWatcher, GUARDS_READ_PERIOD, PROBE_PERIOD, PROBE_TIMEOUT, decide::health::read_back_due};
use crate::member::policies::{Readback, read_back, shipped};

impl ClusterWatcher {
    /// Starts a read-back of the member's guards when one is due.
    pub(super) fn read_back_if_due(&mut self, ctx: &mut Context<Self>) {
        let since = self.read_back_at.map(|t| t.elapsed());
        let due = read_back_due(
            self.serves_policies,
            self.reading_back,
            since,
            self.read_back_failures,
            GUARDS_READ_PERIOD,
            PROBE_PERIOD,
        );
        if !due {
            return;
        }
        self.reading_back = true;
        self.read_back_at = Some(Instant::now());
        for _ in shipped() {
            self.metrics.api_request(&self.cluster, "get");
        }
        let client = self.client.clone();
        ctx.spawn(async move { tokio::time::timeout(PROBE_TIMEOUT, read_back(&client)).await }.into_actor(self).map(
            |res, act, ctx| {
                act.reading_back = false;
                let readback =
                    res.unwrap_or_else(|_| Readback::Failed(format!("no answer within {}s", PROBE_TIMEOUT.as_secs())));
                act.read_back_ended(readback, ctx);
            },
        ));
    }

    /// A read-back ended: its finding replaces the last one (a failed one too: what was not
    /// seen now is not claimed), said when it changes, and reported.
    fn read_back_ended(&mut self, readback: Readback, ctx: &mut Context<Self>) {
        self.read_back_failures =
            if matches!(readback, Readback::Failed(_)) { self.read_back_failures.saturating_add(1) } else { 0 };
        if self.installed.as_deref() == Some(&readback) {
            return;
        }
        let was_in_force = self.installed.as_deref().is_some_and(Readback::in_force);
        if readback.in_force() {
            tracing::info!(cluster = %self.cluster, "the member's admission policies read back as shipped");
        } else if was_in_force || self.installed.is_none() {
            tracing::warn!(
                cluster = %self.cluster, findings = %readback.findings(),
                "the member's admission policies are not all installed as spanset join installs them; \
                 spanset counts on none of them"
            );
        } else {
            tracing::info!(cluster = %self.cluster, findings = %readback.findings(), "the member's admission policies read back");
        }
        self.installed = Some(Arc::new(readback));
        self.report_status(ctx);
        self.touched_all_if_changed(ctx);
    }
}
