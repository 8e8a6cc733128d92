//! Comments say why in words a reader can follow: none points at the project's internal tracker
//! ("see" the word issue or item followed by a number), which no reader of the code can open.
//! The check reads every text file of the code, its tests, benches, docs and deployment files,
//! and the README; it builds its pattern from parts, so that its own source passes it too.

use std::{
    path::{Path, PathBuf},
    sync::LazyLock,
};

/// The trees read: the code and everything shipped or read beside it.
const TREES: [&str; 8] = ["src", "crates", "tests", "benches", "docs", "deploy", "dashboards", "examples"];

/// The files read beside the trees: the front page, the build and CI.
const FILES: [&str; 3] = ["README.md", "Cargo.toml", ".ci/run"];

/// The words that, followed by a number, cite a tracker entry.
const WORDS: [&str; 2] = ["issue", "item"];

/// Every file under `dir` whose content is text, with its path.
fn text_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(text_files(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
    out
}

/// Where `line` cites a tracker entry: one of [`WORDS`] (or its plural) as a whole word, then
/// spaces or a `#`, then a digit. Answers the citation as written.
fn citation(line: &str) -> Option<&str> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    for word in WORDS {
        for (at, _) in lower.match_indices(word) {
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let mut end = at + word.len();
            if bytes.get(end) == Some(&b's') {
                end += 1;
            }
            let gap = bytes[end..].iter().take_while(|b| **b == b' ' || **b == b'#').count();
            if gap > 0 && bytes.get(end + gap).is_some_and(u8::is_ascii_digit) {
                let digits = bytes[end + gap..].iter().take_while(|b| b.is_ascii_digit()).count();
                return Some(&line[at..end + gap + digits]);
            }
        }
    }
    None
}

#[test]
fn the_pattern_finds_a_citation_and_nothing_else() {
    let (issue, item) = (WORDS[0], WORDS[1]);
    for cited in [
        format!("// before {issue} 24, a member took 15 s"),
        format!("/// ({} 19, {item} 15)", issue.to_uppercase()),
        format!("# see {issue} #7"),
        format!("// {item}s 4 and 5"),
    ] {
        assert!(citation(&cited).is_some(), "not found in {cited:?}");
    }
    for plain in [
        format!("// an {item} of 3 elements"),
        format!("let {item}_3 = 1; // {issue}d 2 tokens"),
        "// a tissue 3 cm thick".to_string(),
        format!("// no {issue} here"),
    ] {
        assert_eq!(citation(&plain), None, "{plain:?}");
    }
}

#[test]
fn no_comment_cites_the_internal_tracker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut read = 0;
    let files = FILES.iter().map(|f| {
        let path = root.join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        (path, text)
    });
    for (path, text) in TREES.iter().flat_map(|tree| text_files(&root.join(tree))).chain(files) {
        read += 1;
        for (i, line) in text.lines().enumerate() {
            if let Some(cited) = citation(line) {
                let file = path.strip_prefix(root).unwrap_or(&path).display();
                found.push(format!("{file}:{}: {cited:?} in {}", i + 1, line.trim()));
            }
        }
    }
    // The trees were read: a moved root would otherwise pass with nothing checked.
    assert!(read > 100, "only {read} files read under {TREES:?}");
    assert!(
        found.is_empty(),
        "say the reason instead of citing the tracker, whose numbering no reader can follow:\n{}",
        found.join("\n")
    );
}

/// Every `*.md` a line names (outside a URL), as written.
fn documents_named(line: &str) -> Vec<String> {
    static URLS: LazyLock<regex::Regex> = LazyLock::new(|| regex::Regex::new(r"[a-z]+://\S+").expect("URL pattern"));
    static NAMED: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?:^|[^A-Za-z0-9_./-])((?:\.{1,2}/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)\b")
            .expect("document pattern")
    });
    if !line.contains(".md") {
        return Vec::new();
    }
    let line = URLS.replace_all(line, " ");
    NAMED.captures_iter(&line).map(|c| c[1].to_string()).collect()
}

#[test]
fn the_document_pattern_finds_names_outside_urls() {
    let md = "md";
    let line = format!("see docs/safety.{md} and ../concepts.{md}#terms, not https://example.com/notes.{md}");
    assert_eq!(documents_named(&line), [format!("docs/safety.{md}"), format!("../concepts.{md}")]);
    assert!(documents_named(&format!("a.{md}x and mdbook")).is_empty());
}

/// A comment or a page that names a document points the reader at something they can open: every
/// `*.md` named in a comment of the code and its tests, or in the docs and deployment files, is a
/// file of the repository
/// (found by that path from the root or beside the file naming it, or as the end of one's path).
/// A document kept elsewhere is cited by its public address instead, or its fact is said.
#[test]
fn every_document_named_is_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: Vec<(PathBuf, String)> = TREES
        .iter()
        .flat_map(|tree| text_files(&root.join(tree)))
        .chain(FILES.iter().map(|f| (root.join(f), std::fs::read_to_string(root.join(f)).expect("a root file"))))
        .collect();
    let documents: Vec<String> = files
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "md"))
        .map(|(p, _)| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    assert!(documents.len() > 20, "the docs were read: {documents:?}");
    let mut missing = Vec::new();
    for (path, text) in &files {
        let rust = path.extension().is_some_and(|e| e == "rs");
        for (i, line) in text.lines().enumerate() {
            // In code, only comments name documents for a reader (a `//` not in a URL): a string is
            // test data (the link checker's own tests build pages that do not exist).
            let comment = line.match_indices("//").find(|(at, _)| !line[..*at].ends_with(':')).map(|(at, _)| at);
            let said = if rust { comment.map_or("", |at| &line[at..]) } else { line };
            for name in documents_named(said) {
                let beside = path.parent().map(|d| d.join(&name)).is_some_and(|p| p.is_file());
                let bare = name.trim_start_matches("./").trim_start_matches("../");
                let known = beside || root.join(&name).is_file() || documents.iter().any(|d| d.ends_with(bare));
                if !known {
                    let file = path.strip_prefix(root).unwrap_or(path).display();
                    missing.push(format!("{file}:{}: {name}", i + 1));
                }
            }
        }
    }
    assert!(missing.is_empty(), "documents named that are not in the repository:\n{}", missing.join("\n"));
}
