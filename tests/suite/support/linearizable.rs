//! A client's history of reads and writes on a key-value store, and its judge: whether it is
//! linearizable (stateright's `LinearizabilityTester` over one `Register` per key, which is
//! enough, as linearizability is local: a history is linearizable iff each object's is).

use std::{collections::BTreeMap, time::Instant};

use stateright::semantics::{
    ConsistencyTester, LinearizabilityTester,
    register::{Register, RegisterOp, RegisterRet},
};

/// What one operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Wrote this value.
    Write(u64),
    /// Read this value (0: the key did not exist, as no write writes 0).
    Read(u64),
}

/// One operation of a client's history.
#[derive(Debug, Clone)]
pub struct Op {
    /// The client's logical thread: its operations never overlap, and a thread whose write had
    /// no known outcome issues nothing more (the client continues as a new thread).
    pub thread: u64,
    /// The key.
    pub key: String,
    /// What it did.
    pub kind: Kind,
    /// When it was sent.
    pub invoked: Instant,
    /// When its success came back; `None` for a write whose outcome is unknown (it may take
    /// effect at any instant after it was sent, or never).
    pub completed: Option<Instant>,
}

/// Whether the history is linearizable; an error names the first key whose history is not,
/// with its operations.
pub fn check(ops: &[Op]) -> Result<(), String> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    for (key, ops) in by_key {
        let owned: Vec<Op> = ops.into_iter().cloned().collect();
        // The tester searches recursively, one frame per operation: a thread with room for it.
        let verdict = std::thread::Builder::new()
            .stack_size(1 << 30)
            .spawn(move || check_key(&owned))
            .map_err(|e| format!("cannot start the checker: {e}"))?
            .join()
            .map_err(|_| format!("the checker of key {key} panicked"))?;
        verdict.map_err(|why| format!("key {key}: {why}"))?;
    }
    Ok(())
}

/// One key's history, as a register that starts at 0.
fn check_key(ops: &[Op]) -> Result<(), String> {
    // Every invocation and return in real-time order; at the same instant an invocation goes
    // first (the two operations are then concurrent, the weaker claim).
    let mut events: Vec<(Instant, u8, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        events.push((op.invoked, 0, i));
        if let Some(done) = op.completed {
            events.push((done, 1, i));
        }
    }
    events.sort();
    let mut tester = LinearizabilityTester::new(Register(0u64));
    for (_, what, i) in events {
        let op = &ops[i];
        let recorded = if what == 0 {
            let call = match op.kind {
                Kind::Write(v) => RegisterOp::Write(v),
                Kind::Read(_) => RegisterOp::Read,
            };
            tester.on_invoke(op.thread, call).map(|_| ())
        } else {
            let ret = match op.kind {
                Kind::Write(_) => RegisterRet::WriteOk,
                Kind::Read(v) => RegisterRet::ReadOk(v),
            };
            tester.on_return(op.thread, ret).map(|_| ())
        };
        recorded.map_err(|e| format!("an ill-formed history: {e}"))?;
    }
    match tester.serialized_history() {
        Some(_) => Ok(()),
        None => Err(format!("not linearizable: {ops:#?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    fn op(thread: u64, kind: Kind, (from, to): (u64, Option<u64>), base: Instant) -> Op {
        Op { thread, key: "k".into(), kind, invoked: at(base, from), completed: to.map(|t| at(base, t)) }
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_refused() {
        let base = Instant::now();
        // Thread 1 writes 7 and is told so; later thread 2 reads the value before it.
        let stale = [op(1, Kind::Write(7), (0, Some(10)), base), op(2, Kind::Read(0), (20, Some(30)), base)];
        let why = check(&stale).expect_err("a stale read is not linearizable");
        assert!(why.contains("key k: not linearizable"), "{why}");
        // The same read overlapping the write may see either value.
        let overlapping = [op(1, Kind::Write(7), (0, Some(10)), base), op(2, Kind::Read(0), (5, Some(30)), base)];
        assert_eq!(check(&overlapping), Ok(()));
        // A value read back after a newer one was read is refused too.
        let back_in_time = [
            op(1, Kind::Write(7), (0, Some(10)), base),
            op(1, Kind::Write(8), (11, Some(20)), base),
            op(2, Kind::Read(8), (21, Some(22)), base),
            op(3, Kind::Read(7), (23, Some(24)), base),
        ];
        assert!(check(&back_in_time).is_err());
    }

    #[test]
    fn a_write_with_an_unknown_outcome_may_or_may_not_have_happened() {
        let base = Instant::now();
        let unknown =
            |read: u64| [op(1, Kind::Write(7), (0, None), base), op(2, Kind::Read(read), (20, Some(30)), base)];
        assert_eq!(check(&unknown(7)), Ok(()), "it happened");
        assert_eq!(check(&unknown(0)), Ok(()), "it did not");
        assert!(check(&unknown(9)).is_err(), "nobody wrote 9");
    }
}
