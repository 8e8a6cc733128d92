//! Unit tests of CRD schema enforcement, one per keyword, against the apiserver's wording.

use serde_json::{Value, json};

use super::*;

fn schema(s: Value) -> CrdSchema {
    CrdSchema::new(&s)
}

/// The errors of a create, as the apiserver prints them.
fn errors(s: &CrdSchema, obj: Value) -> Vec<String> {
    s.validate(&obj, None, Part::Whole, None, ShownValue::SchemaType).iter().map(ToString::to_string).collect()
}

fn fss() -> CrdSchema {
    let crd: Value =
        serde_yaml::from_str(include_str!("../../../../../deploy/crds/federatedstatefulsets.spanset.dev.yaml"))
            .expect("the CRD is YAML");
    CrdSchema::new(crd.pointer("/spec/versions/0/schema/openAPIV3Schema").expect("a schema"))
}

fn valid_fss() -> Value {
    json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "placement": {"clusters": [{"name": "a"}, {"name": "b"}]},
            "template": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
        },
    })
}

#[test]
fn types_are_checked_with_the_given_type_named() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer"}, "f": {"type": "number"}, "io": {"x-kubernetes-int-or-string": true}}}}}));
    assert_eq!(
        errors(&s, json!({"spec": {"n": "one"}})),
        [r#"spec.n: Invalid value: "string": spec.n in body must be of type integer: "string""#]
    );
    assert_eq!(
        errors(&s, json!({"spec": {"n": 1.5}})),
        [r#"spec.n: Invalid value: "number": spec.n in body must be of type integer: "number""#]
    );
    assert!(errors(&s, json!({"spec": {"n": 2, "f": 2, "io": "50%"}})).is_empty());
    assert_eq!(
        errors(&s, json!({"spec": {"io": true}})),
        [r#"spec.io: Invalid value: "boolean": spec.io in body must be of type integer,string: "boolean""#]
    );
    let e = s.validate(&json!({"spec": {"n": "x"}}), None, Part::Whole, None, ShownValue::SchemaType);
    assert_eq!(e[0].cause_reason(), "FieldValueTypeInvalid");
}

#[test]
fn bounds_lengths_patterns_and_enums_are_worded_as_kube_openapi_words_them() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "min": {"type": "integer", "minimum": 0.0}, "max": {"type": "integer", "maximum": 1000000.0},
        "xmin": {"type": "integer", "minimum": 1.0, "exclusiveMinimum": true},
        "name": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"},
        "kind": {"type": "string", "enum": ["StatefulSet", "AdvancedStatefulSet"]},
        "when": {"type": "string", "format": "date-time"}}}}}));
    let one = |spec: Value| errors(&s, json!({"spec": spec}));
    assert_eq!(
        one(json!({"min": -1})),
        ["spec.min: Invalid value: -1: spec.min in body should be greater than or equal to 0"]
    );
    assert_eq!(
        one(json!({"max": 2000000})),
        ["spec.max: Invalid value: 2000000: spec.max in body should be less than or equal to 1e+06"]
    );
    assert_eq!(one(json!({"xmin": 1})), ["spec.xmin: Invalid value: 1: spec.xmin in body should be greater than 1"]);
    assert_eq!(
        one(json!({"name": ""})),
        [
            r#"spec.name: Invalid value: "": spec.name in body should be at least 1 chars long"#,
            r#"spec.name: Invalid value: "": spec.name in body should match '^[a-z]+$'"#
        ]
    );
    assert_eq!(one(json!({"name": "abcd"})), ["spec.name: Too long: may not be more than 3 bytes"]);
    assert_eq!(
        one(json!({"kind": "Deployment"})),
        [r#"spec.kind: Unsupported value: "Deployment": supported values: "StatefulSet", "AdvancedStatefulSet""#]
    );
    assert_eq!(
        one(json!({"when": "yesterday"})),
        [r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#]
    );
    assert!(one(json!({"when": "2026-01-01T00:00:00Z", "name": "ab", "kind": "StatefulSet"})).is_empty());
}

#[test]
fn required_items_and_list_types() {
    let s = schema(json!({"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object",
        "required": ["a"], "properties": {"a": {"type": "string"},
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}}));
    assert_eq!(errors(&s, json!({})), ["spec: Required value"]);
    assert_eq!(errors(&s, json!({"spec": {}})), ["spec.a: Required value"]);
    assert_eq!(
        errors(&s, json!({"spec": {"a": "x", "l": []}})),
        ["spec.l: Invalid value: 0: spec.l in body should have at least 1 items"]
    );
    assert_eq!(
        errors(&s, json!({"spec": {"a": "x", "l": ["1", "2", "3"]}})),
        ["spec.l: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(errors(&s, json!({"spec": {"a": "x", "set": ["1", "1"]}})), [r#"spec.set[1]: Duplicate value: "1""#]);
    assert_eq!(
        errors(&s, json!({"spec": {"a": "x", "m": [{"name": "a"}, {"name": "a"}]}})),
        [r#"spec.m[1]: Duplicate value: map[string]string{"name":"a"}"#]
    );
    assert_eq!(
        errors(&s, json!({"spec": {"a": "x", "l": [1]}})),
        [r#"spec.l[0]: Invalid value: "integer": spec.l[0] in body must be of type string: "integer""#]
    );
}

#[test]
fn nullable_and_embedded_resources() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "opt": {"type": "string", "nullable": true},
        "obj": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}}}));
    assert!(errors(&s, json!({"spec": {"opt": null}})).is_empty());
    assert_eq!(
        errors(&s, json!({"spec": {"obj": {"metadata": {}}}})),
        ["spec.obj.apiVersion: Required value: must not be empty", "spec.obj.kind: Required value: must not be empty"]
    );
}

#[test]
fn unknown_fields_are_pruned_refused_or_reported_per_directive() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}));
    let obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "bogus": 1},
        "spec": {"replica": 3, "free": {"anything": 1}, "labels": {"a": "b"}}, "extra": true});
    let e = s.decode("K", "v1", &mut obj.clone(), FieldValidation::Strict).unwrap_err();
    assert_eq!((e.code, e.reason), (400, "BadRequest"));
    assert_eq!(
        e.message,
        r#"K in version "v1" cannot be handled as a K: strict decoding error: unknown field "extra", unknown field "metadata.bogus", unknown field "spec.replica""#
    );
    let mut warned = obj.clone();
    let w = s.decode("K", "v1", &mut warned, FieldValidation::Warn).unwrap();
    assert_eq!(w, [r#"unknown field "extra""#, r#"unknown field "metadata.bogus""#, r#"unknown field "spec.replica""#]);
    assert_eq!(
        warned,
        json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"free": {"anything": 1}, "labels": {"a": "b"}}})
    );
    let mut ignored = obj;
    assert!(s.decode("K", "v1", &mut ignored, FieldValidation::Ignore).unwrap().is_empty());
    assert_eq!(ignored, warned);
}

#[test]
fn defaults_fill_missing_and_non_nullable_null_fields_and_nest() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "backend": {"type": "string", "default": "StatefulSet"},
        "failover": {"type": "object", "default": {}, "properties": {"mode": {"type": "string", "default": "Manual"}}},
        "gone": {"type": "string"}, "kept": {"type": "string", "nullable": true}}}}}));
    let mut obj = json!({"spec": {"backend": null, "gone": null, "kept": null}});
    s.decode("K", "v1", &mut obj, FieldValidation::Ignore).unwrap();
    assert_eq!(obj, json!({"spec": {"backend": "StatefulSet", "failover": {"mode": "Manual"}, "kept": null}}));
}

#[test]
fn cel_rules_report_the_node_type_and_message_and_skip_on_blocking_errors() {
    let s = fss();
    assert!(errors(&s, valid_fss()).is_empty(), "{:?}", errors(&s, valid_fss()));
    let mut both = valid_fss();
    both["spec"]["disruption"] = json!({"maxUnavailable": 1, "minAvailable": 1});
    assert_eq!(
        errors(&s, both),
        [
            r#"spec.disruption: Invalid value: "object": spec.disruption: set exactly one of maxUnavailable and minAvailable"#
        ]
    );
    let mut long = valid_fss();
    long["metadata"]["name"] = json!("a".repeat(53));
    assert_eq!(
        errors(&s, long),
        [r#"<nil>: Invalid value: "object": metadata.name: must be no more than 52 characters"#]
    );
    let mut blocked = valid_fss();
    blocked["spec"]["backend"] = json!("Deployment");
    blocked["spec"]["disruption"] = json!({"maxUnavailable": 1, "minAvailable": 1});
    assert_eq!(
        errors(&s, blocked),
        [
            r#"spec.backend: Unsupported value: "Deployment": supported values: "StatefulSet", "AdvancedStatefulSet""#,
            r#"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#
        ]
    );
}

#[test]
fn transition_rules_run_only_on_updates_and_ratcheting_keeps_old_objects_writable() {
    let s = fss();
    let old = valid_fss();
    let mut next = old.clone();
    next["spec"]["template"]["serviceName"] = json!("other");
    assert!(errors(&s, next.clone()).is_empty(), "no transition rule on create");
    assert_eq!(
        s.validate(&next, Some(&old), Part::Whole, None, ShownValue::SchemaType)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [r#"spec.template: Invalid value: "object": spec.template.serviceName is immutable"#]
    );
    // An object stored before a rule existed: its unchanged invalid spec does not block a
    // status write, but a change to the invalid field is checked.
    let mut stored = valid_fss();
    stored["spec"]["replicas"] = json!(-1);
    let mut status = stored.clone();
    status["status"] = json!({"replicas": 0});
    assert!(s.validate(&status, Some(&stored), Part::Status, None, ShownValue::SchemaType).is_empty());
    assert!(s.validate(&status, Some(&stored), Part::Whole, None, ShownValue::SchemaType).is_empty());
    let mut worse = stored.clone();
    worse["spec"]["replicas"] = json!(-2);
    assert_eq!(
        s.validate(&worse, Some(&stored), Part::Whole, None, ShownValue::SchemaType)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "spec.replicas: Invalid value: -2: spec.replicas in body should be greater than or equal to 0",
            r#"spec: Invalid value: "object": spec.placement.clusters: the sum of minReplicas exceeds spec.replicas"#
        ]
    );
}

#[test]
fn status_writes_check_the_status_schema() {
    let s = fss();
    let old = valid_fss();
    let mut next = old.clone();
    next["status"] = json!({"replicas": "three"});
    assert_eq!(
        s.validate(&next, Some(&old), Part::Status, None, ShownValue::SchemaType)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            r#"status.replicas: Invalid value: "string": status.replicas in body must be of type integer: "string""#,
            r#"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#
        ]
    );
}

#[test]
fn reasons_field_paths_and_message_expressions_are_honoured() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.a < 10", "messageExpression": "'a is ' + string(self.a)", "fieldPath": ".a", "reason": "FieldValueForbidden"},
            {"rule": "self.b < 10"}]}}}));
    assert_eq!(
        errors(&s, json!({"spec": {"a": 11, "b": 12}})),
        ["spec.a: Forbidden: a is 11", r#"spec: Invalid value: "object": failed rule: self.b < 10"#]
    );
}

#[test]
fn an_unknown_directive_is_refused_as_the_options_are() {
    assert_eq!(FieldValidation::parse(None, "CreateOptions"), Ok(FieldValidation::Warn));
    assert_eq!(FieldValidation::parse(Some("Strict"), "CreateOptions"), Ok(FieldValidation::Strict));
    let e = FieldValidation::parse(Some("Loud"), "CreateOptions").unwrap_err();
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    assert_eq!(
        e.message,
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[test]
fn go_floats_print_as_go_prints_them() {
    use super::structural::go_float;
    assert_eq!(
        [0.0, 1.0, 1.5, 100000.0, 1000000.0, 2147483647.0, 0.0001, 0.00001].map(go_float),
        ["0", "1", "1.5", "100000", "1e+06", "2.147483647e+09", "0.0001", "1e-05"]
    );
}

#[test]
fn rules_that_do_not_compile_are_reported_for_the_crd() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.a ==", "message": "broken"}]}}}));
    let errs = s.compile_errors();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("spec: "), "{errs:?}");
    assert!(fss().compile_errors().is_empty(), "spanset's rules all compile");
}

#[test]
fn server_side_apply_refuses_undeclared_fields_whatever_the_directive() {
    let s = fss();
    let mut doc = valid_fss();
    assert!(s.check_applied(&doc, "default/web", "spanset.dev/v1alpha1", "FederatedStatefulSet").is_ok());
    doc["spec"]["replica"] = json!(5);
    let e = s.check_applied(&doc, "default/web", "spanset.dev/v1alpha1", "FederatedStatefulSet").unwrap_err();
    assert_eq!((e.code, e.reason), (500, ""));
    assert_eq!(
        e.message,
        "failed to create typed patch object (default/web; spanset.dev/v1alpha1, Kind=FederatedStatefulSet): .spec.replica: field not declared in schema"
    );
    assert!(e.to_status().get("reason").is_none(), "kubectl prints `Error from server: …`");
}

#[test]
fn from_1_35_a_failed_rule_shows_a_scalars_value_and_nothing_for_an_object() {
    let s = schema(json!({"type": "object", "properties": {"spec": {"type": "object",
    "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "too big"}],
    "properties": {
        "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 0", "message": "must be even"}]},
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'", "message": "not x"}]},
        "limits": {"type": "object", "additionalProperties": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self > 0", "message": "positive"}]}},
    }}}}));
    let worded = |shown| {
        let bad = json!({"spec": {"size": 13, "name": "x", "limits": {"cpu": -1}}});
        let mut e: Vec<String> =
            s.validate(&bad, None, Part::Whole, None, shown).iter().map(ToString::to_string).collect();
        e.sort();
        e
    };
    assert_eq!(
        worded(ShownValue::SchemaType),
        [
            r#"spec.limits[cpu]: Invalid value: "integer": positive"#,
            r#"spec.name: Invalid value: "string": not x"#,
            r#"spec.size: Invalid value: "integer": must be even"#,
            r#"spec: Invalid value: "object": too big"#,
        ]
    );
    assert_eq!(
        worded(ShownValue::NodeValue),
        [
            r#"spec.limits[cpu]: Invalid value: -1: positive"#,
            r#"spec.name: Invalid value: "x": not x"#,
            r#"spec.size: Invalid value: 13: must be even"#,
            r#"spec: Invalid value: too big"#,
        ]
    );
}
