//! The `-o table|wide|json|yaml` flag that every command printing a report shares (`plan`, the
//! drills; `status` adds `name`), so that one habit and one script work across them: JSON and
//! YAML are the same document, and `wide` is the table with extra columns where a command has
//! them (the table otherwise).

use serde::Serialize;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text (the default).
    Table,
    /// The table, with extra columns where the command has them.
    Wide,
    /// One JSON document.
    Json,
    /// The JSON document as YAML.
    Yaml,
}

/// `doc` as pretty JSON, with a final newline.
pub fn json(doc: &serde_json::Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(doc).expect("JSON values always serialize"))
}

/// `doc` as YAML.
pub fn yaml(doc: &serde_json::Value) -> String {
    serde_yaml::to_string(doc).expect("JSON values always render as YAML")
}

/// What to print: `doc` for JSON and YAML, else `table` (given whether `wide` was asked).
pub fn render<T: Serialize + ?Sized>(format: Format, doc: &T, table: impl FnOnce(bool) -> String) -> String {
    let value = || serde_json::to_value(doc).unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}));
    match format {
        Format::Table => table(false),
        Format::Wide => table(true),
        Format::Json => json(&value()),
        Format::Yaml => yaml(&value()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_is_the_json_document_and_wide_asks_the_table_for_more() {
        let doc = serde_json::json!({"federation": "default/redis", "moves": [{"ordinal": 3, "seconds": 1.5}]});
        let yaml_text = render(Format::Yaml, &doc, |_| unreachable!());
        // JSON parses as YAML too: this must be YAML's block style.
        assert!(yaml_text.starts_with("federation: default/redis\n"), "{yaml_text}");
        let from_yaml: serde_json::Value = serde_yaml::from_str(&yaml_text).unwrap();
        let from_json: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &doc, |_| unreachable!())).unwrap();
        assert_eq!(from_yaml, doc);
        assert_eq!(from_json, doc);
        assert_eq!(render(Format::Table, &doc, |wide| format!("wide={wide}")), "wide=false");
        assert_eq!(render(Format::Wide, &doc, |wide| format!("wide={wide}")), "wide=true");
    }
}
