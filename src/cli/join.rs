//! `spanset join NAME --kubeconfig FILE --context CTX` and `spanset unjoin NAME`: register a
//! member cluster with the host under an identity that has only what spanset needs there.
//!
//! `join` applies `deploy/member/rbac.yaml` (compiled in) to the member — namespace
//! `spanset-system`, ServiceAccount `spanset-member`, its ClusterRole and binding — and
//! `deploy/member/admission.yaml`, the member's own guards (ValidatingAdmissionPolicies: only
//! spanset changes its StatefulSets, a stale leader's write is refused, spanset's identity
//! writes only what spanset manages; a member before Kubernetes 1.30 serves no such policies
//! and is joined without them, saying so on stderr), mints a
//! token for that ServiceAccount through the TokenRequest API, and writes into the host a
//! Secret holding a kubeconfig for that identity plus the `MemberCluster` pointing at it (a
//! Secret outside `spanset-system` with the Role that lets the controller read it there). Run
//! again, it rotates the token in place (the controller picks the new Secret up without a
//! restart). `unjoin` removes the MemberCluster and its Secret (and, given the member's
//! kubeconfig, the member-side identity and guards), refused while any federation still places ordinals
//! there, has moves from or to it, or (given the member's kubeconfig) pods there; the
//! controller also holds a deleted MemberCluster (a finalizer) while it knows of pods or moves
//! there, and the Secret goes only once the MemberCluster is gone. Exit codes: 0 done, 1 refused or failed (one line on stderr), 2 bad flags.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use base64::Engine;
use k8s_openapi::{
    ByteString,
    api::{
        admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
        authentication::v1::TokenRequest,
        core::v1::{Namespace, Pod, Secret, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    config::Kubeconfig,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use spanset_api::{MemberCluster, MemberClusterSpec, SecretKeyRef, labels::MEMBER_FINALIZER};
use spanset_controller::{
    member::{
        policies,
        protections::{POLICY_GROUP_VERSION, POLICY_RESOURCE, serves_admission_policies},
    },
    runtime::host_client,
};

/// The member-side identity and permissions, as shipped in `deploy/member/`.
pub const MEMBER_RBAC: &str = include_str!("../../deploy/member/rbac.yaml");
/// The member's own guards (ValidatingAdmissionPolicies and their bindings), as shipped in
/// `deploy/member/` (kept beside the controller's read-back of them, which compares with it).
pub use spanset_controller::member::policies::MEMBER_ADMISSION;
/// The controller's identity and permissions in the host, as shipped in `deploy/`.
pub const HOST_RBAC: &str = include_str!("../../deploy/rbac.yaml");
/// What replicas sharing federations (`spanset run --shards N`) need beyond [`HOST_RBAC`]: the
/// shard and presence Leases, as shipped in `deploy/rbac-shards.yaml`.
pub const SHARDS_RBAC: &str = include_str!("../../deploy/rbac-shards.yaml");
/// Namespace of the member-side identity (and, by default, of the host-side Secrets).
pub const SYSTEM_NAMESPACE: &str = "spanset-system";
/// The member-side ServiceAccount.
pub const MEMBER_ACCOUNT: &str = "spanset-member";
/// Label on the host Secrets `join` writes, naming their member (`unjoin` deletes only these).
pub const MEMBER_LABEL: &str = "spanset.dev/member";
/// Field manager of `join`'s writes.
const MANAGER: &str = "spanset-join";

/// Flags of `spanset join`.
#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// Name of the member (the MemberCluster's name; a DNS label).
    pub name: String,
    /// Kubeconfig holding the member's context (an administrator's, used once to set up).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// The member's context in it.
    #[arg(long, value_name = "CTX")]
    pub context: String,
    /// Kubeconfig of the host cluster (default: --kubeconfig).
    #[arg(long, value_name = "FILE")]
    pub host_kubeconfig: Option<PathBuf>,
    /// The host's context (default: the host kubeconfig's current context).
    #[arg(long, value_name = "CTX")]
    pub host_context: Option<String>,
    /// Namespace of the host Secret holding the member's kubeconfig (outside spanset-system, join
    /// also gives the controller read access to Secrets there: Role spanset-members).
    #[arg(long, default_value = SYSTEM_NAMESPACE)]
    pub namespace: String,
    /// Lifetime of the minted token, in seconds (run `join` again to rotate it).
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub token_seconds: i64,
    /// Region recorded on the MemberCluster.
    #[arg(long)]
    pub region: Option<String>,
}

/// Flags of `spanset unjoin`.
#[derive(Debug, clap::Args)]
pub struct UnjoinArgs {
    /// Name of the member.
    pub name: String,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub host_kubeconfig: Option<PathBuf>,
    /// The host's context (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub host_context: Option<String>,
    /// Kubeconfig holding the member's context, to remove the member-side identity too.
    #[arg(long, value_name = "FILE", requires = "context")]
    pub kubeconfig: Option<PathBuf>,
    /// The member's context in --kubeconfig.
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
    /// How long to wait, in seconds, for the controller to let the MemberCluster go (it holds
    /// it while a federation still has pods or moves there).
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub wait: u64,
}

/// What `join` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The host Secret holding the member's kubeconfig (`namespace/name`).
    pub secret: String,
    /// When the minted token expires (RFC 3339).
    pub expires: String,
    /// What the member could not be given, and why (its release lacks it): said, not failed.
    pub not_installed: Vec<String>,
}

fn docs(text: &str, source: &str) -> Result<Vec<Value>, String> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).map_err(|e| format!("{source}: {e}")))
        .collect::<Result<Vec<Value>, String>>()
        .map(|all| all.into_iter().filter(|d| !d.is_null()).collect())
}

async fn apply<K>(api: Api<K>, doc: &Value) -> Result<(), String>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(doc))
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot apply {kind} {name}: {e}"))
}

/// Applies a manifest of spanset's (`deploy/rbac.yaml`, `deploy/member/rbac.yaml`,
/// `deploy/member/admission.yaml`), creating `spanset-system` first. Server-side apply with
/// force: running it again changes nothing, or brings a drifted object back to the file.
pub async fn apply_manifest(client: &Client, text: &str, source: &str) -> Result<(), String> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}});
    apply(Api::<Namespace>::all(client.clone()), &ns).await?;
    for doc in docs(text, source)? {
        let ns = doc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(SYSTEM_NAMESPACE);
        let c = client.clone();
        match doc.get("kind").and_then(Value::as_str) {
            Some("Namespace") => apply(Api::<Namespace>::all(c), &doc).await?,
            Some("ServiceAccount") => apply(Api::<ServiceAccount>::namespaced(c, ns), &doc).await?,
            Some("ClusterRole") => apply(Api::<ClusterRole>::all(c), &doc).await?,
            Some("ClusterRoleBinding") => apply(Api::<ClusterRoleBinding>::all(c), &doc).await?,
            Some("Role") => apply(Api::<Role>::namespaced(c, ns), &doc).await?,
            Some("RoleBinding") => apply(Api::<RoleBinding>::namespaced(c, ns), &doc).await?,
            Some("ValidatingAdmissionPolicy") => apply(Api::<ValidatingAdmissionPolicy>::all(c), &doc).await?,
            Some("ValidatingAdmissionPolicyBinding") => {
                apply(Api::<ValidatingAdmissionPolicyBinding>::all(c), &doc).await?
            }
            other => return Err(format!("{source}: unexpected kind {other:?}")),
        }
    }
    Ok(())
}

/// Reads back every guard just applied and puts the shipped spec back where it still differs
/// from the manifest as the controller judges it ([`policies::differing`]). Server-side apply
/// leaves another manager's fields in place, so a selector or a match condition someone added
/// would survive it and keep the guard narrowed: replacing the spec removes it, and what the
/// controller reads back next is what `join` promised.
async fn restore_guards(member: &Client) -> Result<(), String> {
    for s in policies::shipped() {
        let api: Api<kube::api::DynamicObject> = Api::all_with(member.clone(), &s.kind.resource());
        let what = format!("{} {}", s.kind.singular(), s.name);
        let mut stored = api.get(&s.name).await.map_err(|e| format!("cannot read back {what}: {e}"))?;
        if policies::differing(s.kind, &s.spec, stored.data.get("spec")).is_empty() {
            continue;
        }
        stored.data["spec"] = s.spec.clone();
        stored.metadata.managed_fields = None;
        let pp = PostParams { field_manager: Some(MANAGER.into()), ..Default::default() };
        api.replace(&s.name, &pp, &stored).await.map_err(|e| format!("cannot restore {what}: {e}"))?;
    }
    Ok(())
}

/// The server, CA and TLS settings of a kubeconfig context, as a kubeconfig `cluster` entry
/// (a CA given as a file is embedded, since the Secret travels without the file).
pub fn cluster_entry(kubeconfig: &Path, context: &str) -> Result<Value, String> {
    let where_ = format!("--kubeconfig {} --context {context}", kubeconfig.display());
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| format!("{where_}: {e}"))?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| format!("{where_}: no such context"))?;
    let cluster =
        kc.clusters.iter().find(|c| c.name == ctx.cluster).and_then(|c| c.cluster.as_ref()).ok_or_else(|| {
            format!("{where_}: the context names cluster {:?}, which is not in the file", ctx.cluster)
        })?;
    let server = cluster.server.clone().ok_or_else(|| format!("{where_}: the cluster has no server"))?;
    let mut entry = json!({"server": server});
    let ca = match (&cluster.certificate_authority_data, &cluster.certificate_authority) {
        (Some(data), _) => Some(data.clone()),
        (None, Some(file)) => {
            let pem = std::fs::read(file).map_err(|e| format!("{where_}: certificate-authority {file}: {e}"))?;
            Some(base64::engine::general_purpose::STANDARD.encode(pem))
        }
        (None, None) => None,
    };
    if let Some(ca) = ca {
        entry["certificate-authority-data"] = json!(ca);
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        entry["insecure-skip-tls-verify"] = json!(true);
    }
    if let Some(name) = &cluster.tls_server_name {
        entry["tls-server-name"] = json!(name);
    }
    Ok(entry)
}

/// A kubeconfig with one context: `name`'s cluster entry and a ServiceAccount's token.
pub fn identity_kubeconfig(name: &str, cluster: Value, account: &str, token: &str) -> String {
    let doc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": account}}],
        "current-context": name,
    });
    serde_yaml::to_string(&doc).expect("a JSON document always renders as YAML")
}

/// Mints a token for a ServiceAccount of `spanset-system`; answers it and its expiry.
pub async fn mint(client: &Client, account: &str, seconds: i64) -> Result<(String, String), String> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": seconds}}))
            .expect("a literal TokenRequest");
    let minted: TokenRequest = sas
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("cannot mint a token for {SYSTEM_NAMESPACE}/{account}: {e}"))?;
    let status = minted.status.ok_or("the member's TokenRequest answer has no status")?;
    Ok((status.token, status.expiration_timestamp.0.to_string()))
}

/// Joins a member: identity and permissions in the member, its kubeconfig Secret and the
/// MemberCluster in the host.
pub async fn join(host: &Client, member: &Client, args: &JoinArgs) -> Result<Joined, String> {
    if super::bad_cluster_name(&args.name).is_some() {
        return Err(format!("NAME: {:?} is not a DNS label", args.name));
    }
    let cluster = cluster_entry(&args.kubeconfig, &args.context)?;
    apply_manifest(member, MEMBER_RBAC, "deploy/member/rbac.yaml").await.map_err(|e| format!("in the member: {e}"))?;
    // The member's own guards need ValidatingAdmissionPolicies (Kubernetes 1.30 and later):
    // an older member is joined without them, and told so, rather than refused.
    let mut not_installed = Vec::new();
    let serves = serves_admission_policies(member)
        .await
        .map_err(|e| format!("in the member: cannot read discovery of {POLICY_GROUP_VERSION}: {e}"))?;
    if serves {
        apply_manifest(member, MEMBER_ADMISSION, "deploy/member/admission.yaml")
            .await
            .map_err(|e| format!("in the member: {e}"))?;
        restore_guards(member).await.map_err(|e| format!("in the member: {e}"))?;
    } else {
        let version = member.apiserver_version().await.map(|v| v.git_version).unwrap_or_else(|_| "unknown".into());
        not_installed.push(format!(
            "the member's admission policies (deploy/member/admission.yaml): Kubernetes {version} does not serve \
             {POLICY_RESOURCE} in {POLICY_GROUP_VERSION} (1.30 and later do); nothing in the member refuses others' \
             changes to spanset's objects or a stale leader's write there (see docs/version-skew.md)"
        ));
    }
    let (token, expires) =
        mint(member, MEMBER_ACCOUNT, args.token_seconds).await.map_err(|e| format!("in the member: {e}"))?;
    let kubeconfig = identity_kubeconfig(&args.name, cluster, MEMBER_ACCOUNT, &token);

    let namespaces: Api<Namespace> = Api::all(host.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.namespace}});
    namespaces
        .patch(&args.namespace, &PatchParams::apply(MANAGER), &Patch::Apply(&ns))
        .await
        .map_err(|e| format!("cannot create namespace {} in the host: {e}", args.namespace))?;
    if args.namespace != SYSTEM_NAMESPACE {
        members_access(host, &args.namespace).await?;
    }
    let secret_name = format!("spanset-member-{}", args.name);
    let mut secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret_name, "namespace": args.namespace, "labels": {MEMBER_LABEL: args.name}},
        "type": "Opaque",
    }))
    .expect("a literal Secret");
    secret.data = Some([("kubeconfig".to_string(), ByteString(kubeconfig.into_bytes()))].into());
    Api::<Secret>::namespaced(host.clone(), &args.namespace)
        .patch(&secret_name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&secret))
        .await
        .map_err(|e| format!("cannot write Secret {}/{secret_name} in the host: {e}", args.namespace))?;
    let mcs: Api<MemberCluster> = Api::all(host.clone());
    let existing = mcs
        .get_opt(&args.name)
        .await
        .map_err(|e| format!("cannot read MemberCluster {} in the host: {e}", args.name))?;
    let mc = member_cluster(&args.name, &args.namespace, &secret_name, args.region.as_deref(), existing.as_ref());
    // Forced: joining again is the operator's word on where the member's kubeconfig is and its
    // region, whoever edited them since.
    mcs.patch(&args.name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&mc))
        .await
        .map_err(|e| format!("cannot write MemberCluster {} in the host: {e}", args.name))?;
    Ok(Joined { secret: format!("{}/{secret_name}", args.namespace), expires, not_installed })
}

/// The MemberCluster `join` applies. It never states `spec.fenced`: a fence is the
/// operator's, set and cleared by `spanset fence` and `unfence`, and joining a fenced member
/// again (to rotate its token) must leave it fenced (an applied `false` would clear it, or
/// conflict with the fence's writer). A region not given keeps the one the member has, since
/// server-side apply removes what its manager stops stating.
fn member_cluster(
    name: &str,
    namespace: &str,
    secret: &str,
    region: Option<&str>,
    existing: Option<&MemberCluster>,
) -> Value {
    let spec = MemberClusterSpec {
        kubeconfig_secret: Some(SecretKeyRef {
            namespace: namespace.to_string(),
            name: secret.to_string(),
            key: Some("kubeconfig".into()),
        }),
        context: None,
        region: region.map(str::to_string).or_else(|| existing.and_then(|m| m.spec.region.clone())),
        fenced: false,
    };
    let mut spec = serde_json::to_value(spec).expect("a MemberClusterSpec serializes");
    spec.as_object_mut().map(|s| s.remove("fenced"));
    json!({"apiVersion": "spanset.dev/v1alpha1", "kind": "MemberCluster", "metadata": {"name": name}, "spec": spec})
}

/// The controller reads members' kubeconfig Secrets in `spanset-system` only (the Role
/// `spanset-members` of `deploy/rbac.yaml`): a Secret written in another namespace needs the
/// same Role and RoleBinding there, applied from that file with the namespace changed.
async fn members_access(host: &Client, namespace: &str) -> Result<(), String> {
    for mut doc in docs(HOST_RBAC, "deploy/rbac.yaml")? {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if name != MEMBERS_ROLE || !(kind == "Role" || kind == "RoleBinding") {
            continue;
        }
        doc["metadata"]["namespace"] = json!(namespace);
        let applied = match kind.as_str() {
            "Role" => apply(Api::<Role>::namespaced(host.clone(), namespace), &doc).await,
            _ => apply(Api::<RoleBinding>::namespaced(host.clone(), namespace), &doc).await,
        };
        applied.map_err(|e| format!("in the host, namespace {namespace}: {e}"))?;
    }
    Ok(())
}

/// The Role (and RoleBinding) of `deploy/rbac.yaml` that lets the controller read members'
/// kubeconfig Secrets.
pub const MEMBERS_ROLE: &str = "spanset-members";

/// What the federations still have in a member, per the host: their placement naming it, a
/// slice there, or moves from or to it (`NS/NAME: why`).
async fn placing(host: &Client, name: &str) -> Result<Vec<String>, String> {
    let (all, undecodable) = spanset_api::decode::all_federations(host).await?;
    let mut out = Vec::new();
    let named_in_placement = |spec: &serde_json::Value| {
        spec.pointer("/placement/clusters")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c.get("name").and_then(serde_json::Value::as_str) == Some(name)))
    };
    let stored = all
        .iter()
        .map(|f| {
            let key = format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any());
            (key, f.spec.placement.clusters.iter().any(|c| c.name == name), f.status.clone(), true)
        })
        .chain(undecodable.iter().map(|u| {
            let key = u.key();
            let named = u.object.data.get("spec").is_some_and(named_in_placement);
            (key, named, u.status.clone(), u.status.is_some())
        }));
    for (key, named, status, status_readable) in stored {
        let status = status.unwrap_or_default();
        let mut why = Vec::new();
        if named {
            why.push("spec.placement names it".to_string());
        }
        if !status_readable {
            why.push("it cannot be decoded and its status cannot be read".to_string());
        }
        if status.slices.iter().any(|sl| sl.cluster == name && sl.replicas > 0) {
            why.push("its status shows a slice there".to_string());
        }
        let moving: Vec<String> =
            status.moves.iter().filter(|m| m.from == name || m.to == name).map(|m| m.ordinal.to_string()).collect();
        if !moving.is_empty() {
            why.push(format!("ordinals {} are moving from or to it", moving.join(", ")));
        }
        if !why.is_empty() {
            out.push(format!("{key} ({})", why.join(", ")));
        }
    }
    Ok(out)
}

/// The pods of federations in a member (`NS/NAME`), read with the member's own credentials.
async fn federation_pods(member: &Client) -> Result<Vec<String>, String> {
    let pods = Api::<Pod>::all(member.clone())
        .list(&ListParams::default().labels(spanset_api::labels::FEDERATION))
        .await
        .map_err(|e| format!("cannot list pods in the member: {e}"))?;
    Ok(pods.items.iter().map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())).collect())
}

/// Unjoins a member: refused while a federation places ordinals there, has moves from or to it,
/// or (with the member's credentials) while pods of a federation exist there. The MemberCluster
/// is deleted first; the controller holds it (a finalizer) while a federation still has pods or
/// moves there, and its kubeconfig Secret and the member-side identity go only once it is gone,
/// so that the controller keeps watching the member meanwhile. Waits up to `wait` for that.
pub async fn unjoin(host: &Client, member: Option<&Client>, name: &str, wait: Duration) -> Result<(), String> {
    let users = placing(host, name).await?;
    if !users.is_empty() {
        return Err(format!(
            "membercluster/{name} still holds ordinals of {}; remove it from their spec.placement and wait for the moves first",
            users.join(", ")
        ));
    }
    if let Some(member) = member {
        let pods = federation_pods(member).await?;
        if !pods.is_empty() {
            return Err(format!(
                "membercluster/{name} still runs pods of federations: {} (terminating ones may still run their \
                 containers); wait until they are gone, or force-delete those whose node is known to be dead",
                pods.join(", ")
            ));
        }
    }
    let mcs: Api<MemberCluster> = Api::all(host.clone());
    let mc = mcs.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
    if mc.is_some() {
        mcs.delete(name, &DeleteParams::default())
            .await
            .map_err(|e| format!("cannot delete MemberCluster {name}: {e}"))?;
        let start = std::time::Instant::now();
        loop {
            let left = mcs.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
            if left.is_none() {
                break;
            }
            if start.elapsed() >= wait {
                return Err(format!(
                    "membercluster/{name} is marked for deletion, but the controller still holds it (finalizer \
                     {MEMBER_FINALIZER}): a federation still has pods or moves there (`kubectl describe mc {name}` \
                     shows why); its kubeconfig Secret is kept so that the controller keeps watching the member; run \
                     `spanset unjoin {name}` again once it is gone"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    if let Some(secret) = mc.as_ref().and_then(|m| m.spec.kubeconfig_secret.clone()) {
        let secrets: Api<Secret> = Api::namespaced(host.clone(), &secret.namespace);
        let ours = secrets
            .get_opt(&secret.name)
            .await
            .map_err(|e| format!("cannot read Secret {}/{}: {e}", secret.namespace, secret.name))?
            .is_some_and(|s| s.labels().get(MEMBER_LABEL).map(String::as_str) == Some(name));
        if ours {
            secrets
                .delete(&secret.name, &DeleteParams::default())
                .await
                .map_err(|e| format!("cannot delete Secret {}/{}: {e}", secret.namespace, secret.name))?;
        }
    }
    if let Some(member) = member {
        let gone = |r: Result<_, kube::Error>, what: &str| match r {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(format!("cannot delete {what} in the member: {e}")),
        };
        let dp = DeleteParams::default();
        gone(
            Api::<ClusterRoleBinding>::all(member.clone()).delete(MEMBER_ACCOUNT, &dp).await.map(|_| ()),
            "ClusterRoleBinding",
        )?;
        gone(Api::<ClusterRole>::all(member.clone()).delete(MEMBER_ACCOUNT, &dp).await.map(|_| ()), "ClusterRole")?;
        gone(
            Api::<ServiceAccount>::namespaced(member.clone(), SYSTEM_NAMESPACE)
                .delete(MEMBER_ACCOUNT, &dp)
                .await
                .map(|_| ()),
            "ServiceAccount",
        )?;
        // The guards go with the identity they name (bindings first: a policy without its
        // binding guards nothing).
        for doc in docs(MEMBER_ADMISSION, "deploy/member/admission.yaml")?.iter().rev() {
            let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            match doc.get("kind").and_then(Value::as_str) {
                Some("ValidatingAdmissionPolicyBinding") => gone(
                    Api::<ValidatingAdmissionPolicyBinding>::all(member.clone()).delete(name, &dp).await.map(|_| ()),
                    "ValidatingAdmissionPolicyBinding",
                )?,
                Some("ValidatingAdmissionPolicy") => gone(
                    Api::<ValidatingAdmissionPolicy>::all(member.clone()).delete(name, &dp).await.map(|_| ()),
                    "ValidatingAdmissionPolicy",
                )?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// Runs `spanset join`.
pub async fn run_join(args: JoinArgs) -> i32 {
    let host_file = args.host_kubeconfig.clone().unwrap_or_else(|| args.kubeconfig.clone());
    let result = async {
        let member = host_client::client(Some(&args.kubeconfig), Some(&args.context))
            .await
            .map_err(|e| format!("--kubeconfig/--context: {e}"))?;
        let host = host_client::client(Some(&host_file), args.host_context.as_deref())
            .await
            .map_err(|e| format!("host: {e}"))?;
        join(&host, &member, &args).await
    }
    .await;
    match result {
        Ok(j) => {
            println!(
                "membercluster/{} joined: {SYSTEM_NAMESPACE}/{MEMBER_ACCOUNT} in context {}, token valid until {}, kubeconfig in Secret {}",
                args.name, args.context, j.expires, j.secret
            );
            for what in &j.not_installed {
                eprintln!("spanset: join {}: not installed: {what}", args.name);
            }
            0
        }
        Err(e) => {
            eprintln!("spanset: join {}: {e}", args.name);
            1
        }
    }
}

/// Runs `spanset unjoin`.
pub async fn run_unjoin(args: UnjoinArgs) -> i32 {
    let result = async {
        let host = host_client::client(args.host_kubeconfig.as_deref(), args.host_context.as_deref())
            .await
            .map_err(|e| format!("host: {e}"))?;
        let member = match (&args.kubeconfig, &args.context) {
            (Some(file), Some(ctx)) => Some(
                host_client::client(Some(file), Some(ctx)).await.map_err(|e| format!("--kubeconfig/--context: {e}"))?,
            ),
            _ => None,
        };
        unjoin(&host, member.as_ref(), &args.name, Duration::from_secs(args.wait)).await
    }
    .await;
    match result {
        Ok(()) => {
            println!("membercluster/{} unjoined", args.name);
            0
        }
        Err(e) => {
            eprintln!("spanset: unjoin {}: {e}", args.name);
            1
        }
    }
}
