//! Placeholder of the leadership handle (replaced by the Lease elector on merge).

use std::sync::Arc;

use parking_lot::Mutex;

/// Shared view of whether this process leads, and in which term.
#[derive(Clone)]
pub struct Leadership {
    tx: Arc<tokio::sync::watch::Sender<Option<u64>>>,
    term: Arc<Mutex<Option<u64>>>,
}

impl Default for Leadership {
    fn default() -> Self {
        Self::new()
    }
}

impl Leadership {
    /// Not leading.
    pub fn new() -> Self {
        Self { tx: Arc::new(tokio::sync::watch::channel(None).0), term: Arc::new(Mutex::new(None)) }
    }
    /// Always leading in `term`.
    pub fn fixed(term: u64) -> Self {
        let l = Self::new();
        *l.term.lock() = Some(term);
        l.tx.send_replace(Some(term));
        l
    }
    /// The term while leading.
    pub fn term(&self) -> Option<u64> {
        *self.term.lock()
    }
    /// Leadership changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<u64>> {
        self.tx.subscribe()
    }
    /// Stop leading now.
    pub fn step_down(&self, reason: &str) {
        tracing::warn!(reason, "stepping down");
        *self.term.lock() = None;
        self.tx.send_replace(None);
    }
}
