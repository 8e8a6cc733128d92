//! Structured logs: `spanset run --log-format json` writes one JSON object per line, reconciles
//! and member writes carry spans with the federation, cluster and ordinals, and neither a
//! bearer token of the kubeconfig nor a carried Secret's data is ever logged, even at debug
//! level for every crate.

use crate::support;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::PostParams};
use spanset::cli::sandbox::example;
use support::federation::{Controller, Federation};

const TOKEN: &str = "tok-3f9a7c1e-never-logged";
const PASSWORD: &str = "pw-81d2-never-logged";

fn with_token(kubeconfig: &str) -> String {
    let mut doc: serde_json::Value = serde_yaml::from_str(kubeconfig).expect("kubeconfig is YAML");
    for user in doc["users"].as_array_mut().expect("users") {
        user["user"]["token"] = TOKEN.into();
    }
    serde_yaml::to_string(&doc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_reconcile_and_member_write_spans_and_never_a_token_or_secret() {
    // Without --auth whatever SPANSET_TEST_AUTH says: the test puts its own token in the kubeconfig.
    let f = Federation::start_with(&["east", "west"], &[]).await;
    let text = std::fs::read_to_string(&f.sandbox.kubeconfig).unwrap();
    std::fs::write(&f.sandbox.kubeconfig, with_token(&text)).unwrap();
    let c = Controller::start_full(&f.sandbox, "controller", &[("RUST_LOG", "debug")], &["--log-format", "json"]);
    let mut secret = Secret::default();
    secret.metadata.name = Some("redis-auth".into());
    // Its owner lets federations carry it.
    secret.metadata.labels = Some([("spanset.dev/carry".to_string(), "true".to_string())].into());
    secret.string_data = Some([("password".to_string(), PASSWORD.to_string())].into());
    Api::<Secret>::namespaced(f.host.clone(), "default").create(&PostParams::default(), &secret).await.unwrap();
    let mut fsts = example(&f.members);
    fsts.spec.migration.carry = vec![spanset_api::CarriedObject { kind: "Secret".into(), name: "redis-auth".into() }];
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "slices 0-2, 3-5").await;

    let log = c.log_text();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty());
    let in_span = |name: &str, pred: &dyn Fn(&serde_json::Value) -> bool| {
        lines.iter().any(|l| l["spans"].as_array().into_iter().flatten().any(|s| s["name"] == name && pred(s)))
    };
    assert!(
        in_span("reconcile", &|s| s["federation"] == "default/redis" && s["term"].is_u64()),
        "no event inside a reconcile span: {log}"
    );
    assert!(
        in_span("member_write", &|s| s["cluster"] == "west"
            && s["federation"] == "default/redis"
            && s["ordinals"] == "3-5"),
        "no event inside a member_write span for west's 3-5: {log}"
    );
    assert!(!log.contains(TOKEN), "the kubeconfig's token was logged");
    assert!(!log.contains(PASSWORD), "a carried Secret's data was logged");
    use base64::Engine;
    assert!(!log.contains(&base64::engine::general_purpose::STANDARD.encode(PASSWORD)), "Secret data (base64) logged");
}
