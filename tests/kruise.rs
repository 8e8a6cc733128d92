//! The simulated OpenKruise (`spanset sim --kruise`, issue 10 item 1, first part): the Advanced
//! StatefulSet CRD with its short name and printer columns, and the documented
//! `reserveOrdinals` examples replayed through kubectl — replicas 4 reserving [1] runs
//! 0,2,3,4; reserving 3 as well runs 0,2,4,5; and with replicas 3, 0,2,4.

mod support;

use support::{DEADLINE, Kubectl, Sandbox, wait_until};

const ASTS: &str = r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: sample
spec:
  replicas: 4
  reserveOrdinals: [1]
  serviceName: sample
  selector:
    matchLabels: {app: sample}
  template:
    metadata:
      labels: {app: sample}
    spec:
      containers:
      - name: main
        image: nginx:alpine
"#;

fn pods(k: &Kubectl) -> Vec<String> {
    let mut names: Vec<String> = k
        .ok(&["get", "pods", "-l", "app=sample", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"])
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

fn runs(k: &Kubectl, want: &[u32], what: &str) {
    let want: Vec<String> = want.iter().map(|o| format!("sample-{o}")).collect();
    wait_until(what, DEADLINE, || pods(k) == want);
}

fn reserve_ordinals_as_documented(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--kruise"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], ASTS);
    runs(&k, &[0, 2, 3, 4], "replicas 4, reserveOrdinals [1]: 0,2,3,4");
    k.ok(&["patch", "asts", "sample", "--type", "merge", "-p", r#"{"spec":{"reserveOrdinals":[1,3]}}"#]);
    runs(&k, &[0, 2, 4, 5], "reserving 3 as well: 0,2,4,5");
    k.ok(&["patch", "asts", "sample", "--type", "merge", "-p", r#"{"spec":{"replicas":3}}"#]);
    runs(&k, &[0, 2, 4], "replicas 3: 0,2,4");
    wait_until("the status counts three ready", DEADLINE, || {
        k.ok(&["get", "asts", "sample", "-o", "jsonpath={.status.readyReplicas} {.status.labelSelector}"])
            == "3 app=sample"
    });
    let table = k.ok(&["get", "asts"]);
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "DESIRED", "CURRENT", "UPDATED", "READY", "AVAILABLE", "AGE"],
        "kubectl 1.{minor}:\n{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(row.get(..6), Some(&["sample", "3", "3", "3", "3", "3"][..]), "kubectl 1.{minor}:\n{table}");
    // The scale subresource works through the short name.
    k.ok(&["scale", "asts", "sample", "--replicas", "2"]);
    runs(&k, &[0, 2], "scaled to 2: 0,2");
    // Pods name their owner as Kruise's StatefulSet.
    let owner = k.ok(&["get", "pod", "sample-0", "-o", "jsonpath={.metadata.ownerReferences[0].apiVersion}"]);
    assert_eq!(owner, "apps.kruise.io/v1beta1");
}

#[test]
fn reserve_ordinals_1_27() {
    reserve_ordinals_as_documented(27);
}

#[test]
fn reserve_ordinals_1_33() {
    reserve_ordinals_as_documented(33);
}
