//! What a federation's pods need in a member besides their StatefulSet: the namespace, the
//! headless Service and the carried Secrets/ConfigMaps, written where missing or different.
//!
//! The same pass runs twice when something changed: first as a server-side dry run
//! (`dryRun=All`) in every member, beside the StatefulSet's own dry run, then for real only
//! once every member accepted everything, so that a federation a member refuses writes nothing
//! anywhere (no namespace, no Service, no carried object). A dry run cannot be made inside a
//! namespace that does not exist yet (the apiserver answers 404 before it validates, and
//! creating the namespace would be a write): there the namespaced objects are dry-run in
//! [`STAND_IN_NAMESPACE`] instead.

use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace, Secret, Service},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use spanset_api::labels::{FEDERATION, FIELD_MANAGER};

use super::{
    guard_access::{self, ACCESS_NAME, Guarded},
    sharing,
};

/// Where a dry run of a namespaced object goes while the federation's namespace does not exist
/// in the member yet. `default` exists in every cluster (the apiserver recreates it), and what
/// the apiserver validates of a StatefulSet, Service, Secret or ConfigMap does not depend on its
/// namespace. Only an admission policy that selects the missing namespace itself cannot be asked
/// before it exists; it is asked by the real write.
pub const STAND_IN_NAMESPACE: &str = "default";

/// An object copied from the host into members (`migration.carry`).
#[derive(Debug, Clone, PartialEq)]
pub enum Carried {
    /// A Secret.
    Secret(Secret),
    /// A ConfigMap.
    ConfigMap(ConfigMap),
}

/// How one object is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Written for real.
    Write,
    /// Dry-run in its own namespace.
    DryRun,
    /// Dry-run as a create in [`STAND_IN_NAMESPACE`] (its namespace is missing, so it is too).
    StandIn,
}

impl Mode {
    fn params(self) -> PostParams {
        PostParams { dry_run: self != Mode::Write, field_manager: Some(FIELD_MANAGER.into()) }
    }
}

/// Creates `object` where it is missing, replaces it where `differs` says it differs from the
/// stored one or the stored one does not name the federation among its keepers (if `owned`
/// says it is spanset's: another federation's copy is shared, see [`sharing`]), leaves it
/// otherwise; answers whether it wrote (or, as a dry run, would write).
async fn ensure<K>(
    api: &Api<K>,
    object: &K,
    differs: impl Fn(&K, &K) -> bool,
    owned: impl Fn(&K) -> bool,
    mode: Mode,
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let pp = mode.params();
    let name = object.meta().name.clone().unwrap_or_default();
    let mut stored = match mode {
        // Whatever the stand-in namespace holds under that name is not the federation's.
        Mode::StandIn => None,
        Mode::Write | Mode::DryRun => api.get_opt(&name).await?,
    };
    // The federation writing: it adds its name to the object's keepers (see [`sharing`]).
    let me = object.meta().labels.as_ref().and_then(|l| l.get(FEDERATION)).cloned().unwrap_or_default();
    let kept = |stored: &K| me.is_empty() || sharing::kept_by(stored.meta(), &me);
    // A create that meets an object made meanwhile (another federation sharing it, in the
    // same instant) joins it as it is now; one deleted again meanwhile is created again.
    for _ in 0..3 {
        let mut next = object.clone();
        match stored {
            None => {
                if !me.is_empty() {
                    sharing::joined(next.meta_mut(), &Default::default(), &me);
                }
                match api.create(&pp, &next).await {
                    Ok(_) => return Ok(true),
                    // In the stand-in namespace a name taken by another object answers 409
                    // only after the object passed validation and admission: the real create
                    // would be made.
                    Err(kube::Error::Api(e)) if e.code == 409 && mode == Mode::StandIn => return Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => stored = api.get_opt(&name).await?,
                    Err(e) => return Err(e),
                }
            }
            // Another federation's copy of the same object is shared: this one joins its keepers.
            Some(stored) if owned(&stored) && (differs(object, &stored) || !kept(&stored)) => {
                if !me.is_empty() {
                    sharing::joined(next.meta_mut(), stored.meta(), &me);
                }
                next.meta_mut().resource_version = stored.meta().resource_version.clone();
                api.replace(&name, &pp, &next).await?;
                return Ok(true);
            }
            // The user's own object of that name is left alone.
            Some(_) => return Ok(false),
        }
    }
    // Created and deleted by others in turn: nothing is known; the next round looks again.
    Ok(true)
}

/// Whether a member object carries spanset's federation label (only those are replaced).
fn ours<K: kube::Resource>(k: &K) -> bool {
    k.meta().labels.as_ref().is_some_and(|l| l.contains_key(FEDERATION))
}

/// `object` moved into `ns`.
fn moved<K: kube::Resource + Clone>(object: &K, ns: &str) -> K {
    let mut o = object.clone();
    o.meta_mut().namespace = Some(ns.to_string());
    o
}

/// What to ensure in one member.
pub struct Supporting<'a> {
    /// The federation's namespace.
    pub namespace: &'a Namespace,
    /// Its headless Service.
    pub service: &'a Service,
    /// Its carried objects.
    pub carried: &'a [Carried],
    /// Its headless Service's ServiceExport (`spec.network.mode: MultiClusterServices`);
    /// `None`: one of spanset's is deleted.
    pub export: Option<&'a DynamicObject>,
    /// The federation's part of its namespace's pod-lease guards' Role and RoleBinding, if it
    /// has a pod lease.
    pub guard_access: Option<&'a Guarded>,
}

/// A failed step of [`ensure_supporting`]: the federation's field the object comes from, and
/// the member's answer.
#[derive(Debug)]
pub struct Failed {
    /// `metadata.namespace`, `spec.template.serviceName` or `spec.migration.carry[i]`.
    pub field: String,
    /// The member's answer.
    pub error: kube::Error,
}

fn at(field: &str) -> impl FnOnce(kube::Error) -> Failed + '_ {
    move |error| Failed { field: field.to_string(), error }
}

/// Ensures the namespace, the Service and the carried objects in one member (with `dry_run`,
/// only asks the member whether it would accept them); answers the kinds written (or that a
/// real pass would write), for the metrics and to skip a real pass with nothing to do.
pub async fn ensure_supporting(
    client: &Client,
    s: &Supporting<'_>,
    dry_run: bool,
) -> Result<Vec<&'static str>, Failed> {
    let mut wrote = Vec::new();
    let ns = s.namespace.name_any();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let exists = namespaces.get_opt(&ns).await.map_err(at("metadata.namespace"))?.is_some();
    let mode = match (dry_run, exists) {
        (false, _) => Mode::Write,
        (true, true) => Mode::DryRun,
        (true, false) => Mode::StandIn,
    };
    if !exists {
        match namespaces.create(&Mode::params(if dry_run { Mode::DryRun } else { Mode::Write }), s.namespace).await {
            Ok(_) => wrote.push("namespace"),
            // Created meanwhile by someone else: nothing to write.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(at("metadata.namespace")(e)),
        }
    }
    let target = if mode == Mode::StandIn { STAND_IN_NAMESPACE } else { ns.as_str() };
    let services: Api<Service> = Api::namespaced(client.clone(), target);
    let svc_differs = |a: &Service, b: &Service| {
        let (a, b) = (a.spec.clone().unwrap_or_default(), b.spec.clone().unwrap_or_default());
        a.selector != b.selector || a.ports.as_ref().map(Vec::len) != b.ports.as_ref().map(Vec::len)
    };
    let service = ensure(&services, &moved(s.service, target), svc_differs, ours, mode).await;
    if service.map_err(at("spec.template.serviceName"))? {
        wrote.push("service");
    }
    if ensure_export(client, s, target, mode).await.map_err(at("spec.network.mode"))? {
        wrote.push("serviceexport");
    }
    if let Some(g) = s.guard_access
        && ensure_guard_access(client, g, target, mode).await.map_err(at("spec.failover.podLease"))?
    {
        wrote.push("guardaccess");
    }
    for (i, c) in s.carried.iter().enumerate() {
        let changed = match c {
            Carried::Secret(secret) => {
                let api: Api<Secret> = Api::namespaced(client.clone(), target);
                let differs = |a: &Secret, b: &Secret| a.data != b.data || a.type_ != b.type_;
                ensure(&api, &moved(secret, target), differs, ours, mode).await
            }
            Carried::ConfigMap(map) => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), target);
                let differs = |a: &ConfigMap, b: &ConfigMap| a.data != b.data || a.binary_data != b.binary_data;
                ensure(&api, &moved(map, target), differs, ours, mode).await
            }
        };
        let changed = changed.map_err(|e| at(&format!("spec.migration.carry[{i}]"))(e))?;
        if changed {
            wrote.push("carried");
        }
    }
    Ok(wrote)
}

/// The namespace's guards' Role and RoleBinding ([`guard_access`]) serving federation `g` as it
/// is: created where missing, replaced where they do not (a new federation, a new account, a
/// hand edit); a user's objects of that name are left alone. Answers whether it wrote (or, as a
/// dry run, would write).
async fn ensure_guard_access(client: &Client, g: &Guarded, target: &str, mode: Mode) -> Result<bool, kube::Error> {
    let roles: Api<Role> = Api::namespaced(client.clone(), target);
    let role = |stored: Option<&Role>| {
        let (served, owner) = guard_access::joined(stored.map(|r| &r.metadata), g);
        guard_access::role(target, &served, &owner)
    };
    let role_differs = |a: &Role, b: &Role| a.rules != b.rules || a.metadata.annotations != b.metadata.annotations;
    let (wrote_role, role_stored) = ensure_shared(&roles, role, role_differs, mode).await?;
    // A binding is judged against its Role (RBAC's escalation prevention reads the Role to see
    // that its writer holds what it grants), so a dry run of the binding can only be made once
    // its Role is stored; a Role this round creates is checked alone, and the binding with the
    // real write, right after it.
    if mode != Mode::Write && !role_stored {
        return Ok(wrote_role);
    }
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), target);
    let binding = |stored: Option<&RoleBinding>| {
        let (served, owner) = guard_access::joined(stored.map(|b| &b.metadata), g);
        guard_access::binding(target, &served, &owner)
    };
    let binding_differs = |a: &RoleBinding, b: &RoleBinding| {
        a.subjects != b.subjects || a.role_ref != b.role_ref || a.metadata.annotations != b.metadata.annotations
    };
    let (wrote_binding, _) = ensure_shared(&bindings, binding, binding_differs, mode).await?;
    Ok(wrote_role || wrote_binding)
}

/// Creates the object `render` makes (from nothing) where [`ACCESS_NAME`] is missing, replaces
/// it with what `render` makes of it where `differs` says that differs, leaves a user's object
/// of that name alone; answers whether it wrote (or, as a dry run, would write), and whether
/// spanset's object is stored there (before this write).
async fn ensure_shared<K>(
    api: &Api<K>,
    render: impl Fn(Option<&K>) -> K,
    differs: impl Fn(&K, &K) -> bool,
    mode: Mode,
) -> Result<(bool, bool), kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let pp = mode.params();
    let mut stored = match mode {
        // Whatever the stand-in namespace holds under that name serves other federations.
        Mode::StandIn => None,
        Mode::Write | Mode::DryRun => api.get_opt(ACCESS_NAME).await?,
    };
    // A create that meets one made meanwhile (another federation of the namespace, in the same
    // instant) joins it as it is now.
    for _ in 0..3 {
        match &stored {
            None => match api.create(&pp, &render(None)).await {
                Ok(_) => return Ok((true, false)),
                Err(kube::Error::Api(e)) if e.code == 409 && mode == Mode::StandIn => return Ok((true, false)),
                Err(kube::Error::Api(e)) if e.code == 409 => stored = api.get_opt(ACCESS_NAME).await?,
                Err(e) => return Err(e),
            },
            Some(s) if !guard_access::is_ours(s.meta()) => return Ok((false, false)),
            Some(s) => {
                let mut next = render(Some(s));
                if !differs(&next, s) {
                    return Ok((false, true));
                }
                next.meta_mut().resource_version = s.meta().resource_version.clone();
                api.replace(ACCESS_NAME, &pp, &next).await?;
                return Ok((true, true));
            }
        }
    }
    // Created and deleted by others in turn: nothing is known; the next round looks again.
    Ok((true, false))
}

/// The multi-cluster Services API's ServiceExport (KEP-1645), which spanset writes beside the
/// headless Service in each member with `mode: MultiClusterServices`.
pub fn service_export_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "multicluster.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "multicluster.x-k8s.io/v1alpha1".into(),
        kind: "ServiceExport".into(),
        plural: "serviceexports".into(),
    }
}

/// The ServiceExport with `mode: MultiClusterServices`: created where missing. A member that
/// does not serve the API refuses the mode, in the words of the field. In the other modes
/// nothing is asked (their members need not grant spanset the API at all): a ServiceExport
/// left from an earlier mode stays until the federation is deleted in that mode, or by hand.
async fn ensure_export(client: &Client, s: &Supporting<'_>, target: &str, mode: Mode) -> Result<bool, kube::Error> {
    let Some(export) = s.export else { return Ok(false) };
    let resource = service_export_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), target, &resource);
    ensure(&api, &moved(export, target), |_, _| false, ours, mode).await.map_err(|e| match e {
        kube::Error::Api(mut status) if status.code == 404 && !status.message.contains("namespaces") => {
            status.message = "MultiClusterServices needs the multi-cluster Services API \
                              (serviceexports.multicluster.x-k8s.io/v1alpha1), which this member does not serve"
                .into();
            status.code = 422;
            kube::Error::Api(status)
        }
        other => other,
    })
}

/// Whether a request was refused because its namespace does not exist (404 naming the
/// namespace, as a real apiserver answers before it validates anything in it).
pub fn namespace_missing(e: &kube::Error, ns: &str) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && s.message.contains(&format!("namespaces \"{ns}\" not found")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_told_from_a_missing_object() {
        let err =
            |message: &str| kube::Error::Api(kube::core::Status::failure(message, "NotFound").with_code(404).boxed());
        assert!(namespace_missing(&err("namespaces \"shop\" not found"), "shop"));
        assert!(!namespace_missing(&err("statefulsets.apps \"shop\" not found"), "shop"));
        assert!(!namespace_missing(&err("namespaces \"other\" not found"), "shop"));
    }

    #[test]
    fn only_the_real_pass_writes() {
        assert!(!Mode::Write.params().dry_run);
        assert!(Mode::DryRun.params().dry_run && Mode::StandIn.params().dry_run);
        let svc = Service {
            metadata: kube::api::ObjectMeta { namespace: Some("shop".into()), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(moved(&svc, STAND_IN_NAMESPACE).metadata.namespace.as_deref(), Some("default"));
    }
}
