//! Name and label syntax checks with apimachinery's messages (`util/validation`): each check
//! returns every message that applies, in the order the apiserver lists them, so callers can
//! turn each into its own field error exactly as `ValidateObjectMeta` and `ValidateLabels` do.

/// `MaxLenError`: the wording the apiserver uses for an over-long string.
fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `RegexError`: the explanation, examples and regex the apiserver prints for a syntax error.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let examples = examples.iter().map(|e| format!("'{e}'")).collect::<Vec<_>>().join(",  or ");
    format!("{msg} (e.g. {examples}, regex used for validation is '{regex}')")
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Whether `s` is non-empty, made of `inner` bytes, and starts and ends with `edge` bytes.
fn shaped(s: &str, edge: fn(u8) -> bool, inner: fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(|&c| inner(c))
}

fn dns_label_shape(s: &str) -> bool {
    shaped(s, lower_alnum, |c| lower_alnum(c) || c == b'-')
}

fn qualified_name_shape(s: &str) -> bool {
    shaped(s, alnum, |c| alnum(c) || b"-_.".contains(&c))
}

/// The regex-error text for a bad DNS-1123 subdomain (also used by callers that print it alone).
pub fn dns1123_subdomain_msg() -> String {
    regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        &["example.com"],
    )
}

/// `IsDNS1123Subdomain`: most object names (pods, StatefulSets, PVCs).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len(253));
    }
    if !s.split('.').all(dns_label_shape) {
        errs.push(dns1123_subdomain_msg());
    }
    errs
}

/// `IsDNS1123Label`: namespace names, container names.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63));
    }
    if !dns_label_shape(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1035Label`: service names (they become DNS names, so must start with a letter).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63));
    }
    if !dns_label_shape(s) || !s.as_bytes()[0].is_ascii_lowercase() {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

/// `IsQualifiedName`: label keys and annotation keys (`[prefix/]name`).
pub fn qualified_name(s: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_REGEX, &examples)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len(63)));
    }
    if !qualified_name_shape(name) {
        errs.push(format!("name part {}", regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_REGEX, &examples)));
    }
    errs
}

/// `IsValidLabelValue`: label values (may be empty).
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63));
    }
    if !(s.is_empty() || qualified_name_shape(s)) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%q` for a string, which is how the apiserver quotes bad values in messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_errors_list_length_then_syntax() {
        assert!(dns1123_subdomain("web-0.example").is_empty());
        assert_eq!(dns1123_subdomain("Bad_Name"), vec![dns1123_subdomain_msg()]);
        let long = "a".repeat(254);
        assert_eq!(dns1123_subdomain(&long), vec!["must be no more than 253 characters".to_string()]);
        assert_eq!(dns1123_subdomain("").len(), 1, "empty fails the regex");
    }

    #[test]
    fn labels_and_dns1035_use_the_apimachinery_wording() {
        assert_eq!(
            dns1123_label("a.b"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(dns1035_label("web").is_empty());
        assert!(dns1035_label("1web")[0].starts_with("a DNS-1035 label must consist"));
        assert!(!dns1035_label("web-").is_empty());
    }

    #[test]
    fn qualified_names_report_prefix_and_name_parts() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name("bad key"),
            vec![
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(qualified_name("x/").len(), 2, "empty name part: non-empty and regex messages");
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(qualified_name("Upper.Case/x")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
    }

    #[test]
    fn label_values_may_be_empty_but_not_too_long() {
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_3-x").is_empty());
        assert_eq!(label_value(&"a".repeat(64)), vec!["must be no more than 63 characters"]);
        assert!(label_value("-x")[0].starts_with("a valid label must be an empty string"));
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
    }
}
