//! `docs/api-reference.md` is the CRDs' schemas rendered (`spanset_api::reference`): it fails
//! here when a field, default, rule or description changes without the page, and
//! `SPANSET_BLESS=1` writes the page again instead.

use std::path::Path;

#[test]
fn the_api_reference_page_is_the_crds_schemas_rendered() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api-reference.md");
    let rendered = spanset_api::reference::markdown();
    if std::env::var_os("SPANSET_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("docs/api-reference.md written");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("docs/api-reference.md");
    if committed != rendered {
        let first = committed.lines().zip(rendered.lines()).position(|(a, b)| a != b);
        let at = first.unwrap_or_else(|| committed.lines().count().min(rendered.lines().count()));
        panic!(
            "docs/api-reference.md differs from the CRDs' schemas from line {}:\n  page:    {}\n  schemas: {}\n\
             run `SPANSET_BLESS=1 cargo test --test suite api_reference` to write it again",
            at + 1,
            committed.lines().nth(at).unwrap_or("(end)"),
            rendered.lines().nth(at).unwrap_or("(end)")
        );
    }
}
