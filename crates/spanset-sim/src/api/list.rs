//! LIST: selectors, resourceVersion semantics and paginated snapshots with continue tokens
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks>).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::store::validate::FieldError;
use crate::{
    api::{negotiate::Output, query::Query, render},
    cluster::Cluster,
    store::{
        error::{ApiError, ApiResult},
        object,
        resources::ResourceType,
        selector::{FieldSelector, LabelSelector},
    },
};

/// Label and field selectors of a list or watch, checked against what the resource supports.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    namespace: Option<String>,
    /// Whether any selector was given (lists then omit `remainingItemCount`).
    selective: bool,
}

impl Filter {
    /// Parses the selectors of a request; errors are 400 with the apiserver's wording.
    pub fn new(rt: &ResourceType, ns: Option<&str>, q: &Query) -> ApiResult<Self> {
        let labels = LabelSelector::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(q.field_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
        let fields = fields.for_resource(&rt.group, &rt.plural).map_err(ApiError::bad_request)?;
        let selective = q.label_selector.is_some() || q.field_selector.is_some();
        Ok(Self { labels, fields, namespace: ns.map(str::to_string), selective })
    }

    /// Whether an object passes the namespace, label and field selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.namespace.as_deref().is_none_or(|ns| object::namespace(obj) == ns)
            && self.labels.matches(object::labels(obj))
            && self.fields.matches(obj)
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

/// A continue token: the snapshot's resourceVersion and the last key returned.
fn encode_continue(rv: u64, last: &Value) -> String {
    hex(&format!("{rv}\n{}\n{}", object::namespace(last), object::name(last)))
}

fn decode_continue(token: &str) -> ApiResult<(u64, String, String)> {
    let bad = || {
        ApiError::bad_request(format!(
            "continue key is not valid: {token:?} is not a continue token issued by this server"
        ))
    };
    let text = unhex(token).ok_or_else(bad)?;
    let mut parts = text.splitn(3, '\n');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rv, ns, name))
}

/// Serves a LIST and returns the serialized response document.
pub fn serve(
    cluster: &Cluster,
    rt: &ResourceType,
    version: &str,
    ns: Option<&str>,
    q: &Query,
    out: Output,
) -> ApiResult<Vec<u8>> {
    let filter = Filter::new(rt, ns, q)?;
    let res = rt.storage_key();
    if q.resource_version_match.is_some() && q.resource_version.as_deref().unwrap_or("").is_empty() {
        let err = FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        );
        return Err(ApiError::invalid_field("ListOptions", "meta.k8s.io", "", &err));
    }
    let (items, snapshot_rv, after): (Vec<Arc<Value>>, u64, Option<(String, String)>) = match &q.continue_token {
        Some(token) => {
            let (rv, last_ns, last_name) = decode_continue(token)?;
            let items = cluster.storage.list_at(&res, ns, rv).map_err(|_| {
                ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                )
            })?;
            (items, rv, Some((last_ns, last_name)))
        }
        None => match (q.resource_version.as_deref(), q.resource_version_match.as_deref()) {
            (Some(rv), Some("Exact")) => {
                let rv: u64 =
                    rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
                (cluster.storage.list_at(&res, ns, rv)?, rv, None)
            }
            _ => {
                let (items, rv) = cluster.storage.list(&res, ns);
                (items, rv, None)
            }
        },
    };
    let mut matching: Vec<&Value> = items
        .iter()
        .map(|o| o.as_ref())
        .filter(|o| {
            after
                .as_ref()
                .is_none_or(|(a_ns, a_name)| (object::namespace(o), object::name(o)) > (a_ns.as_str(), a_name.as_str()))
        })
        .filter(|o| filter.matches(o))
        .collect();
    let mut meta = json!({"resourceVersion": snapshot_rv.to_string()});
    if let Some(limit) = q.limit
        && matching.len() > limit
    {
        let remaining = matching.len() - limit;
        matching.truncate(limit);
        meta["continue"] = json!(encode_continue(snapshot_rv, matching[limit - 1]));
        if !filter.selective {
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    Ok(render::list_bytes(rt, version, &matching, meta, out, q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let obj = json!({"metadata": {"namespace": "ns", "name": "web-3"}});
        let token = encode_continue(42, &obj);
        assert_eq!(decode_continue(&token).unwrap(), (42, "ns".into(), "web-3".into()));
        assert_eq!(decode_continue("zz").unwrap_err().code, 400);
    }
}
