//! Planning time for 10, 100 and 1,000 clusters over 10k and 100k ordinals, in two states:
//! steady (every cluster at its target: the controller's common case) and rebalancing (a new
//! cluster joined, so every slice shifts).

use std::collections::BTreeSet;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use spanset::plan::{Backend, ClusterObservation, ClusterTarget, Desired, Observed, Slice, plan};

fn desired(clusters: usize, replicas: u32) -> Desired {
    Desired {
        replicas,
        start: 0,
        backend: Backend::StatefulSet,
        clusters: (0..clusters)
            .map(|i| ClusterTarget { name: format!("c{i:04}"), weight: 1, min_replicas: 0, max_replicas: None })
            .collect(),
        max_concurrent_moves: 8,
    }
}

fn at(d: &Desired, slices: &[(String, Slice)]) -> Observed {
    let mut obs: Observed =
        d.clusters.iter().map(|c| (c.name.clone(), ClusterObservation::settled(Slice::empty()))).collect();
    for (name, s) in slices {
        obs.insert(name.clone(), ClusterObservation::settled(s.clone()));
    }
    obs
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    group
        .sample_size(10)
        .measurement_time(std::time::Duration::from_secs(2))
        .warm_up_time(std::time::Duration::from_millis(500));
    for clusters in [10usize, 100, 1000] {
        for replicas in [10_000u32, 100_000] {
            let d = desired(clusters, replicas);
            let steady = at(&d, &plan(&d, &at(&d, &[]), &BTreeSet::new()).unwrap().target);
            group.bench_with_input(
                BenchmarkId::new(format!("steady/{clusters}-clusters"), replicas),
                &steady,
                |b, obs| b.iter(|| plan(&d, obs, &BTreeSet::new()).unwrap()),
            );
            // One more cluster joins: every slice shifts.
            let grown = desired(clusters + 1, replicas);
            let mut before = steady.clone();
            before.insert(
                grown.clusters[clusters].name.clone(),
                ClusterObservation {
                    reachable: true,
                    compatible: true,
                    observed_since_write: true,
                    ..Default::default()
                },
            );
            group.bench_with_input(
                BenchmarkId::new(format!("rebalance/{clusters}-clusters"), replicas),
                &before,
                |b, obs| b.iter(|| plan(&grown, obs, &BTreeSet::new()).unwrap()),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
