//! Label and field selectors, as the apiserver parses and applies them: used
//! by list and watch filtering, by the Scale subresource, and by the simulated controllers.

mod field;
mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

/// Field selectors each resource supports, as a real apiserver does: every kind takes
/// `metadata.name` and `metadata.namespace`; kinds with a field-label conversion registered in
/// `pkg/apis/core/v1/conversion.go` (pods, nodes, events, ...) take exactly their own list,
/// which for cluster-scoped nodes and namespaces lacks `metadata.namespace`.
pub fn supported_field_selectors(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "pods") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("", "secrets") => &["type", "metadata.namespace", "metadata.name"],
        ("", "namespaces") => &["status.phase", "metadata.name"],
        ("", "nodes") => &["metadata.name", "spec.unschedulable"],
        ("", "replicationcontrollers") => &["metadata.name", "metadata.namespace", "status.replicas"],
        ("", "services") => &["metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

/// Whether the resource has its own field-label conversion, whose rejection reads
/// `field label not supported: <field>` instead of the generic `is not a known field selector`.
fn has_field_label_conversion(group: &str, resource: &str) -> bool {
    group.is_empty()
        && matches!(
            resource,
            "pods" | "events" | "secrets" | "namespaces" | "nodes" | "replicationcontrollers" | "services"
        )
}
