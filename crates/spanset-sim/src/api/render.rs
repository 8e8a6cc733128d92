//! Renders stored objects for a response: as stored (with the requested apiVersion), as a
//! Table, or as metadata only, per the negotiated [`Output`].

use serde_json::{Value, json};

use crate::{
    api::{negotiate::Output, query::Query, table},
    store::{resources::ResourceType, views},
};

/// The `includeObject` choice for Table rows (default `Metadata`).
pub fn include(q: &Query) -> table::IncludeObject {
    match q.include_object.as_deref() {
        Some("None") => table::IncludeObject::None,
        Some("Object") => table::IncludeObject::Object,
        _ => table::IncludeObject::Metadata,
    }
}

/// One object as stored, with `apiVersion` set to the version the client addressed.
pub fn as_version(rt: &ResourceType, version: &str, obj: &Value) -> Value {
    let mut out = views::to_view(rt, obj);
    if rt.versions.len() > 1 {
        out["apiVersion"] = json!(rt.api_version(version));
    }
    out
}

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// A Table of some objects (one for a GET or a watch event, many for a list).
pub fn table_of(rt: &ResourceType, items: &[&Value], q: &Query, v1beta1: bool) -> Value {
    let mut t = table::to_table(
        &rt.group,
        &rt.plural,
        items,
        include(q),
        jiff::Timestamp::now(),
        rt.printer_columns.as_deref().or(if rt.custom { Some(&[]) } else { None }),
    );
    if v1beta1 {
        t["apiVersion"] = json!("meta.k8s.io/v1beta1");
    }
    t
}

/// A single object in the negotiated form.
pub fn object(rt: &ResourceType, version: &str, obj: &Value, out: Output, q: &Query) -> Value {
    match out {
        Output::Json => as_version(rt, version, obj),
        Output::Metadata => partial_metadata(obj),
        Output::Table { v1beta1 } => {
            let mut t = table_of(rt, &[obj], q, v1beta1);
            t["metadata"] =
                json!({"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!(""))});
            t
        }
    }
}

/// A list in the negotiated form, serialized; plain JSON lists are written item by item
/// straight from storage, without copying the objects into a new document.
pub fn list_bytes(rt: &ResourceType, version: &str, items: &[&Value], meta: Value, out: Output, q: &Query) -> Vec<u8> {
    if out != Output::Json || rt.versions.len() > 1 || rt.view.is_some() {
        return serde_json::to_vec(&list(rt, version, items, meta, out, q)).expect("JSON values always serialize");
    }
    let mut buf = Vec::with_capacity(items.len() * 512 + 256);
    let head = json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(version), "metadata": meta});
    let head = serde_json::to_vec(&head).expect("JSON values always serialize");
    // `head` ends with `}`: reopen it to append the items.
    buf.extend_from_slice(&head[..head.len() - 1]);
    buf.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        serde_json::to_writer(&mut buf, item).expect("JSON values always serialize");
    }
    buf.extend_from_slice(b"]}");
    buf
}

/// A list in the negotiated form, with its list metadata.
pub fn list(rt: &ResourceType, version: &str, items: &[&Value], meta: Value, out: Output, q: &Query) -> Value {
    match out {
        Output::Json => json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(version),
            "metadata": meta,
            "items": items.iter().map(|o| as_version(rt, version, o)).collect::<Vec<_>>(),
        }),
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "items": items.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
        }),
        Output::Table { v1beta1 } => {
            let mut t = table_of(rt, items, q, v1beta1);
            t["metadata"] = meta;
            t
        }
    }
}

/// A watch event's object in the negotiated form.
pub fn watch_object(rt: &ResourceType, version: &str, obj: &Value, out: Output, q: &Query) -> Value {
    object(rt, version, obj, out, q)
}
