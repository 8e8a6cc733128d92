//! The few questions about [`Ordinals`] that `range-set-blaze` does not answer directly, each in
//! time linear in the number of ranges (never in the number of ordinals): the lowest or highest
//! `n` ordinals, the part above or below an ordinal, and which ordinals several sets share.

use range_set_blaze::{CheckSortedDisjoint, SortedDisjoint};

use super::types::{Ordinal, Ordinals};

/// The ordinals `start..start + n` (empty for `n == 0`).
pub(crate) fn run(start: Ordinal, n: u32) -> Ordinals {
    match n {
        0 => Ordinals::new(),
        n => Ordinals::from(start..=start + (n - 1)),
    }
}

/// How many ordinals one range holds.
fn size(r: &std::ops::RangeInclusive<Ordinal>) -> u64 {
    u64::from(r.end() - r.start()) + 1
}

/// The lowest `n` ordinals of `set` (all of it when it holds fewer).
pub(crate) fn lowest(set: &Ordinals, n: u64) -> Ordinals {
    let mut left = n;
    let runs = set.ranges().map_while(|r| {
        let take = size(&r).min(left);
        left -= take;
        // `take - 1` fits: it is below the size of a range of u32s.
        (take > 0).then(|| *r.start()..=*r.start() + (take - 1) as Ordinal)
    });
    Ordinals::from_sorted_disjoint(CheckSortedDisjoint::new(runs.fuse()))
}

/// The highest `n` ordinals of `set` (all of it when it holds fewer).
pub(crate) fn highest(set: &Ordinals, n: u64) -> Ordinals {
    let mut left = n;
    let runs = set.ranges().rev().map_while(|r| {
        let take = size(&r).min(left);
        left -= take;
        (take > 0).then(|| *r.end() - (take - 1) as Ordinal..=*r.end())
    });
    runs.collect()
}

/// Takes the lowest `n` ordinals out of `set` and returns them.
pub(crate) fn split_lowest(set: &mut Ordinals, n: u64) -> Ordinals {
    match lowest(set, n).last() {
        None => Ordinals::new(),
        // The lowest n reach the last ordinal there is: that is all of it.
        Some(Ordinal::MAX) => std::mem::take(set),
        Some(last) => {
            let high = set.split_off(last + 1);
            std::mem::replace(set, high)
        }
    }
}

/// The ordinals of `set` above `k`.
pub(crate) fn above(set: &Ordinals, k: Ordinal) -> Ordinals {
    match k.checked_add(1) {
        Some(from) => (set.ranges() & CheckSortedDisjoint::new([from..=Ordinal::MAX])).into_range_set_blaze(),
        None => Ordinals::new(),
    }
}

/// The ordinals of `set` below `k`.
pub(crate) fn below(set: &Ordinals, k: Ordinal) -> Ordinals {
    match k.checked_sub(1) {
        Some(to) => (set.ranges() & CheckSortedDisjoint::new([0..=to])).into_range_set_blaze(),
        None => Ordinals::new(),
    }
}

/// The longest run of `set`'s highest ordinals that all lie in `within`.
pub(crate) fn top_run(set: &Ordinals, within: &Ordinals) -> Ordinals {
    match (set.ranges() - within.ranges()).last() {
        Some(outside) => above(set, *outside.end()),
        None => set.clone(),
    }
}

/// The longest run of `set`'s lowest ordinals that all lie in `within`.
pub(crate) fn bottom_run(set: &Ordinals, within: &Ordinals) -> Ordinals {
    match (set.ranges() - within.ranges()).next() {
        Some(outside) => below(set, *outside.start()),
        None => set.clone(),
    }
}

/// The ordinals in at least one of `sets`, and those in at least two: one sweep over all their
/// ranges, so that "held by a cluster other than c" is a set difference per cluster rather
/// than a look-up per ordinal.
pub(crate) fn once_and_twice<'a>(sets: impl IntoIterator<Item = &'a Ordinals>) -> (Ordinals, Ordinals) {
    // Boundaries as u64 so that a range ending at u32::MAX closes at u32::MAX + 1.
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for set in sets {
        for r in set.ranges() {
            edges.push((u64::from(*r.start()), 1));
            edges.push((u64::from(*r.end()) + 1, -1));
        }
    }
    edges.sort_unstable();
    let (mut once, mut twice) = (Vec::new(), Vec::new());
    let mut depth = 0;
    let mut i = 0;
    while i < edges.len() {
        let at = edges[i].0;
        let before = depth;
        while i < edges.len() && edges[i].0 == at {
            depth += edges[i].1;
            i += 1;
        }
        for (level, out) in [(1, &mut once), (2, &mut twice)] {
            if before < level && depth >= level {
                out.push((at, at));
            } else if before >= level && depth < level {
                out.last_mut().expect("a range was opened").1 = at;
            }
        }
    }
    let build = |runs: Vec<(u64, u64)>| -> Ordinals {
        // Each run closes before it ends: `at` is one past its last ordinal.
        let runs = runs.into_iter().map(|(a, b)| a as Ordinal..=(b - 1) as Ordinal);
        Ordinals::from_sorted_disjoint(CheckSortedDisjoint::new(runs))
    };
    (build(once), build(twice))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn set(v: &BTreeSet<u32>) -> Ordinals {
        v.iter().copied().collect()
    }

    fn elems(s: &Ordinals) -> Vec<u32> {
        s.iter().collect()
    }

    proptest! {
        #[test]
        fn helpers_agree_with_their_per_ordinal_definitions(
            a in prop::collection::btree_set(0u32..60, 0..30),
            b in prop::collection::btree_set(0u32..60, 0..30),
            c in prop::collection::btree_set(0u32..60, 0..30),
            n in 0u64..40,
            k in 0u32..62,
        ) {
            let (sa, sb) = (set(&a), set(&b));
            prop_assert_eq!(elems(&lowest(&sa, n)), a.iter().copied().take(n as usize).collect::<Vec<_>>());
            let mut top: Vec<u32> = a.iter().rev().copied().take(n as usize).collect();
            top.reverse();
            prop_assert_eq!(elems(&highest(&sa, n)), top);
            let mut rest = sa.clone();
            let low = split_lowest(&mut rest, n);
            prop_assert_eq!(elems(&low), a.iter().copied().take(n as usize).collect::<Vec<_>>());
            prop_assert_eq!(elems(&rest), a.iter().copied().skip(n as usize).collect::<Vec<_>>());
            prop_assert_eq!(elems(&above(&sa, k)), a.range(k + 1..).copied().collect::<Vec<_>>());
            prop_assert_eq!(elems(&below(&sa, k)), a.range(..k).copied().collect::<Vec<_>>());
            let in_b_from_top: Vec<u32> = {
                let mut v: Vec<u32> = a.iter().rev().copied().take_while(|x| b.contains(x)).collect();
                v.reverse();
                v
            };
            prop_assert_eq!(elems(&top_run(&sa, &sb)), in_b_from_top);
            let bottom: Vec<u32> = a.iter().copied().take_while(|x| b.contains(x)).collect();
            prop_assert_eq!(elems(&bottom_run(&sa, &sb)), bottom);
            let (once, twice) = once_and_twice([&sa, &sb, &set(&c)]);
            let count = |x: &u32| [&a, &b, &c].iter().filter(|s| s.contains(x)).count();
            prop_assert_eq!(elems(&once), (0..60).filter(|x| count(x) >= 1).collect::<Vec<_>>());
            prop_assert_eq!(elems(&twice), (0..60).filter(|x| count(x) >= 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn helpers_reach_the_last_ordinal_without_overflow() {
        let max = Ordinal::MAX;
        let s = Ordinals::from_iter([0..=2, max - 1..=max]);
        assert_eq!(elems(&highest(&s, 3)), [2, max - 1, max]);
        assert!(above(&s, max).is_empty());
        assert!(below(&s, 0).is_empty());
        let mut all = s.clone();
        assert_eq!(split_lowest(&mut all, 10), s);
        assert!(all.is_empty());
        let (once, twice) = once_and_twice([&s, &Ordinals::from([max])]);
        assert_eq!((once, elems(&twice)), (s, vec![max]));
    }
}
