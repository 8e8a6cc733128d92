//! The name a StatefulSet gives its pods, `<set>-<ordinal>`, read back: the controller knows by
//! it which pods carry a federation's identity, whatever their labels.

/// The StatefulSet and ordinal a pod's name gives it: `<set>-<ordinal>`, the ordinal in the
/// decimal a StatefulSet writes (no sign, no leading zero), the set's name not empty.
pub fn statefulset_pod(name: &str) -> Option<(&str, u32)> {
    let (set, ordinal) = name.rsplit_once('-')?;
    let canonical = !ordinal.is_empty()
        && ordinal.bytes().all(|b| b.is_ascii_digit())
        && (ordinal == "0" || !ordinal.starts_with('0'));
    (canonical && !set.is_empty()).then_some(())?;
    Some((set, ordinal.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_name_gives_its_statefulset_and_ordinal_only_as_a_statefulset_writes_it() {
        assert_eq!(statefulset_pod("redis-3"), Some(("redis", 3)));
        assert_eq!(statefulset_pod("redis-cluster-10"), Some(("redis-cluster", 10)));
        assert_eq!(statefulset_pod("redis-0"), Some(("redis", 0)));
        for name in ["redis-03", "redis-+3", "redis-", "-3", "redis", "redis-3a", "redis-99999999999"] {
            assert_eq!(statefulset_pod(name), None, "{name}");
        }
    }
}
