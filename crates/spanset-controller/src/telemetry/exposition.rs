//! The registry `/metrics` renders, one collector at a time: gathering every family at once
//! (as [`prometheus::Registry::gather`] does) held a copy of every series until the text was
//! written — some 30 MiB at a thousand federations, at every scrape. Rendered one family after
//! another, a scrape holds the copies of one family at most.

use parking_lot::Mutex;
use prometheus::{Encoder, Registry, TextEncoder, core::Collector, proto::MetricFamily};

/// Every collector, in registration order, beside a [`Registry`] that checks their names and
/// labels once, when they are registered.
#[derive(Default)]
pub struct Exposition {
    registry: Registry,
    collectors: Mutex<Vec<Box<dyn Collector>>>,
    /// The length of the last rendering: the next one starts with room for it.
    last_len: std::sync::atomic::AtomicUsize,
}

impl Exposition {
    /// Registers `c`; panics if its names or labels clash with a registered collector's (a
    /// programming error, caught by any test that builds the metrics).
    pub fn register<C: Collector + Clone + 'static>(&self, c: &C) {
        self.registry.register(Box::new(c.clone())).expect("registered once");
        self.collectors.lock().push(Box::new(c.clone()));
    }

    /// The text exposition of every series: families in registration order, series within a
    /// family sorted by their label values (as `gather` sorts them).
    pub fn render(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let mut buf = Vec::with_capacity(self.last_len.load(Relaxed) + 4096);
        let encoder = TextEncoder::new();
        for c in self.collectors.lock().iter() {
            let mut families = c.collect();
            families.retain(|f| !f.get_metric().is_empty());
            families.iter_mut().for_each(sort_series);
            encoder.encode(&families, &mut buf).expect("text encoding never fails");
        }
        self.last_len.store(buf.len(), Relaxed);
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

/// Sorts a family's series by their label values.
fn sort_series(family: &mut MetricFamily) {
    family.mut_metric().sort_by(|a, b| {
        let (la, lb) = (a.get_label(), b.get_label());
        la.len().cmp(&lb.len()).then_with(|| la.iter().map(|l| l.value()).cmp(lb.iter().map(|l| l.value())))
    });
}

#[cfg(test)]
mod tests {
    use prometheus::{IntCounterVec, Opts};

    use super::*;

    #[test]
    fn one_family_at_a_time_renders_what_gathering_all_renders() {
        let e = Exposition::default();
        let a = IntCounterVec::new(Opts::new("a_total", "a"), &["x"]).unwrap();
        let b = IntCounterVec::new(Opts::new("b_total", "b"), &["x", "y"]).unwrap();
        let empty = IntCounterVec::new(Opts::new("c_total", "never set"), &["x"]).unwrap();
        e.register(&b);
        e.register(&a);
        e.register(&empty);
        for x in ["z", "m", "a"] {
            a.with_label_values(&[x]).inc();
            b.with_label_values(&[x, "1"]).inc_by(2);
        }
        let mut gathered = Vec::new();
        TextEncoder::new().encode(&e.registry.gather(), &mut gathered).unwrap();
        let gathered = String::from_utf8(gathered).unwrap();
        let rendered = e.render();
        // The same lines (families in registration order rather than by name), and an empty
        // family left out as gather leaves it out.
        let sorted = |s: &str| {
            let mut l: Vec<String> = s.lines().map(String::from).collect();
            l.sort();
            l
        };
        assert_eq!(sorted(&rendered), sorted(&gathered));
        assert!(!rendered.contains("c_total"), "{rendered}");
        // Series sorted by label values within a family.
        let a_lines: Vec<&str> = rendered.lines().filter(|l| l.starts_with("a_total{")).collect();
        assert_eq!(a_lines, ["a_total{x=\"a\"} 1", "a_total{x=\"m\"} 1", "a_total{x=\"z\"} 1"]);
        // Rendering twice gives the same text.
        assert_eq!(e.render(), rendered);
    }

    #[test]
    #[should_panic(expected = "registered once")]
    fn a_name_registered_twice_is_refused() {
        let e = Exposition::default();
        let a = IntCounterVec::new(Opts::new("a_total", "a"), &["x"]).unwrap();
        e.register(&a);
        e.register(&a);
    }
}
