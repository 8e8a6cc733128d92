//! Query parameters of list, watch, write and delete requests. Unknown or irrelevant
//! parameters (`timeout`, `pretty`...) are ignored, as the apiserver does.

use crate::store::{
    error::{ApiError, ApiResult},
    validate::{FieldError, FieldErrorKind, syntax},
};

/// The parsed query string.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// `watch=true|1`.
    pub watch: bool,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `limit`.
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Every `dryRun` value given, so that one the apiserver does not know is refused.
    pub dry_run_values: Vec<String>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force`.
    pub force: Option<bool>,
    /// `includeObject` for Table output.
    pub include_object: Option<String>,
    /// `gracePeriodSeconds` (DeleteOptions may come as query parameters too).
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<String>,
    /// `fieldValidation` (`Strict`, `Warn`, `Ignore`), for custom resources' unknown fields.
    pub field_validation: Option<String>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "true" | "1" | "True")
}

fn number<T: std::str::FromStr>(key: &str, v: &str) -> ApiResult<T> {
    v.parse().map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {v:?} is not a valid number")))
}

impl Query {
    /// `dryRun` of a write whose options are `options_kind` (`CreateOptions`, …): `All` or
    /// nothing; any other value is refused naming it, before anything is written.
    pub fn dry_run_of(&self, options_kind: &str) -> ApiResult<bool> {
        if self.dry_run_values.iter().any(|v| v != "All") {
            let given: Vec<String> = self.dry_run_values.iter().map(|v| syntax::go_quote(v)).collect();
            let err = FieldError::new(
                "dryRun",
                FieldErrorKind::NotSupported,
                None,
                format!("[{}]: supported values: \"All\"", given.join(" ")),
            );
            return Err(ApiError::invalid_field(options_kind, "meta.k8s.io", "", &err));
        }
        Ok(self.dry_run)
    }

    /// Parses a raw query string (may be empty, start with `&`, or have empty segments).
    pub fn parse(raw: Option<&str>) -> ApiResult<Self> {
        let mut q = Query::default();
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            let v = v.into_owned();
            match k.as_ref() {
                "watch" => q.watch = truthy(&v),
                "resourceVersion" => q.resource_version = Some(v),
                "resourceVersionMatch" => q.resource_version_match = Some(v).filter(|s| !s.is_empty()),
                "limit" => q.limit = Some(number::<usize>("limit", &v)?).filter(|l| *l > 0),
                "continue" => q.continue_token = Some(v).filter(|s| !s.is_empty()),
                "labelSelector" => q.label_selector = Some(v).filter(|s| !s.is_empty()),
                "fieldSelector" => q.field_selector = Some(v).filter(|s| !s.is_empty()),
                "timeoutSeconds" => q.timeout_seconds = Some(number("timeoutSeconds", &v)?),
                "allowWatchBookmarks" => q.allow_watch_bookmarks = truthy(&v),
                "sendInitialEvents" => q.send_initial_events = Some(truthy(&v)),
                "dryRun" => {
                    q.dry_run |= v == "All";
                    q.dry_run_values.push(v);
                }
                "fieldManager" => q.field_manager = Some(v).filter(|s| !s.is_empty()),
                "force" => q.force = Some(truthy(&v)),
                "includeObject" => q.include_object = Some(v),
                "gracePeriodSeconds" => q.grace_period_seconds = Some(number("gracePeriodSeconds", &v)?),
                "propagationPolicy" => q.propagation_policy = Some(v),
                "fieldValidation" => q.field_validation = Some(v),
                _ => {}
            }
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerates_kube_rs_shapes() {
        let q =
            Query::parse(Some("&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=0")).unwrap();
        assert!(q.watch && q.allow_watch_bookmarks);
        assert_eq!((q.timeout_seconds, q.resource_version.as_deref()), (Some(290), Some("0")));
        let q = Query::parse(Some("")).unwrap();
        assert!(!q.watch && q.limit.is_none());
        let q = Query::parse(Some("labelSelector=app%3Dquiz&limit=500&pretty=true&fieldValidation=Strict")).unwrap();
        assert_eq!((q.label_selector.as_deref(), q.limit), (Some("app=quiz"), Some(500)));
    }

    #[test]
    fn rejects_non_numeric_limit() {
        let e = Query::parse(Some("limit=ten")).unwrap_err();
        assert_eq!(e.code, 400);
    }
}
