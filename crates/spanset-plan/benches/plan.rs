//! Planning time for 10, 100 and 1,000 clusters over 100, 10,000 and 100,000 ordinals, in two
//! states: steady (every cluster at its target: the controller's common case, planned on every
//! observation) and rebalancing (a new cluster joined, so every slice shifts).
//!
//! `cargo bench -p spanset-plan --bench plan -- --warm-up-time 1 --measurement-time 2` keeps a run short.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use spanset_plan::{Backend, ClusterObservation, ClusterTarget, Desired, Observed, OnScale, Slice, plan};

fn desired(clusters: usize, replicas: u32) -> Desired {
    Desired {
        replicas,
        start: 0,
        backend: Backend::StatefulSet,
        clusters: (0..clusters)
            .map(|i| ClusterTarget { name: format!("c{i:04}"), weight: 1, min_replicas: 0, max_replicas: None })
            .collect(),
        max_concurrent_moves: 8,
        on_scale: OnScale::Keep,
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
    group.sample_size(10);
    for clusters in [10usize, 100, 1000] {
        for replicas in [100u32, 10_000, 100_000] {
            let d = desired(clusters, replicas);
            // `Default::default()`: no move recorded, whatever set type `plan` takes.
            let steady = at(&d, &plan(&d, &at(&d, &[]), &Default::default()).unwrap().target);
            group.bench_with_input(
                BenchmarkId::new(format!("steady/{clusters}-clusters"), replicas),
                &steady,
                |b, obs| b.iter(|| plan(&d, obs, &Default::default()).unwrap()),
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
                |b, obs| b.iter(|| plan(&grown, obs, &Default::default()).unwrap()),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
