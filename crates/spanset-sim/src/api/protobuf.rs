//! Decodes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON objects.
//!
//! kubectl 1.32+ sends protobuf for typed creates (`kubectl create secret|configmap|namespace|
//! serviceaccount|service|poddisruptionbudget`, and the Evictions of `kubectl drain`) and does not fall back to JSON on a 415, so the sandbox reads the
//! kinds kubectl creates that way. A body is the `k8s\0` magic followed by a `runtime.Unknown`
//! (typeMeta = 1, raw = 2) whose `raw` is the object in the `generated.proto` layout of
//! k8s.io/api. Unknown fields are skipped, as protobuf readers do.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Why a protobuf body could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtobufError {
    /// Not a Kubernetes protobuf envelope, or truncated.
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    /// A kind the sandbox cannot read from protobuf.
    #[error("the sandbox cannot read {0} from protobuf; send it as JSON (kubectl create -f, kubectl apply -f)")]
    Unsupported(String),
}

/// The shape of one field.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    /// An optional integer (a Go pointer): a zero sent is kept, e.g. `gracePeriodSeconds: 0`.
    OptInt,
    Bool,
    Msg(&'static [Field]),
    Time,
    MapStrStr,
    MapStrBytes,
    RepStr,
    RepMsg(&'static [Field]),
    IntOrString,
}

type Field = (u64, &'static str, Kind);

const OWNER_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];
const OBJECT_META: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "generateName", Kind::Str),
    (3, "namespace", Kind::Str),
    (5, "uid", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "generation", Kind::Int),
    (8, "creationTimestamp", Kind::Time),
    (11, "labels", Kind::MapStrStr),
    (12, "annotations", Kind::MapStrStr),
    (13, "ownerReferences", Kind::RepMsg(OWNER_REF)),
    (14, "finalizers", Kind::RepStr),
];
const SECRET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapStrBytes),
    (3, "type", Kind::Str),
    (4, "stringData", Kind::MapStrStr),
    (5, "immutable", Kind::Bool),
];
const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapStrStr),
    (3, "binaryData", Kind::MapStrBytes),
    (4, "immutable", Kind::Bool),
];
const NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Kind::RepStr)];
const NAMESPACE: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(NAMESPACE_SPEC))];
const LOCAL_REF: &[Field] = &[(1, "name", Kind::Str)];
const OBJECT_REF: &[Field] = &[(1, "kind", Kind::Str), (2, "namespace", Kind::Str), (3, "name", Kind::Str)];
const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "secrets", Kind::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Kind::RepMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Kind::Bool),
];
const SERVICE_PORT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "protocol", Kind::Str),
    (3, "port", Kind::Int),
    (4, "targetPort", Kind::IntOrString),
    (5, "nodePort", Kind::Int),
    (6, "appProtocol", Kind::Str),
];
const SERVICE_SPEC: &[Field] = &[
    (1, "ports", Kind::RepMsg(SERVICE_PORT)),
    (2, "selector", Kind::MapStrStr),
    (3, "clusterIP", Kind::Str),
    (4, "type", Kind::Str),
    (5, "externalIPs", Kind::RepStr),
    (7, "sessionAffinity", Kind::Str),
    (10, "externalName", Kind::Str),
    (13, "publishNotReadyAddresses", Kind::Bool),
];
const SERVICE: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(SERVICE_SPEC))];

// rbac.authorization.k8s.io/v1 (`kubectl create role|clusterrole|rolebinding|clusterrolebinding`).
const POLICY_RULE: &[Field] = &[
    (1, "verbs", Kind::RepStr),
    (2, "apiGroups", Kind::RepStr),
    (3, "resources", Kind::RepStr),
    (4, "resourceNames", Kind::RepStr),
    (5, "nonResourceURLs", Kind::RepStr),
];
const ROLE: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "rules", Kind::RepMsg(POLICY_RULE))];
const SUBJECT: &[Field] =
    &[(1, "kind", Kind::Str), (2, "apiGroup", Kind::Str), (3, "name", Kind::Str), (4, "namespace", Kind::Str)];
const ROLE_REF: &[Field] = &[(1, "apiGroup", Kind::Str), (2, "kind", Kind::Str), (3, "name", Kind::Str)];
const ROLE_BINDING: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "subjects", Kind::RepMsg(SUBJECT)),
    (3, "roleRef", Kind::Msg(ROLE_REF)),
];
// authorization.k8s.io/v1 (`kubectl auth can-i`).
const RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Kind::Str),
    (2, "verb", Kind::Str),
    (3, "group", Kind::Str),
    (4, "version", Kind::Str),
    (5, "resource", Kind::Str),
    (6, "subresource", Kind::Str),
    (7, "name", Kind::Str),
];
const NON_RESOURCE_ATTRIBUTES: &[Field] = &[(1, "path", Kind::Str), (2, "verb", Kind::Str)];
const SSAR_SPEC: &[Field] = &[
    (1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
    (2, "nonResourceAttributes", Kind::Msg(NON_RESOURCE_ATTRIBUTES)),
];
const SSAR: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(SSAR_SPEC))];
// `kubectl auth can-i --list`.
const SSRR_SPEC: &[Field] = &[(1, "namespace", Kind::Str)];
const SSRR: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(SSRR_SPEC))];
// authentication.k8s.io (`kubectl auth whoami`): a review sends only its metadata.
const SSR: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META))];
// authentication.k8s.io/v1 (`kubectl create token`).
const BOUND_OBJECT_REF: &[Field] =
    &[(1, "kind", Kind::Str), (2, "apiVersion", Kind::Str), (3, "name", Kind::Str), (4, "uid", Kind::Str)];
const TOKEN_REQUEST_SPEC: &[Field] = &[
    (1, "audiences", Kind::RepStr),
    (3, "boundObjectRef", Kind::Msg(BOUND_OBJECT_REF)),
    (4, "expirationSeconds", Kind::Int),
];
const TOKEN_REQUEST: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(TOKEN_REQUEST_SPEC))];

// policy/v1 (`kubectl create poddisruptionbudget`, and `kubectl drain`'s Evictions).
const LABEL_SELECTOR_REQUIREMENT: &[Field] =
    &[(1, "key", Kind::Str), (2, "operator", Kind::Str), (3, "values", Kind::RepStr)];
const LABEL_SELECTOR: &[Field] =
    &[(1, "matchLabels", Kind::MapStrStr), (2, "matchExpressions", Kind::RepMsg(LABEL_SELECTOR_REQUIREMENT))];
const PDB_SPEC: &[Field] = &[
    (1, "minAvailable", Kind::IntOrString),
    (2, "selector", Kind::Msg(LABEL_SELECTOR)),
    (3, "maxUnavailable", Kind::IntOrString),
    (4, "unhealthyPodEvictionPolicy", Kind::Str),
];
const PDB: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "spec", Kind::Msg(PDB_SPEC))];
const PRECONDITIONS: &[Field] = &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)];
const DELETE_OPTIONS: &[Field] = &[
    (1, "gracePeriodSeconds", Kind::OptInt),
    (2, "preconditions", Kind::Msg(PRECONDITIONS)),
    (3, "orphanDependents", Kind::Bool),
    (4, "propagationPolicy", Kind::Str),
    (5, "dryRun", Kind::RepStr),
];
const EVICTION: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META)), (2, "deleteOptions", Kind::Msg(DELETE_OPTIONS))];

fn schema_for(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => Some(ROLE),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => Some(ROLE_BINDING),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(SSAR),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Some(SSRR),
        ("authentication.k8s.io/v1" | "authentication.k8s.io/v1beta1", "SelfSubjectReview") => Some(SSR),
        ("authentication.k8s.io/v1", "TokenRequest") => Some(TOKEN_REQUEST),
        ("v1", "Secret") => Some(SECRET),
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        ("v1", "Service") => Some(SERVICE),
        ("policy/v1", "PodDisruptionBudget") => Some(PDB),
        ("policy/v1" | "policy/v1beta1", "Eviction") => Some(EVICTION),
        _ => None,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or(ProtobufError::Malformed("truncated varint"))?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(ProtobufError::Malformed("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Malformed("length too large"))?;
        if len > self.buf.len() {
            return Err(ProtobufError::Malformed("truncated field"));
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }

    /// The next (field number, value) pair; `Value` holds a varint or a length-delimited slice.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, ProtobufError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            2 => Wire::Bytes(self.bytes()?),
            1 => Wire::Skip(self.skip(8)?),
            5 => Wire::Skip(self.skip(4)?),
            _ => return Err(ProtobufError::Malformed("unsupported wire type")),
        };
        Ok(Some((key >> 3, wire)))
    }

    fn skip(&mut self, n: usize) -> Result<(), ProtobufError> {
        if n > self.buf.len() {
            return Err(ProtobufError::Malformed("truncated fixed field"));
        }
        self.buf = &self.buf[n..];
        Ok(())
    }
}

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Skip(()),
}

fn text(b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::Malformed("string is not UTF-8"))
}

fn map_entry(b: &[u8]) -> Result<(String, &[u8]), ProtobufError> {
    let mut r = Reader { buf: b };
    let (mut key, mut value) = (String::new(), &b[..0]);
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(k)) => key = text(k)?,
            (2, Wire::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

fn decode(buf: &[u8], schema: &[Field]) -> Result<Value, ProtobufError> {
    let mut out = Map::new();
    let mut r = Reader { buf };
    while let Some((n, wire)) = r.next()? {
        let Some(&(_, name, kind)) = schema.iter().find(|f| f.0 == n) else { continue };
        match (kind, wire) {
            // Zero values are left out, as the JSON `omitempty` tags of these fields do.
            (Kind::Str, Wire::Bytes(b)) => {
                if !b.is_empty() {
                    out.insert(name.into(), json!(text(b)?));
                }
            }
            (Kind::Int, Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name.into(), json!(v as i64));
                }
            }
            (Kind::OptInt, Wire::Varint(v)) => {
                out.insert(name.into(), json!(v as i64));
            }
            (Kind::Bool, Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name.into(), json!(true));
                }
            }
            (Kind::Msg(s), Wire::Bytes(b)) => {
                out.insert(name.into(), decode(b, s)?);
            }
            (Kind::Time, Wire::Bytes(b)) => {
                let t = decode(b, &[(1, "seconds", Kind::Int)])?;
                let secs = t["seconds"].as_i64().unwrap_or(0);
                if let Ok(ts) = jiff::Timestamp::from_second(secs) {
                    out.insert(name.into(), json!(crate::store::object::format_time(ts)));
                }
            }
            (Kind::MapStrStr, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                let m = out.entry(name).or_insert_with(|| json!({}));
                m[k] = json!(text(v)?);
            }
            (Kind::MapStrBytes, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                let m = out.entry(name).or_insert_with(|| json!({}));
                m[k] = json!(base64::engine::general_purpose::STANDARD.encode(v));
            }
            (Kind::RepStr, Wire::Bytes(b)) => {
                let list = out.entry(name).or_insert_with(|| json!([]));
                list.as_array_mut().expect("list").push(json!(text(b)?));
            }
            (Kind::RepMsg(s), Wire::Bytes(b)) => {
                let item = decode(b, s)?;
                let list = out.entry(name).or_insert_with(|| json!([]));
                list.as_array_mut().expect("list").push(item);
            }
            (Kind::IntOrString, Wire::Bytes(b)) => {
                let v = decode(b, &[(1, "type", Kind::Int), (2, "intVal", Kind::Int), (3, "strVal", Kind::Str)])?;
                let value = if v["type"].as_i64() == Some(1) { v["strVal"].clone() } else { v["intVal"].clone() };
                out.insert(name.into(), if value.is_null() { json!(0) } else { value });
            }
            _ => return Err(ProtobufError::Malformed("field has an unexpected wire type")),
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a `k8s\0`-prefixed protobuf body into the JSON object it carries.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body.strip_prefix(b"k8s\0").ok_or(ProtobufError::Malformed("missing the k8s protobuf magic"))?;
    // The envelope is read by hand: `raw` is binary and must stay bytes.
    let mut r = Reader { buf: rest };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &rest[..0]);
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                let tm = decode(tm, &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)])?;
                api_version = tm["apiVersion"].as_str().unwrap_or("").to_string();
                kind = tm["kind"].as_str().unwrap_or("").to_string();
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let schema =
        schema_for(&api_version, &kind).ok_or_else(|| ProtobufError::Unsupported(format!("{api_version} {kind}")))?;
    let mut obj = decode(raw, schema)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field(n: u64, payload: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    fn entry(k: &str, v: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        field(1, k.as_bytes(), &mut e);
        field(2, v, &mut e);
        e
    }

    #[test]
    fn a_secret_as_kubectl_sends_it_decodes_to_json() {
        let mut meta = Vec::new();
        field(1, b"redis", &mut meta);
        field(11, &entry("app", b"redis"), &mut meta);
        let mut secret = Vec::new();
        field(1, &meta, &mut secret);
        field(2, &entry("password", b"s3cret"), &mut secret);
        field(3, b"Opaque", &mut secret);
        let mut tm = Vec::new();
        field(1, b"v1", &mut tm);
        field(2, b"Secret", &mut tm);
        let mut body = b"k8s\0".to_vec();
        field(1, &tm, &mut body);
        field(2, &secret, &mut body);
        let obj = decode_object(&body).unwrap();
        assert_eq!(obj["kind"], "Secret");
        assert_eq!(obj["metadata"]["name"], "redis");
        assert_eq!(obj["metadata"]["labels"]["app"], "redis");
        assert_eq!(obj["data"]["password"], "czNjcmV0");
        assert_eq!(obj["type"], "Opaque");
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field(1, api_version.as_bytes(), &mut tm);
        field(2, kind.as_bytes(), &mut tm);
        let mut body = b"k8s\0".to_vec();
        field(1, &tm, &mut body);
        field(2, raw, &mut body);
        body
    }

    #[test]
    fn an_eviction_keeps_a_zero_grace_period_and_a_budget_its_int_or_string() {
        let mut meta = Vec::new();
        field(1, b"web-0", &mut meta);
        let mut opts = Vec::new();
        varint(1 << 3, &mut opts);
        varint(0, &mut opts);
        field(5, b"All", &mut opts);
        let mut eviction = Vec::new();
        field(1, &meta, &mut eviction);
        field(2, &opts, &mut eviction);
        let obj = decode_object(&envelope("policy/v1", "Eviction", &eviction)).unwrap();
        assert_eq!(obj["metadata"]["name"], "web-0");
        assert_eq!(obj["deleteOptions"], serde_json::json!({"gracePeriodSeconds": 0, "dryRun": ["All"]}));
        let mut percent = Vec::new();
        varint(1 << 3, &mut percent);
        varint(1, &mut percent);
        field(3, b"50%", &mut percent);
        let mut selector = Vec::new();
        field(1, &entry("app", b"web"), &mut selector);
        let mut spec = Vec::new();
        field(3, &percent, &mut spec);
        field(2, &selector, &mut spec);
        let mut pdb = Vec::new();
        field(1, &meta, &mut pdb);
        field(2, &spec, &mut pdb);
        let obj = decode_object(&envelope("policy/v1", "PodDisruptionBudget", &pdb)).unwrap();
        assert_eq!(
            obj["spec"],
            serde_json::json!({"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}})
        );
    }

    #[test]
    fn garbage_and_unknown_kinds_are_refused() {
        assert_eq!(decode_object(b"nope"), Err(ProtobufError::Malformed("missing the k8s protobuf magic")));
        assert!(decode_object(b"k8s\0\x0a\xff").is_err());
        let mut tm = Vec::new();
        field(1, b"apps/v1", &mut tm);
        field(2, b"Deployment", &mut tm);
        let mut body = b"k8s\0".to_vec();
        field(1, &tm, &mut body);
        assert!(matches!(decode_object(&body), Err(ProtobufError::Unsupported(_))));
    }
}
