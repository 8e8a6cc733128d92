//! The sandbox enforces every CRD it serves as kube-apiserver does: a table of invalid
//! FederatedStatefulSets and MemberClusters — one or more per field of `deploy/crds` that
//! carries a rule — each created with kube-rs and applied with three kubectl versions, each
//! refused with the apiserver's exact wording, and nothing stored. Plus the transition rules on
//! updates, unknown fields under `--validate=strict|warn|false`, defaulting, a user's own CRD
//! with a rule, a Kruise object of the wrong type and a bad status write.

use crate::support;

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams, ValidationDirective},
};
use serde_json::{Value, json};
use support::{Kubectl, Sandbox, federation::client_for};

/// The cause the apiserver adds when schema errors kept the CEL rules from running.
const SKIPPED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Fss,
    Member,
}

impl Which {
    fn kind(self) -> &'static str {
        match self {
            Which::Fss => "FederatedStatefulSet",
            Which::Member => "MemberCluster",
        }
    }

    fn api(self, client: &Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("spanset.dev", "v1alpha1", self.kind());
        match self {
            Which::Fss => Api::namespaced_with(
                client.clone(),
                "default",
                &ApiResource::from_gvk_with_plural(&gvk, "federatedstatefulsets"),
            ),
            Which::Member => Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "memberclusters")),
        }
    }

    fn valid(self, name: &str) -> Value {
        match self {
            Which::Fss => json!({
                "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "placement": {"clusters": [{"name": "a"}, {"name": "b"}]},
                    "template": {
                        "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
                    },
                },
            }),
            Which::Member => json!({
                "apiVersion": "spanset.dev/v1alpha1", "kind": "MemberCluster",
                "metadata": {"name": name}, "spec": {"context": "a"},
            }),
        }
    }
}

/// One invalid object: how it differs from a valid one, and the causes the apiserver lists.
struct Case {
    what: &'static str,
    which: Which,
    edit: fn(&mut Value),
    causes: Vec<String>,
}

fn case(what: &'static str, which: Which, edit: fn(&mut Value), causes: &[&str]) -> Case {
    Case { what, which, edit, causes: causes.iter().map(|c| c.to_string()).collect() }
}

fn fss(what: &'static str, edit: fn(&mut Value), causes: &[&str]) -> Case {
    case(what, Which::Fss, edit, causes)
}

fn spec(o: &mut Value) -> &mut Value {
    &mut o["spec"]
}

fn clusters(o: &mut Value) -> &mut Value {
    &mut o["spec"]["placement"]["clusters"]
}

fn remove(o: &mut Value, key: &str) {
    o.as_object_mut().expect("an object").remove(key);
}

/// The invalid creations: every field of the CRDs that carries a rule.
fn creations() -> Vec<Case> {
    vec![
        fss(
            "replicas below its minimum",
            |o| spec(o)["replicas"] = json!(-1),
            &[
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
                // The `/scale` subresource's own check of its replicas path, schema or not.
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                r#"spec: Invalid value: "object": spec.placement.clusters: the sum of minReplicas exceeds spec.replicas"#,
            ],
        ),
        fss(
            "replicas of the wrong type",
            |o| spec(o)["replicas"] = json!("three"),
            &[
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: three is of the type string, expected int64",
                SKIPPED,
            ],
        ),
        fss("replicas missing", |o| remove(spec(o), "replicas"), &["spec.replicas: Required value", SKIPPED]),
        fss("spec missing", |o| remove(o, "spec"), &["spec: Required value", SKIPPED]),
        fss(
            "backend not a workload API",
            |o| spec(o)["backend"] = json!("Deployment"),
            &[
                r#"spec.backend: Unsupported value: "Deployment": supported values: "StatefulSet", "AdvancedStatefulSet""#,
                SKIPPED,
            ],
        ),
        fss(
            "disruption with both bounds",
            |o| spec(o)["disruption"] = json!({"maxUnavailable": 1, "minAvailable": 1}),
            &[
                r#"spec.disruption: Invalid value: "object": spec.disruption: set exactly one of maxUnavailable and minAvailable"#,
            ],
        ),
        fss(
            "disruption bound neither integer nor string",
            |o| spec(o)["disruption"] = json!({"maxUnavailable": true}),
            &[
                r#"spec.disruption.maxUnavailable: Invalid value: "boolean": spec.disruption.maxUnavailable in body must be of type integer,string: "boolean""#,
                SKIPPED,
            ],
        ),
        fss(
            "fenceAfterSeconds below 1",
            |o| spec(o)["failover"] = json!({"fenceAfterSeconds": 0}),
            &[
                "spec.failover.fenceAfterSeconds: Invalid value: 0: spec.failover.fenceAfterSeconds in body should be greater than or equal to 1",
            ],
        ),
        fss(
            "failover policy unknown",
            |o| spec(o)["failover"] = json!({"policy": "Sometimes"}),
            &[
                r#"spec.failover.policy: Unsupported value: "Sometimes": supported values: "Manual", "Automatic""#,
                SKIPPED,
            ],
        ),
        fss(
            "unreachableAfterSeconds below 1",
            |o| spec(o)["failover"] = json!({"unreachableAfterSeconds": 0}),
            &[
                "spec.failover.unreachableAfterSeconds: Invalid value: 0: spec.failover.unreachableAfterSeconds in body should be greater than or equal to 1",
            ],
        ),
        fss(
            "identityGate unknown",
            |o| spec(o)["identityGate"] = json!("Maybe"),
            &[r#"spec.identityGate: Unsupported value: "Maybe": supported values: "Enabled", "Disabled""#, SKIPPED],
        ),
        fss(
            "carried object without a name",
            |o| spec(o)["migration"] = json!({"carry": [{"kind": "ConfigMap"}]}),
            &["spec.migration.carry[0].name: Required value", SKIPPED],
        ),
        fss(
            "maxConcurrentMoves below 1",
            |o| spec(o)["migration"] = json!({"maxConcurrentMoves": 0}),
            &[
                "spec.migration.maxConcurrentMoves: Invalid value: 0: spec.migration.maxConcurrentMoves in body should be greater than or equal to 1",
            ],
        ),
        fss(
            "staleClaims unknown",
            |o| spec(o)["migration"] = json!({"staleClaims": "Keep"}),
            &[
                r#"spec.migration.staleClaims: Unsupported value: "Keep": supported values: "Release", "Delete""#,
                SKIPPED,
            ],
        ),
        fss(
            "storage unknown",
            |o| spec(o)["migration"] = json!({"storage": "Copy"}),
            &[r#"spec.migration.storage: Unsupported value: "Copy": supported values: "Detached", "Move""#, SKIPPED],
        ),
        fss(
            "Move storage with claims deleted on scale-down",
            |o| {
                spec(o)["migration"] = json!({"storage": "Move"});
                spec(o)["template"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenScaled": "Delete"});
            },
            &[
                r#"spec: Invalid value: "object": spec.migration.storage: Move cannot be combined with spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete (the source would delete a moving ordinal's claim, and its volume, before the handover); set whenScaled to Retain or storage to Detached"#,
            ],
        ),
        fss(
            "ordinals without a start",
            |o| spec(o)["ordinals"] = json!({}),
            &["spec.ordinals.start: Required value", SKIPPED],
        ),
        fss(
            "ordinals start below 0",
            |o| spec(o)["ordinals"] = json!({"start": -1}),
            &[
                "spec.ordinals.start: Invalid value: -1: spec.ordinals.start in body should be greater than or equal to 0",
            ],
        ),
        fss(
            "ordinals past int32",
            |o| spec(o)["ordinals"] = json!({"start": 2147483646}),
            &[r#"spec: Invalid value: "object": spec.ordinals.start: start + replicas must stay within int32"#],
        ),
        fss("placement missing", |o| remove(spec(o), "placement"), &["spec.placement: Required value", SKIPPED]),
        fss(
            "no clusters",
            |o| *clusters(o) = json!([]),
            &[
                "spec.placement.clusters: Invalid value: 0: spec.placement.clusters in body should have at least 1 items",
                r#"spec.placement: Invalid value: "object": spec.placement.clusters: at least one cluster needs a weight above 0"#,
            ],
        ),
        fss(
            "more than 100 clusters",
            |o| {
                *clusters(o) = Value::Array((0..101).map(|i| json!({"name": format!("c{i}")})).collect());
            },
            &["spec.placement.clusters: Too many: 101: must have at most 100 items", SKIPPED],
        ),
        fss(
            "cluster without a name",
            |o| *clusters(o) = json!([{"weight": 1}]),
            &["spec.placement.clusters[0].name: Required value", SKIPPED],
        ),
        fss(
            "cluster name empty",
            |o| *clusters(o) = json!([{"name": ""}]),
            &[
                r#"spec.placement.clusters[0].name: Invalid value: "": spec.placement.clusters[0].name in body should be at least 1 chars long"#,
            ],
        ),
        fss(
            "cluster name too long",
            |o| *clusters(o) = json!([{"name": "c".repeat(64)}]),
            &["spec.placement.clusters[0].name: Too long: may not be more than 63 bytes", SKIPPED],
        ),
        fss(
            "cluster weight below 0",
            |o| *clusters(o) = json!([{"name": "a", "weight": -1}]),
            &[
                "spec.placement.clusters[0].weight: Invalid value: -1: spec.placement.clusters[0].weight in body should be greater than or equal to 0",
                r#"spec.placement: Invalid value: "object": spec.placement.clusters: at least one cluster needs a weight above 0"#,
            ],
        ),
        fss(
            "cluster minReplicas below 0",
            |o| *clusters(o) = json!([{"name": "a", "minReplicas": -1}]),
            &[
                "spec.placement.clusters[0].minReplicas: Invalid value: -1: spec.placement.clusters[0].minReplicas in body should be greater than or equal to 0",
            ],
        ),
        fss(
            "cluster maxReplicas below 0",
            |o| *clusters(o) = json!([{"name": "a", "maxReplicas": -1}]),
            &[
                "spec.placement.clusters[0].maxReplicas: Invalid value: -1: spec.placement.clusters[0].maxReplicas in body should be greater than or equal to 0",
            ],
        ),
        fss(
            "cluster minReplicas above maxReplicas",
            |o| *clusters(o) = json!([{"name": "a", "minReplicas": 2, "maxReplicas": 1}]),
            &[r#"spec.placement.clusters[0]: Invalid value: "object": minReplicas must not exceed maxReplicas"#],
        ),
        fss(
            "cluster named twice",
            |o| *clusters(o) = json!([{"name": "a"}, {"name": "a"}]),
            &[r#"spec.placement: Invalid value: "object": spec.placement.clusters: cluster names must be unique"#],
        ),
        fss(
            "every weight 0",
            |o| *clusters(o) = json!([{"name": "a", "weight": 0}]),
            &[
                r#"spec.placement: Invalid value: "object": spec.placement.clusters: at least one cluster needs a weight above 0"#,
            ],
        ),
        fss(
            "minReplicas summing above replicas",
            |o| *clusters(o) = json!([{"name": "a", "minReplicas": 2}, {"name": "b", "minReplicas": 2}]),
            &[
                r#"spec: Invalid value: "object": spec.placement.clusters: the sum of minReplicas exceeds spec.replicas"#,
            ],
        ),
        fss(
            "onScale unknown",
            |o| spec(o)["placement"]["onScale"] = json!("Shuffle"),
            &[
                r#"spec.placement.onScale: Unsupported value: "Shuffle": supported values: "Keep", "Rebalance""#,
                SKIPPED,
            ],
        ),
        fss("template missing", |o| remove(spec(o), "template"), &["spec.template: Required value", SKIPPED]),
        fss(
            "template without serviceName",
            |o| remove(&mut spec(o)["template"], "serviceName"),
            &["spec.template.serviceName: Required value", SKIPPED],
        ),
        fss(
            "minReadySeconds below 0",
            |o| spec(o)["template"]["minReadySeconds"] = json!(-1),
            &[
                "spec.template.minReadySeconds: Invalid value: -1: spec.template.minReadySeconds in body should be greater than or equal to 0",
            ],
        ),
        fss(
            "whenDeleted unknown",
            |o| spec(o)["template"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenDeleted": "Keep"}),
            &[
                r#"spec.template.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: "Retain", "Delete""#,
                SKIPPED,
            ],
        ),
        fss(
            "whenScaled unknown",
            |o| spec(o)["template"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenScaled": "Keep"}),
            &[
                r#"spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: "Keep": supported values: "Retain", "Delete""#,
                SKIPPED,
            ],
        ),
        fss(
            "selector expression without an operator",
            |o| spec(o)["template"]["selector"] = json!({"matchExpressions": [{"key": "app"}]}),
            &["spec.template.selector.matchExpressions[0].operator: Required value", SKIPPED],
        ),
        fss(
            "partition below 0",
            |o| spec(o)["template"]["updateStrategy"] = json!({"rollingUpdate": {"partition": -1}}),
            &[
                "spec.template.updateStrategy.rollingUpdate.partition: Invalid value: -1: spec.template.updateStrategy.rollingUpdate.partition in body should be greater than or equal to 0",
            ],
        ),
        fss(
            "podUpdatePolicy unknown",
            |o| spec(o)["template"]["updateStrategy"] = json!({"rollingUpdate": {"podUpdatePolicy": "Now"}}),
            &[
                r#"spec.template.updateStrategy.rollingUpdate.podUpdatePolicy: Unsupported value: "Now": supported values: "ReCreate", "InPlaceIfPossible", "InPlaceOnly""#,
                SKIPPED,
            ],
        ),
        fss(
            "podUpdatePolicy without Advanced StatefulSets",
            |o| {
                spec(o)["template"]["updateStrategy"] =
                    json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}})
            },
            &[
                r#"spec: Invalid value: "object": spec.template: podUpdatePolicy and scaleStrategy are only for spec.backend AdvancedStatefulSet"#,
            ],
        ),
        fss(
            "update strategy unknown",
            |o| spec(o)["template"]["updateStrategy"] = json!({"type": "BlueGreen"}),
            &[
                r#"spec.template.updateStrategy.type: Unsupported value: "BlueGreen": supported values: "RollingUpdate", "OnDelete""#,
                SKIPPED,
            ],
        ),
        fss(
            "name longer than 52",
            |o| o["metadata"]["name"] = json!("n".repeat(53)),
            &[r#"<nil>: Invalid value: "object": metadata.name: must be no more than 52 characters"#],
        ),
        case(
            "member with context and kubeconfigSecret",
            Which::Member,
            |o| {
                spec(o)["kubeconfigSecret"] = json!({"name": "k", "namespace": "spanset-system"});
            },
            &[r#"spec: Invalid value: "object": spec: set exactly one of kubeconfigSecret and context"#],
        ),
        case(
            "member with neither",
            Which::Member,
            |o| remove(spec(o), "context"),
            &[r#"spec: Invalid value: "object": spec: set exactly one of kubeconfigSecret and context"#],
        ),
        case(
            "member secret without a namespace",
            Which::Member,
            |o| *spec(o) = json!({"kubeconfigSecret": {"name": "k"}}),
            &["spec.kubeconfigSecret.namespace: Required value", SKIPPED],
        ),
        case(
            "member fenced not a boolean",
            Which::Member,
            |o| spec(o)["fenced"] = json!("often"),
            &[
                r#"spec.fenced: Invalid value: "string": spec.fenced in body must be of type boolean: "string""#,
                SKIPPED,
            ],
        ),
        case("member spec missing", Which::Member, |o| remove(o, "spec"), &["spec: Required value", SKIPPED]),
    ]
}

/// The transition rules: a valid object changed in a field that may not change.
fn transitions() -> Vec<Case> {
    vec![
        fss(
            "selector changed",
            |o| spec(o)["template"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}}),
            &[r#"spec.template: Invalid value: "object": spec.template.selector is immutable"#],
        ),
        fss(
            "serviceName changed",
            |o| spec(o)["template"]["serviceName"] = json!("other"),
            &[r#"spec.template: Invalid value: "object": spec.template.serviceName is immutable"#],
        ),
        fss(
            "volumeClaimTemplates changed",
            |o| {
                spec(o)["template"]["volumeClaimTemplates"] =
                    json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]);
            },
            &[r#"spec.template: Invalid value: "object": spec.template.volumeClaimTemplates is immutable"#],
        ),
        fss(
            "backend changed",
            |o| spec(o)["backend"] = json!("AdvancedStatefulSet"),
            &[
                r#"spec: Invalid value: "object": spec.backend is immutable: the member StatefulSets of one API are not converted into the other; delete the federation and create it again"#,
            ],
        ),
    ]
}

/// The Status message of a refusal (`Kind.group "name" is invalid: …`).
fn status_message(kind: &str, group: &str, name: &str, causes: &[String]) -> String {
    let body = match causes {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind}.{group} \"{name}\" is invalid: {body}")
}

/// What kubectl prints for it.
fn kubectl_message(kind: &str, name: &str, causes: &[String]) -> String {
    match causes {
        [one] => format!("The {kind} \"{name}\" is invalid: {one}\n"),
        many => format!(
            "The {kind} \"{name}\" is invalid: \n{}",
            many.iter().map(|c| format!("* {c}\n")).collect::<String>()
        ),
    }
}

/// kubectl 1.27, 1.30 and the newest on PATH.
fn kubectls(sandbox: &Sandbox) -> Vec<(String, Kubectl)> {
    let mut out: Vec<(String, Kubectl)> =
        [27, 30].into_iter().filter_map(|m| Some((format!("kubectl 1.{m}"), Kubectl::new(m, sandbox)?))).collect();
    out.push(("kubectl".into(), Kubectl::on_path(sandbox)));
    out
}

fn yaml(v: &Value) -> String {
    serde_yaml::to_string(v).expect("JSON is YAML")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn api_status(r: Result<DynamicObject, kube::Error>, what: &str) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}

async fn absent(api: &Api<DynamicObject>, name: &str, what: &str) {
    match api.get(name).await {
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        other => panic!("{what}: a refused object must not be stored, found {other:?}"),
    }
}

struct Setup {
    sandbox: Sandbox,
    client: Client,
    kubectls: Vec<(String, Kubectl)>,
}

async fn setup(flags: &[&str]) -> Setup {
    let sandbox = Sandbox::start_with("host", flags);
    let kubectls = kubectls(&sandbox);
    let (_, k) = kubectls.last().expect("kubectl on PATH");
    k.ok_with_stdin(&["apply", "-f", "-"], &spanset_api::crds_yaml());
    for crd in ["federatedstatefulsets.spanset.dev", "memberclusters.spanset.dev"] {
        k.ok(&["wait", "--for=condition=Established", &format!("crd/{crd}"), "--timeout=60s"]);
    }
    let client = client_for(&sandbox.kubeconfig, "host").await;
    Setup { sandbox, client, kubectls }
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_objects_are_refused_with_the_apiservers_wording_and_nothing_is_stored() {
    let Setup { sandbox: _sandbox, client, kubectls } = setup(&[]).await;
    let cases = creations();
    assert!(cases.len() >= 20);
    for (i, c) in cases.iter().enumerate() {
        let mut obj = c.which.valid(&format!("bad-{i}"));
        (c.edit)(&mut obj);
        let name = obj["metadata"]["name"].as_str().expect("a name").to_string();
        let api = c.which.api(&client);
        let what = format!("{} ({})", c.what, c.which.kind());
        let sent: DynamicObject = serde_json::from_value(obj.clone()).expect("a dynamic object");
        let s = api_status(api.create(&PostParams::default(), &sent).await, &what).await;
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{what}: {s:?}");
        assert_eq!(s.message, status_message(c.which.kind(), "spanset.dev", &name, &c.causes), "{what}: kube-rs");
        absent(&api, &name, &what).await;
        for (version, k) in &kubectls {
            let out = k.run_with_stdin(&["apply", "-f", "-"], &yaml(&obj));
            assert!(!out.status.success(), "{what}: {version} apply must fail");
            assert_eq!(stderr(&out), kubectl_message(c.which.kind(), &name, &c.causes), "{what}: {version}");
            absent(&api, &name, &format!("{what} with {version}")).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn immutable_fields_are_refused_on_update_and_the_object_is_unchanged() {
    let Setup { sandbox: _sandbox, client, kubectls } = setup(&[]).await;
    for (i, c) in transitions().iter().enumerate() {
        let name = format!("keep-{i}");
        let valid = c.which.valid(&name);
        let (_, newest) = kubectls.last().expect("kubectl");
        newest.ok_with_stdin(&["apply", "-f", "-"], &yaml(&valid));
        let api = c.which.api(&client);
        let before = api.get(&name).await.expect("created");
        let mut changed = valid.clone();
        (c.edit)(&mut changed);
        for (version, k) in &kubectls {
            let out = k.run_with_stdin(&["apply", "-f", "-"], &yaml(&changed));
            assert!(!out.status.success(), "{}: {version} apply must fail", c.what);
            assert_eq!(stderr(&out), kubectl_message(c.which.kind(), &name, &c.causes), "{}: {version}", c.what);
        }
        let mut replaced: DynamicObject = serde_json::from_value(changed).expect("a dynamic object");
        replaced.metadata = before.metadata.clone();
        let s = api_status(api.replace(&name, &PostParams::default(), &replaced).await, c.what).await;
        assert_eq!(s.message, status_message(c.which.kind(), "spanset.dev", &name, &c.causes), "{}: kube-rs", c.what);
        let after = api.get(&name).await.expect("still there");
        assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "{}: unchanged", c.what);
        assert_eq!(after.data, before.data, "{}: unchanged", c.what);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_fields_follow_the_field_validation_directive() {
    let Setup { sandbox: _sandbox, client, kubectls } = setup(&[]).await;
    let api = Which::Fss.api(&client);
    let with_typo = |name: &str| {
        let mut o = Which::Fss.valid(name);
        o["spec"]["replica"] = json!(5);
        o
    };
    let refusal = r#"FederatedStatefulSet in version "v1alpha1" cannot be handled as a FederatedStatefulSet: strict decoding error: unknown field "spec.replica""#;
    for (i, (version, k)) in kubectls.iter().enumerate() {
        let strict = format!("strict-{i}");
        let out = k.run_with_stdin(&["apply", "--validate=strict", "-f", "-"], &yaml(&with_typo(&strict)));
        assert!(!out.status.success(), "{version}: strict must refuse");
        assert_eq!(
            stderr(&out),
            format!("Error from server (BadRequest): error when creating \"STDIN\": {refusal}\n"),
            "{version}"
        );
        absent(&api, &strict, version).await;
        // Default for kubectl is strict too.
        let out = k.run_with_stdin(&["apply", "-f", "-"], &yaml(&with_typo(&strict)));
        assert!(!out.status.success(), "{version}: kubectl's default is strict");

        let warn = format!("warn-{i}");
        let out = k.run_with_stdin(&["apply", "--validate=warn", "-f", "-"], &yaml(&with_typo(&warn)));
        assert!(out.status.success(), "{version}: warn stores: {}", stderr(&out));
        assert_eq!(stderr(&out), "Warning: unknown field \"spec.replica\"\n", "{version}");
        let stored = api.get(&warn).await.expect("stored");
        assert!(stored.data["spec"].get("replica").is_none(), "{version}: stored pruned");
        assert_eq!(stored.data["spec"]["replicas"], 3);

        let quiet = format!("quiet-{i}");
        let out = k.run_with_stdin(&["apply", "--validate=false", "-f", "-"], &yaml(&with_typo(&quiet)));
        assert!(out.status.success(), "{version}: false stores: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{version}: silently");
        assert!(api.get(&quiet).await.expect("stored").data["spec"].get("replica").is_none());
    }
    // kube-rs: no directive is the apiserver's Warn (stored pruned); Strict refuses a patch.
    let created = api
        .create(&PostParams::default(), &serde_json::from_value(with_typo("kube-warn")).unwrap())
        .await
        .expect("stored with a warning");
    assert!(created.data["spec"].get("replica").is_none());
    let before = api.get("kube-warn").await.expect("stored");
    let strict = PatchParams { field_validation: Some(ValidationDirective::Strict), ..PatchParams::default() };
    let typo = json!({"spec": {"replica": 4}});
    let s = api_status(api.patch("kube-warn", &strict, &Patch::Merge(&typo)).await, "strict merge patch").await;
    assert_eq!((s.code, s.message.as_str()), (400, refusal));
    let after = api.get("kube-warn").await.expect("still there");
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "unchanged");
    // Server-side apply types the applied configuration first: undeclared fields always fail.
    let ssa = PatchParams::apply("test");
    let s = api_status(api.patch("kube-ssa", &ssa, &Patch::Apply(with_typo("kube-ssa"))).await, "apply").await;
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            500,
            "failed to create typed patch object (default/kube-ssa; spanset.dev/v1alpha1, Kind=FederatedStatefulSet): .spec.replica: field not declared in schema"
        )
    );
    absent(&api, "kube-ssa", "server-side apply").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn valid_objects_round_trip_with_their_defaults_and_bad_status_writes_are_refused() {
    let Setup { sandbox: _sandbox, client, kubectls } = setup(&[]).await;
    let api = Which::Fss.api(&client);
    let (_, k) = kubectls.last().expect("kubectl");
    // The shipped examples pass kubectl's strict validation, and round-trip unchanged.
    for file in ["federatedstatefulset.yaml", "advanced-statefulset.yaml", "etcd.yaml"] {
        let path = format!("{}/examples/{file}", env!("CARGO_MANIFEST_DIR"));
        let example = std::fs::read_to_string(&path).expect("the example");
        let out = k.run_with_stdin(&["apply", "--validate=strict", "-f", "-"], &example);
        assert!(out.status.success() && stderr(&out).is_empty(), "{file}: {}", stderr(&out));
        let sent: Value = serde_yaml::from_str(&example).expect("YAML");
        let name = sent["metadata"]["name"].as_str().expect("a name");
        let stored = api.get(name).await.expect("stored");
        for (field, value) in sent["spec"].as_object().expect("a spec") {
            assert_eq!(&stored.data["spec"][field], value, "{file}: spec.{field} kept as sent");
        }
    }
    let created = api.create(&PostParams::default(), &serde_json::from_value(Which::Fss.valid("web")).unwrap()).await;
    let created = created.expect("a valid object is stored");
    assert_eq!(created.data["spec"]["backend"], "StatefulSet", "defaulted");
    assert!(created.data["spec"]["failover"].is_object() && created.data["spec"]["migration"].is_object(), "defaulted");
    assert_eq!(created.data["spec"]["replicas"], 3);
    assert_eq!(created.data["spec"]["placement"]["clusters"], json!([{"name": "a"}, {"name": "b"}]));

    let bad = json!({"status": {"replicas": "three"}});
    let s = api_status(api.patch_status("web", &PatchParams::default(), &Patch::Merge(&bad)).await, "status").await;
    let causes = vec![
        r#"status.replicas: Invalid value: "string": status.replicas in body must be of type integer: "string""#
            .to_string(),
        // The `/scale` subresource checks its status replicas path on a status write too.
        ".status.replicas: Invalid value: 0: .status.replicas accessor error: three is of the type string, expected int64"
            .to_string(),
        SKIPPED.to_string(),
    ];
    assert_eq!(s.message, status_message("FederatedStatefulSet", "spanset.dev", "web", &causes));
    let out = k.run(&["patch", "fsts", "web", "--subresource=status", "--type=merge", "-p", &bad.to_string()]);
    assert!(!out.status.success());
    assert_eq!(stderr(&out), kubectl_message("FederatedStatefulSet", "web", &causes));
    let good = json!({"status": {"replicas": 2}});
    let written = api.patch_status("web", &PatchParams::default(), &Patch::Merge(&good)).await.expect("a good status");
    assert_eq!(written.data["status"]["replicas"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_crd_and_kruises_are_enforced_too() {
    let Setup { sandbox: _sandbox, client, kubectls } = setup(&["--kruise"]).await;
    let (_, k) = kubectls.last().expect("kubectl");
    let widgets = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
              colour: {type: string, default: blue}
            x-kubernetes-validations:
            - rule: self.size % 2 == 0
              messageExpression: "'size must be even, not ' + string(self.size)"
"#;
    k.ok_with_stdin(&["apply", "-f", "-"], widgets);
    k.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s"]);
    let widget = |size: i64| {
        format!("apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w}}\nspec: {{size: {size}}}\n")
    };
    for (version, k) in &kubectls {
        let out = k.run_with_stdin(&["apply", "-f", "-"], &widget(3));
        assert_eq!(
            stderr(&out),
            "The Widget \"w\" is invalid: spec: Invalid value: \"object\": size must be even, not 3\n",
            "{version}"
        );
        let out = k.run_with_stdin(&["apply", "-f", "-"], &widget(12));
        assert_eq!(
            stderr(&out),
            "The Widget \"w\" is invalid: spec.size: Invalid value: 12: spec.size in body should be less than or equal to 10\n",
            "{version}"
        );
        assert!(!k.run(&["get", "widget", "w"]).status.success(), "{version}: nothing stored");
    }
    k.ok_with_stdin(&["apply", "-f", "-"], &widget(4));
    assert_eq!(k.ok(&["get", "widget", "w", "-o", "jsonpath={.spec.colour}"]), "blue", "defaulted");

    let asts = r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: two
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
"#;
    for (version, k) in &kubectls {
        let out = k.run_with_stdin(&["apply", "-f", "-"], asts);
        assert_eq!(
            stderr(&out),
            "The StatefulSet \"web\" is invalid: \n* spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"\n* .spec.replicas: Invalid value: 0: .spec.replicas accessor error: two is of the type string, expected int64\n",
            "{version}"
        );
    }
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "StatefulSet");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client, "default", &ApiResource::from_gvk_with_plural(&gvk, "statefulsets"));
    absent(&api, "web", "kruise").await;
}

/// The same table sent to a real kube-apiserver of a release the repository builds and to the
/// sandbox answering as that release (`--cluster-version host=RELEASE`): the same status code
/// and the same message for each refusal, and neither stores the object. A difference names the
/// case and both answers. Beside the table, a CRD of the test's own whose rules sit on an
/// object, an integer, a string and a map's values, where the releases differ in what they
/// show of the value (1.35 shows a scalar's value, and nothing of an object's).
#[tokio::test(flavor = "multi_thread")]
async fn a_real_1_34_apiserver_and_the_sandbox_as_1_34_refuse_alike() {
    real_apiserver_and_the_sandbox_refuse_alike(support::real_kube::OLDEST).await;
}

/// The same on the newest release built.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_1_37_apiserver_and_the_sandbox_as_1_37_refuse_alike() {
    real_apiserver_and_the_sandbox_refuse_alike(support::real_kube::NEWEST).await;
}

/// A CRD of the tests' own, with rules on nodes of each kind.
const GADGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "!has(self.size) || self.size <= 10", message: too big}
            properties:
              size:
                type: integer
                x-kubernetes-validations: [{rule: "self % 2 == 0", message: must be even}]
              name:
                type: string
                x-kubernetes-validations: [{rule: "self != 'x'", message: not x}]
              limits:
                type: object
                additionalProperties:
                  type: integer
                  x-kubernetes-validations: [{rule: "self > 0", message: positive}]
"#;

/// Invalid gadgets: what each breaks, and its spec.
fn gadgets() -> Vec<(&'static str, Value)> {
    vec![
        ("a rule on an object", json!({"size": 12})),
        ("a rule on an integer", json!({"size": 3})),
        ("a rule on a string", json!({"name": "x"})),
        ("a rule on a map's values", json!({"limits": {"cpu": -1}})),
    ]
}

/// The API of an invalid object's kind, on a client (the real apiserver's or the sandbox's).
type ApiOf = dyn Fn(&Client) -> Api<DynamicObject>;

async fn real_apiserver_and_the_sandbox_refuse_alike(release: &str) {
    let Some(binaries) = support::real_kube::binaries(release) else { return };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let options = spanset_control_plane::ClusterOptions::named("host", 1);
    let cluster =
        spanset_control_plane::RealCluster::start(&binaries, &options, dir.path()).await.expect("a real cluster");
    let k = Kubectl::at(binaries.program("kubectl"), cluster.kubeconfig().to_path_buf(), dir.path().join("cache"));
    let sandbox = setup(&["--cluster-version", &format!("host={release}.0")]).await;
    let (_, sk) = sandbox.kubectls.last().expect("kubectl on PATH");
    for (k, crds) in [(&k, spanset_api::crds_yaml()), (&k, GADGETS.to_string()), (sk, GADGETS.to_string())] {
        k.ok_with_stdin(&["apply", "-f", "-"], &crds);
    }
    for k in [&k, sk] {
        for crd in ["federatedstatefulsets.spanset.dev", "memberclusters.spanset.dev", "gadgets.example.com"] {
            k.ok(&["wait", "--for=condition=Established", &format!("crd/{crd}"), "--timeout=120s"]);
        }
    }
    let real = cluster.client().await.expect("a client");
    let gadget_api = |client: &Client| {
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
        )
    };
    let mut sent: Vec<(String, Value, Box<ApiOf>)> = vec![];
    for (i, c) in creations().into_iter().enumerate() {
        let mut obj = c.which.valid(&format!("bad-{i}"));
        (c.edit)(&mut obj);
        let which = c.which;
        sent.push((format!("{} ({})", c.what, which.kind()), obj, Box::new(move |client| which.api(client))));
    }
    for (i, (what, spec)) in gadgets().into_iter().enumerate() {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": format!("gadget-{i}"), "namespace": "default"}, "spec": spec});
        sent.push((format!("{what} (Gadget)"), obj, Box::new(gadget_api)));
    }
    let mut differences = vec![];
    for (what, obj, api_of) in &sent {
        let name = obj["metadata"]["name"].as_str().expect("a name").to_string();
        let object: DynamicObject = serde_json::from_value(obj.clone()).expect("a dynamic object");
        // The real apiserver may find the CRD's new rules not yet compiled for a moment after
        // Established; a first success would be a difference of its own, so none is retried.
        let mut answers = vec![];
        for client in [&real, &sandbox.client] {
            let api = api_of(client);
            answers.push(api_status(api.create(&PostParams::default(), &object).await, what).await);
            absent(&api, &name, what).await;
        }
        let (r, s) = (&answers[0], &answers[1]);
        if (r.code, &r.reason, &r.message) != (s.code, &s.reason, &s.message) {
            differences.push(format!(
                "{what}:\n  sandbox: {} {} {}\n  real:    {} {} {}",
                s.code, s.reason, s.message, r.code, r.reason, r.message
            ));
        }
    }
    assert!(differences.is_empty(), "{release}: {} differences:\n{}", differences.len(), differences.join("\n"));
}
