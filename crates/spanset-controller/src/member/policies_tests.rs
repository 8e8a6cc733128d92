use serde_json::json;

use super::*;

/// The shipped object `name` of `kind`.
fn one(kind: Kind, name: &str) -> &'static Shipped {
    shipped().iter().find(|s| s.kind == kind && s.name == name).unwrap_or_else(|| panic!("{name} is shipped"))
}

/// `spec` as a real apiserver (its `admissionregistration/v1` defaulters) stores it: every
/// match-resources block gets `matchPolicy`, both selectors and each rule's `scope`; a policy
/// its `failurePolicy`.
fn defaulted(kind: Kind, spec: &Value) -> Value {
    fn match_resources(m: &mut Value) {
        let o = m.as_object_mut().expect("an object");
        o.entry("matchPolicy").or_insert(json!("Equivalent"));
        o.entry("namespaceSelector").or_insert(json!({}));
        o.entry("objectSelector").or_insert(json!({}));
        for rules in ["resourceRules", "excludeResourceRules"] {
            for r in o.get_mut(rules).and_then(Value::as_array_mut).into_iter().flatten() {
                r.as_object_mut().expect("a rule").entry("scope").or_insert(json!("*"));
            }
        }
    }
    let mut spec = spec.clone();
    match kind {
        Kind::Policy => {
            spec.as_object_mut().unwrap().entry("failurePolicy").or_insert(json!("Fail"));
            match_resources(spec.get_mut("matchConstraints").expect("shipped with matchConstraints"));
        }
        Kind::Binding => {
            if let Some(m) = spec.get_mut("matchResources") {
                match_resources(m);
            }
        }
    }
    spec
}

#[test]
fn the_manifest_ships_policies_each_bound_once_under_its_own_name() {
    let all = shipped();
    let policies: Vec<&str> = all.iter().filter(|s| s.kind == Kind::Policy).map(|s| s.name.as_str()).collect();
    let bindings: Vec<&Shipped> = all.iter().filter(|s| s.kind == Kind::Binding).collect();
    assert_eq!(policies.len(), 11, "{policies:?}");
    assert_eq!(bindings.len(), policies.len());
    for b in bindings {
        assert!(policies.contains(&b.name.as_str()), "binding {} is named as its policy", b.name);
        assert_eq!(b.spec["policyName"], json!(b.name), "binding {} binds its namesake", b.name);
    }
}

/// `deploy/member/rbac.yaml` grants `get` on the guards by name, exactly the names shipped, and
/// nothing else of them: a policy added to the manifest without its name there would read as
/// unreadable in every member.
#[test]
fn the_member_role_reads_exactly_the_shipped_guards_by_name() {
    let text = include_str!("../../../../deploy/member/rbac.yaml");
    let role = serde_yaml::Deserializer::from_str(text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ClusterRole")
        .expect("the member's ClusterRole");
    let rules: Vec<&Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["apiGroups"].as_array().unwrap().iter().any(|g| g == GROUP))
        .collect();
    assert_eq!(rules.len(), 1, "one rule on {GROUP}: {rules:?}");
    let rule = rules[0];
    assert_eq!(rule["verbs"], json!(["get"]));
    assert_eq!(rule["resources"], json!([Kind::Policy.plural(), Kind::Binding.plural()]));
    let mut granted: Vec<&str> =
        rule["resourceNames"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let mut names: Vec<&str> = shipped().iter().map(|s| s.name.as_str()).collect();
    granted.sort_unstable();
    names.sort_unstable();
    names.dedup();
    assert_eq!(granted, names);
}

#[test]
fn what_the_apiserver_fills_in_or_does_not_know_is_no_alteration() {
    for s in shipped() {
        assert_eq!(differing(s.kind, &s.spec, Some(&s.spec)), Vec::<&str>::new(), "{} as written", s.name);
        let mut stored = defaulted(s.kind, &s.spec);
        if s.kind == Kind::Policy {
            assert_ne!(stored, s.spec, "{}: the defaults add something", s.name);
        }
        // A field of a newer release, unknown here, and empty fields the manifest leaves out.
        stored["someFutureField"] = json!({"enabled": true});
        stored["auditAnnotations"] = json!([]);
        if s.kind == Kind::Policy {
            stored["matchConstraints"]["excludeResourceRules"] = json!([]);
            stored["matchConstraints"]["someFutureSelector"] = json!("Everything");
        } else {
            stored["matchResources"] =
                json!({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}});
        }
        assert_eq!(differing(s.kind, &s.spec, Some(&stored)), Vec::<&str>::new(), "{} as stored", s.name);
    }
    // The actions are a set: their order says nothing.
    let b = one(Kind::Binding, "spanset-owner");
    let mut stored = b.spec.clone();
    stored["validationActions"] = json!(["Audit", "Deny"]);
    let mut two = b.spec.clone();
    two["validationActions"] = json!(["Deny", "Audit"]);
    assert_eq!(differing(Kind::Binding, &two, Some(&stored)), Vec::<&str>::new());
}

#[test]
fn each_change_of_what_is_refused_names_its_field() {
    let policy = one(Kind::Policy, "spanset-owner");
    let altered = |edit: &dyn Fn(&mut Value)| {
        let mut stored = defaulted(Kind::Policy, &policy.spec);
        edit(&mut stored);
        differing(Kind::Policy, &policy.spec, Some(&stored))
    };
    let validations = ["spec.validations"];
    assert_eq!(altered(&|s| drop(s["validations"].as_array_mut().unwrap().pop())), validations, "one removed");
    assert_eq!(altered(&|s| s["validations"][0]["expression"] = json!("true")), validations, "one loosened");
    assert_eq!(altered(&|s| s["validations"][1]["reason"] = json!("Invalid")), validations);
    assert_eq!(altered(&|s| s["failurePolicy"] = json!("Ignore")), ["spec.failurePolicy"]);
    assert_eq!(
        altered(&|s| s["matchConditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "never", "expression": "false"}))),
        ["spec.matchConditions"]
    );
    assert_eq!(altered(&|s| s["variables"] = json!([])), ["spec.variables"]);
    assert_eq!(altered(&|s| s["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"})), ["spec.paramKind"]);
    let constraints = ["spec.matchConstraints"];
    assert_eq!(altered(&|s| s["matchConstraints"]["matchPolicy"] = json!("Exact")), constraints);
    assert_eq!(
        altered(&|s| s["matchConstraints"]["namespaceSelector"] = json!({"matchLabels": {"x": "y"}})),
        constraints
    );
    assert_eq!(
        altered(
            &|s| s["matchConstraints"]["excludeResourceRules"] = json!([{"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["statefulsets"]}])
        ),
        constraints
    );
    assert_eq!(
        altered(&|s| s["matchConstraints"]["resourceRules"][0]["resourceNames"] = json!(["redis"])),
        constraints
    );
    assert_eq!(altered(&|s| s["matchConstraints"]["resourceRules"][0]["scope"] = json!("Cluster")), constraints);
    assert_eq!(altered(&|s| s["matchConstraints"]["objectSelector"] = json!({})), constraints, "its selector dropped");
    assert_eq!(
        altered(&|s| {
            s["validations"] = json!([]);
            s["failurePolicy"] = json!("Ignore");
        }),
        ["spec.validations", "spec.failurePolicy"],
        "every field, in a fixed order"
    );
    assert_eq!(
        differing(Kind::Policy, &policy.spec, None),
        ["spec.matchConstraints", "spec.validations", "spec.variables", "spec.matchConditions"],
        "no spec"
    );

    let binding = one(Kind::Binding, "spanset-owner-scale");
    let rebound = |edit: &dyn Fn(&mut Value)| {
        let mut stored = defaulted(Kind::Binding, &binding.spec);
        edit(&mut stored);
        differing(Kind::Binding, &binding.spec, Some(&stored))
    };
    assert_eq!(rebound(&|s| s["policyName"] = json!("spanset-owner")), ["spec.policyName"]);
    assert_eq!(rebound(&|s| s["validationActions"] = json!(["Warn"])), ["spec.validationActions"]);
    assert_eq!(rebound(&|s| s["validationActions"] = json!(["Deny", "Warn"])), ["spec.validationActions"]);
    assert_eq!(rebound(&|s| s["paramRef"]["parameterNotFoundAction"] = json!("Deny")), ["spec.paramRef"]);
    assert_eq!(
        rebound(&|s| s["matchResources"] = json!({"objectSelector": {"matchLabels": {"nothing": "here"}}})),
        ["spec.matchResources"],
        "a binding narrowed to nothing"
    );
    assert_eq!(
        rebound(&|s| s["matchResources"] =
            json!({"namespaceSelector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}})),
        ["spec.matchResources"]
    );
}

#[test]
fn what_is_amiss_is_named_object_by_object() {
    let missing =
        |names: &[&str]| names.iter().map(|n| (Kind::Binding, n.to_string(), Amiss::Missing)).collect::<Vec<_>>();
    assert!(Readback::of(vec![]).in_force());
    assert_eq!(Readback::of(vec![]).findings(), "");
    let one = Readback::of(missing(&["spanset-owner"]));
    assert!(!one.in_force());
    assert_eq!(one.findings(), "validatingadmissionpolicybinding spanset-owner is missing");
    assert_eq!(
        Readback::of(missing(&["spanset-owner", "spanset-owner-gates"])).findings(),
        "validatingadmissionpolicybindings spanset-owner, spanset-owner-gates are missing"
    );
    let mixed = Readback::of(vec![
        (Kind::Policy, "spanset-member-term".into(), Amiss::Altered(vec!["spec.validations"])),
        (Kind::Policy, "spanset-owner".into(), Amiss::Altered(vec!["spec.validations", "spec.failurePolicy"])),
        (Kind::Binding, "spanset-owner".into(), Amiss::Missing),
        (Kind::Policy, "spanset-owner-gates".into(), Amiss::Unreadable(403, "forbidden".into())),
    ]);
    assert_eq!(
        mixed.findings(),
        "validatingadmissionpolicybinding spanset-owner is missing; \
         validatingadmissionpolicy spanset-member-term: spec.validations differs from what spanset join installs; \
         validatingadmissionpolicy spanset-owner: spec.validations, spec.failurePolicy differ from what spanset join \
         installs; validatingadmissionpolicy spanset-owner-gates cannot be read by spanset (403: forbidden)"
    );
    let never: Vec<_> = shipped().iter().map(|s| (s.kind, s.name.clone(), Amiss::Missing)).collect();
    assert_eq!(
        Readback::of(never).findings(),
        "none of the 11 validatingadmissionpolicies and 11 validatingadmissionpolicybindings that spanset join \
         installs is there"
    );
    let failed = Readback::Failed("connection refused".into());
    assert!(!failed.in_force());
    assert_eq!(failed.findings(), "spanset could not read them back (connection refused)");
}
