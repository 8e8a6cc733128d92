//! Service ClusterIPs, as kube-apiserver's service REST storage allocates them at create: a
//! Service of type ClusterIP, NodePort or LoadBalancer gets a free address of the service CIDR
//! `10.96.0.0/12` unless it asks for one (honoured when free, refused with the apiserver's words
//! when taken or outside the range) or is headless (`clusterIP: None`); `clusterIPs`,
//! `ipFamilies: [IPv4]` and `ipFamilyPolicy: SingleStack` follow, as on a single-stack cluster.
//! An update that omits them keeps the allocated ones (the REST update's `patchAllocatedValues`),
//! and [`crate::store::validate`] refuses changing them.
//!
//! Allocation picks from the upper part of the range first, and a requested address is usually
//! in the lower part (`10.96.0.10` for cluster DNS), as the apiserver's split allocator does
//! (KEP-3070), so that dynamic picks rarely take an address someone will ask for.

use std::{collections::HashSet, net::Ipv4Addr};

use parking_lot::{Mutex, MutexGuard};
use serde_json::{Value, json};

use crate::store::validate::{FieldError, FieldErrorKind};

/// First address of the service CIDR `10.96.0.0/12` (the network address, never handed out).
const NETWORK: u32 = u32::from_be_bytes([10, 96, 0, 0]);
/// Number of addresses in a `/12`.
const SIZE: u32 = 1 << 20;
/// Size of the lower band kept for requested addresses: `min(max(16, size/16), 256)`.
const STATIC_BAND: u32 = 256;

/// The service CIDR, as the apiserver's `--service-cluster-ip-range` names it in errors.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// Serializes Service creates, so that two of them never take the same address: held from
/// reading the addresses in use to storing the new Service.
#[derive(Debug, Default)]
pub struct ServiceIps {
    lock: Mutex<()>,
}

/// The Service types that get a ClusterIP.
fn gets_cluster_ip(service: &Value) -> bool {
    matches!(
        service.pointer("/spec/type").and_then(Value::as_str),
        None | Some("ClusterIP" | "NodePort" | "LoadBalancer")
    )
}

/// Whether an address is in the service CIDR and not its network or broadcast address.
fn in_range(ip: Ipv4Addr) -> bool {
    let n = u32::from(ip);
    n > NETWORK && n < NETWORK + SIZE - 1
}

/// The addresses a Service holds (`spec.clusterIPs`, else `spec.clusterIP`).
pub fn held_by(service: &Value) -> Vec<Ipv4Addr> {
    let ips = service.pointer("/spec/clusterIPs").and_then(Value::as_array);
    let listed = ips.into_iter().flatten().filter_map(Value::as_str);
    let single = service.pointer("/spec/clusterIP").and_then(Value::as_str);
    listed.chain(single).filter_map(|s| s.parse().ok()).collect()
}

/// `spec.clusterIPs: Invalid value: []string{"…"}: <detail>` — the allocator's error.
fn refused(ips: &[&str], detail: String) -> FieldError {
    FieldError { field: "spec.clusterIPs".into(), kind: FieldErrorKind::Invalid, value: Some(json!(ips)), detail }
}

impl ServiceIps {
    /// Fills in the ClusterIP fields of a new Service, given the addresses `in_use` (read
    /// while holding the returned guard, which the caller keeps until the Service is stored).
    /// `pick` draws a number below its argument (the cluster's seeded generator).
    pub fn allocate<'a>(
        &'a self,
        service: &mut Value,
        in_use: impl FnOnce() -> HashSet<Ipv4Addr>,
        pick: impl FnOnce(u32) -> u32,
    ) -> Result<MutexGuard<'a, ()>, FieldError> {
        let guard = self.lock.lock();
        if !gets_cluster_ip(service) || !service.get("spec").is_some_and(Value::is_object) {
            return Ok(guard);
        }
        let spec = &mut service["spec"];
        let first_listed = spec.pointer("/clusterIPs/0").and_then(Value::as_str).map(str::to_string);
        let asked = match spec.get("clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(ip) => Some(ip.to_string()),
            None => first_listed,
        };
        let ip = match asked.as_deref() {
            Some("None") => "None".to_string(),
            Some(text) => {
                let Ok(ip) = text.parse::<Ipv4Addr>() else {
                    return Err(FieldError {
                        field: "spec.clusterIPs[0]".into(),
                        kind: FieldErrorKind::Invalid,
                        value: Some(json!(text)),
                        detail: "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into(),
                    });
                };
                if !in_range(ip) {
                    return Err(refused(
                        &[text],
                        format!(
                            "failed to allocate IP {text}: the provided IP ({text}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
                        ),
                    ));
                }
                if in_use().contains(&ip) {
                    return Err(refused(
                        &[text],
                        format!("failed to allocate IP {text}: provided IP is already allocated"),
                    ));
                }
                text.to_string()
            }
            None => {
                let taken = in_use();
                free_address(&taken, pick)
                    .ok_or_else(|| refused(&[], "failed to allocate a serviceIP: range is full".to_string()))?
                    .to_string()
            }
        };
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
        Ok(guard)
    }
}

/// A free address: from a random point of the upper band upwards (wrapping), then the lower
/// band.
fn free_address(taken: &HashSet<Ipv4Addr>, pick: impl FnOnce(u32) -> u32) -> Option<Ipv4Addr> {
    let upper = SIZE - 1 - STATIC_BAND; // offsets STATIC_BAND ..= SIZE-2
    let start = pick(upper);
    let in_upper = (0..upper).map(|k| STATIC_BAND + (start + k) % upper);
    let in_lower = 1..STATIC_BAND;
    in_upper.chain(in_lower).map(|offset| Ipv4Addr::from(NETWORK + offset)).find(|ip| !taken.contains(ip))
}

/// On update, a Service that omits its allocated addresses keeps them (a `kubectl replace`
/// of a manifest without `clusterIP`), unless it becomes an ExternalName Service.
pub fn keep_allocated(current: &Value, next: &mut Value) {
    if !gets_cluster_ip(next) || !next.get("spec").is_some_and(Value::is_object) {
        return;
    }
    let omitted = |v: &Value, field: &str| v.pointer(&format!("/spec/{field}")).is_none_or(|f| f.is_null() || f == "");
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if omitted(next, field)
            && let Some(kept) = current.pointer(&format!("/spec/{field}"))
        {
            next["spec"][field] = kept.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocate(ips: &ServiceIps, svc: &mut Value, taken: &[&str]) -> Result<(), String> {
        let taken: HashSet<Ipv4Addr> = taken.iter().map(|s| s.parse().unwrap()).collect();
        ips.allocate(svc, || taken, |n| n / 2).map(drop).map_err(|e| e.to_string())
    }

    #[test]
    fn a_service_without_a_cluster_ip_gets_a_free_one_from_the_upper_band() {
        let ips = ServiceIps::default();
        let mut svc = json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}});
        allocate(&ips, &mut svc, &[]).unwrap();
        let ip: Ipv4Addr = svc["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
        assert!(in_range(ip) && u32::from(ip) >= NETWORK + STATIC_BAND, "{ip}");
        assert_eq!(svc["spec"]["clusterIPs"], json!([ip.to_string()]));
        assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(svc["spec"]["ipFamilyPolicy"], "SingleStack");

        // The same pick again finds it taken and moves on.
        let mut other = json!({"spec": {}});
        allocate(&ips, &mut other, &[&ip.to_string()]).unwrap();
        assert_ne!(other["spec"]["clusterIP"], svc["spec"]["clusterIP"]);
    }

    #[test]
    fn a_requested_address_is_honoured_when_free_and_refused_in_the_apiservers_words() {
        let ips = ServiceIps::default();
        let mut svc = json!({"spec": {"clusterIP": "10.96.0.10"}});
        allocate(&ips, &mut svc, &["10.96.0.1"]).unwrap();
        assert_eq!(svc["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        let mut again = json!({"spec": {"clusterIP": "10.96.0.10"}});
        assert_eq!(
            allocate(&ips, &mut again, &["10.96.0.10"]).unwrap_err(),
            r#"spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"#
        );
        let mut outside = json!({"spec": {"clusterIPs": ["192.168.1.1"]}});
        assert_eq!(
            allocate(&ips, &mut outside, &[]).unwrap_err(),
            r#"spec.clusterIPs: Invalid value: []string{"192.168.1.1"}: failed to allocate IP 192.168.1.1: the provided IP (192.168.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"#
        );
    }

    #[test]
    fn headless_and_external_name_services_get_no_address() {
        let ips = ServiceIps::default();
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        allocate(&ips, &mut headless, &[]).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
        allocate(&ips, &mut external, &[]).unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn the_range_is_used_up_before_an_address_is_given_twice() {
        let mut taken = HashSet::new();
        let mut upper_first = true;
        for i in 0..600u32 {
            // A tiny fake range: everything but a few addresses already taken.
            let ip = free_address(&taken, |n| (i * 7919) % n).unwrap();
            assert!(taken.insert(ip), "{ip} given twice");
            upper_first &= u32::from(ip) >= NETWORK + STATIC_BAND;
        }
        assert!(upper_first, "600 picks fit in the upper band");
    }

    #[test]
    fn an_update_without_the_addresses_keeps_them() {
        let current = json!({"spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}});
        let mut next = json!({"spec": {"ports": [{"port": 53}]}});
        keep_allocated(&current, &mut next);
        assert_eq!(next["spec"]["clusterIP"], "10.96.0.10");
        assert_eq!(next["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        let mut changed = json!({"spec": {"clusterIP": "10.96.0.11"}});
        keep_allocated(&current, &mut changed);
        assert_eq!(changed["spec"]["clusterIP"], "10.96.0.11", "a change is left for validation to refuse");
    }
}
