//! The controller's module boundaries, checked on its source: its top-level modules import each
//! other without a cycle, and the messages between the actors are plain data. (That it never
//! imports the sandbox is its dependency list: `spanset-sim` is not in it.)

use std::path::Path;

fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.display().to_string(), std::fs::read_to_string(&path).expect("source file")));
        }
    }
    out
}

/// The controller's top-level modules form no import cycle: each can be read, tested and
/// changed from the ones below it. Plain data (`messages`) names no actor, a constant or
/// message lives in the layer that owns it, and a module never reaches back up to the actors
/// that use it. Imports are collected from `use` trees (nested groups, `self`, globs, `as`) and
/// from paths in code (`super::x::f()`, `crate::x::T`), resolved from each file's
/// module and the inline modules around them (`mod tests { use super::*; }`).
#[test]
fn the_controller_s_modules_import_each_other_without_a_cycle() {
    let edges = imports::controller_imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(edges.len() > 20, "the scan finds the controller's imports: {edges:?}");
    let cycles = imports::cycles(&edges);
    assert!(
        cycles.is_empty(),
        "import cycles among the controller's `src`'s top-level modules:\n{}",
        cycles.join("\n\n")
    );
}

/// The protocol between the actors is plain data: `messages` names no actor (no `Addr`) and
/// imports nothing of the controller but the member caches its reports carry.
#[test]
fn the_messages_name_no_actor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = imports::controller_imports(&root);
    let from_messages: Vec<&str> =
        edges.iter().filter(|e| e.from == "actors::messages" && e.to != "member").map(|e| e.at.as_str()).collect();
    assert!(from_messages.is_empty(), "messages imports more than the member caches:\n{}", from_messages.join("\n"));
    let text =
        imports::code_only(&std::fs::read_to_string(root.join("actors/messages.rs")).expect("actors/messages.rs"));
    assert!(!text.contains("Addr<"), "messages names an actor's address");
}

/// Imports between the top-level modules of a source tree, read without a parser crate:
/// comments and literals are blanked, the rest is cut into identifiers and punctuation.
mod imports {
    use std::{
        collections::{BTreeMap, BTreeSet, VecDeque},
        path::Path,
    };

    /// One module of `the controller's `src`` naming another.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Edge {
        pub from: String,
        pub to: String,
        /// `file:line: path`, for the failure message.
        pub at: String,
    }

    /// The role folders of `root`: a directory whose `mod.rs` holds docs and `pub mod` lines
    /// only, with a table of its modules' reasons to change (`member/` is one module of many
    /// files, not a role folder). Their modules are the units the checks speak of (`decisions::rollout`), as the
    /// other top-level modules are (`member`).
    pub fn role_folders(root: &Path) -> BTreeSet<String> {
        std::fs::read_dir(root)
            .expect("the controller's `src`")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                std::fs::read_to_string(p.join("mod.rs")).is_ok_and(|text| {
                    text.lines().all(|l| {
                        l.is_empty() || l.starts_with("//!") || (l.starts_with("pub mod ") && l.ends_with(';'))
                    }) && text.contains("//! | module | one reason to change |")
                })
            })
            .filter_map(|p| Some(p.file_name()?.to_str()?.to_string()))
            .collect()
    }

    /// The unit a path under the controller lies in: its role folder's module, or its
    /// top-level module.
    pub fn unit_of(path: &[String], roles: &BTreeSet<String>) -> Option<String> {
        match path {
            [role, module, ..] if roles.contains(role) => Some(format!("{role}::{module}")),
            [role] if roles.contains(role) => None,
            [top, ..] => Some(top.clone()),
            [] => None,
        }
    }

    /// Every import of one unit of `root` (see [`unit_of`]) by another.
    pub fn controller_imports(root: &Path) -> Vec<Edge> {
        let roles = role_folders(root);
        let mut top: BTreeSet<String> = BTreeSet::new();
        for (file, _) in super::sources(root) {
            let rel = Path::new(&file).strip_prefix(root).expect("under the root");
            top.extend(unit_of(&module_of(rel), &roles));
        }
        let mut edges = Vec::new();
        for (file, text) in super::sources(root) {
            let rel = Path::new(&file).strip_prefix(root).expect("under the root");
            let module = module_of(rel);
            let Some(own) = unit_of(&module, &roles) else { continue };
            for (line, path) in paths(&text, &module) {
                if let Some(to) = unit_of(&path, &roles).filter(|t| *t != own && top.contains(t)) {
                    let at = format!("{}:{line}: {}", rel.display(), path.join("::"));
                    edges.push(Edge { from: own.clone(), to, at });
                }
            }
        }
        edges
    }

    /// The module a file under `the controller's `src`` defines, from the controller: `a/b.rs` is
    /// `[a, b]`, `a/mod.rs` is `[a]`, `lib.rs` is `[]`.
    pub fn module_of(rel: &Path) -> Vec<String> {
        let mut out: Vec<String> =
            rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
        if out.last().is_some_and(|l| l == "mod" || (l == "lib" && out.len() == 1)) {
            out.pop();
        }
        out
    }

    /// Every path of `text` that leads into the controller, resolved from `module` (its file's
    /// module under the controller), as segments under the controller, with its line.
    pub fn paths(text: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
        let tokens = tokens(&code_only(text));
        let mut out = Vec::new();
        // Inline modules open around the cursor: name and the brace depth inside them.
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < tokens.len() {
            let here: Vec<String> = module.iter().cloned().chain(inline.iter().map(|(n, _)| n.clone())).collect();
            let (line, tok) = (tokens[i].0, tokens[i].1.as_str());
            match tok {
                "{" => depth += 1,
                "}" => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                "mod" if tokens.get(i + 2).is_some_and(|t| t.1 == "{") => {
                    inline.push((tokens[i + 1].1.clone(), depth + 1));
                    i += 1;
                }
                "use" => {
                    let mut trees = Vec::new();
                    i = use_tree(&tokens, i + 1, Vec::new(), &mut trees);
                    out.extend(trees.into_iter().filter_map(|p| resolve(&p, &here)).map(|p| (line, p)));
                    continue;
                }
                "crate" | "super" | "self" if tokens.get(i + 1).is_some_and(|t| t.1 == "::") => {
                    let mut path = vec![tok.to_string()];
                    while tokens.get(i + 1).is_some_and(|t| t.1 == "::")
                        && tokens.get(i + 2).is_some_and(|t| ident(&t.1))
                    {
                        path.push(tokens[i + 2].1.clone());
                        i += 2;
                    }
                    out.extend(resolve(&path, &here).map(|p| (line, p)));
                }
                _ => {}
            }
            i += 1;
        }
        out
    }

    /// Parses the use tree starting at `i` under `prefix`, pushing every path it names (a
    /// glob names its module); answers the index of the token after the tree.
    fn use_tree(
        tokens: &[(usize, String)],
        mut i: usize,
        mut prefix: Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) -> usize {
        loop {
            match tokens.get(i).map(|t| t.1.as_str()) {
                Some("{") => {
                    i += 1;
                    while tokens.get(i).is_some_and(|t| t.1 != "}") {
                        i = use_tree(tokens, i, prefix.clone(), out);
                        if tokens.get(i).is_some_and(|t| t.1 == ",") {
                            i += 1;
                        }
                    }
                    return skip_to_end(tokens, i + 1);
                }
                Some("*") => {
                    out.push(prefix);
                    return skip_to_end(tokens, i + 1);
                }
                Some("self") if !prefix.is_empty() && tokens.get(i + 1).is_none_or(|t| t.1 != "::") => {
                    out.push(prefix);
                    return skip_to_end(tokens, i + 1);
                }
                Some(t) if ident(t) => {
                    prefix.push(t.to_string());
                    if tokens.get(i + 1).is_some_and(|t| t.1 == "::") {
                        i += 2;
                    } else {
                        out.push(prefix);
                        return skip_to_end(tokens, i + 1);
                    }
                }
                _ => return i,
            }
        }
    }

    /// Past an `as` alias and a closing `;`, if there.
    fn skip_to_end(tokens: &[(usize, String)], mut i: usize) -> usize {
        if tokens.get(i).is_some_and(|t| t.1 == "as") {
            i += 2;
        }
        if tokens.get(i).is_some_and(|t| t.1 == ";") {
            i += 1;
        }
        i
    }

    /// A path as segments under the controller, from module `here`; `None` when it leads
    /// elsewhere (another crate, another part of this one).
    pub fn resolve(path: &[String], here: &[String]) -> Option<Vec<String>> {
        let mut cur: Vec<String> = here.to_vec();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                cur.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    cur.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        Some(cur.into_iter().chain(rest.iter().cloned()).collect())
    }

    fn ident(t: &str) -> bool {
        t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
    }

    /// Identifiers (keywords included), `::`, and single punctuation characters, with lines.
    fn tokens(code: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let chars: Vec<char> = code.chars().collect();
        let (mut i, mut line) = (0, 1);
        while i < chars.len() {
            let c = chars[i];
            if c == '\n' {
                line += 1;
                i += 1;
            } else if c.is_whitespace() {
                i += 1;
            } else if c.is_alphanumeric() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push((line, chars[start..i].iter().collect()));
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                out.push((line, "::".to_string()));
                i += 2;
            } else {
                out.push((line, c.to_string()));
                i += 1;
            }
        }
        out
    }

    /// The source with comments, strings and character literals blanked (lines kept), so
    /// that neither a doc link nor a brace in a format string is read as code.
    pub fn code_only(text: &str) -> String {
        let c: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
        let mut i = 0;
        while i < c.len() {
            if c[i] == '/' && c.get(i + 1) == Some(&'/') {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                let mut nest = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        nest += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        nest -= 1;
                        i += 2;
                        if nest == 0 {
                            break;
                        }
                    } else {
                        blank(&mut out, c[i]);
                        i += 1;
                    }
                }
            } else if c[i] == 'r'
                && matches!(c.get(i + 1), Some('"' | '#'))
                && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
            {
                // A raw string: r"…", r#"…"#.
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    out.push(c[i]);
                    i += 1;
                    continue;
                }
                j += 1;
                while j < c.len() && !(c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#'))) {
                    blank(&mut out, c[j]);
                    j += 1;
                }
                out.push_str("\"\"");
                i = j + 1 + hashes;
            } else if c[i] == '"' {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        blank(&mut out, c[i]);
                        i += 1;
                    }
                    if i < c.len() {
                        blank(&mut out, c[i]);
                    }
                    i += 1;
                }
                out.push_str("\"\"");
                i += 1;
            } else if c[i] == '\'' && (c.get(i + 1) == Some(&'\\') || c.get(i + 2) == Some(&'\'')) {
                // A character literal ('x', '\n', '\u{1F600}'); a lifetime has no closing quote.
                let mut j = i + 1;
                if c[j] == '\\' {
                    j += 2;
                }
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else {
                out.push(c[i]);
                i += 1;
            }
        }
        out
    }

    /// Each import cycle, one per set of modules that reach each other: the shortest cycle
    /// through its first module, every module of the set, and the imports making each step.
    pub fn cycles(edges: &[Edge]) -> Vec<String> {
        let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for e in edges {
            graph.entry(&e.from).or_default().insert(&e.to);
        }
        let reaches = |from: &str, to: &str| -> Option<Vec<String>> {
            // Shortest path from `from` to `to`, by breadth-first search.
            let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = VecDeque::from([from]);
            while let Some(n) = queue.pop_front() {
                for next in graph.get(n).into_iter().flatten().copied() {
                    if next == to {
                        let mut path = vec![to.to_string(), n.to_string()];
                        let mut at = n;
                        while at != from {
                            at = prev[at];
                            path.push(at.to_string());
                        }
                        path.reverse();
                        return Some(path);
                    }
                    if next != from && !prev.contains_key(next) {
                        prev.insert(next, n);
                        queue.push_back(next);
                    }
                }
            }
            None
        };
        let nodes: BTreeSet<&str> = graph.keys().copied().collect();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut out = Vec::new();
        for &n in &nodes {
            if seen.contains(n) {
                continue;
            }
            let Some(cycle) = reaches(n, n) else { continue };
            let set: Vec<&str> = nodes
                .iter()
                .copied()
                .filter(|m| *m == n || (reaches(n, m).is_some() && reaches(m, n).is_some()))
                .collect();
            seen.extend(set.iter().copied());
            let mut text =
                format!("cycle: {}\n  (modules that reach each other: {})", cycle.join(" → "), set.join(", "));
            for step in cycle.windows(2) {
                let why: Vec<&str> = edges
                    .iter()
                    .filter(|e| e.from == step[0] && e.to == step[1])
                    .map(|e| e.at.as_str())
                    .take(3)
                    .collect();
                text.push_str(&format!("\n  {} → {}: {}", step[0], step[1], why.join("; ")));
            }
            out.push(text);
        }
        out
    }

    #[test]
    fn use_trees_with_nested_groups_self_globs_and_aliases_are_expanded() {
        let text = "use super::{disruption::{self, BudgetWrite}, events::Note as N, gates::*};\n\
                    pub(crate) use crate::{status::{types, Verdict}};\n\
                    use spanset_api::X;\n\
                    use super::leader;";
        let found: Vec<String> = paths(text, &["reconcile".into()]).into_iter().map(|(_, p)| p.join("::")).collect();
        assert_eq!(
            found,
            [
                "disruption",
                "disruption::BudgetWrite",
                "events::Note",
                "gates",
                "status::types",
                "status::Verdict",
                "leader"
            ]
        );
    }

    #[test]
    fn super_resolves_from_the_file_s_module_and_the_inline_modules_around_it() {
        let text = "use super::moves::Moves;\nfn f() { super::super::network::names(); }\n\
                    mod tests {\n    use super::*;\n    fn g() { let s = \"}\"; crate::gates::gate(); }\n}\n\
                    fn h() { super::super::labels::X; }";
        let here = ["reconcile".to_string(), "steps".to_string()];
        let found: Vec<(usize, String)> = paths(text, &here).into_iter().map(|(l, p)| (l, p.join("::"))).collect();
        assert_eq!(
            found,
            [
                (1, "reconcile::moves::Moves".to_string()),
                (2, "network::names".into()),
                (4, "reconcile::steps".into()),
                (5, "gates::gate".into()),
                (7, "labels::X".into()),
            ]
        );
    }

    #[test]
    fn comments_strings_and_chars_hide_no_code_and_make_none_up() {
        let text = "// use super::a;\n/* super::b */ let s = r#\"super::c\"#; let c = '{'; fn f<'a>(x: &'a str) { super::d::e(); }";
        let found: Vec<String> = paths(text, &["x".into()]).into_iter().map(|(_, p)| p.join("::")).collect();
        assert_eq!(found, ["d::e"]);
    }

    #[test]
    fn a_cycle_is_named_with_the_imports_that_make_it() {
        let e = |from: &str, to: &str| Edge { from: from.into(), to: to.into(), at: format!("{from}.rs:1: {to}") };
        assert!(cycles(&[e("a", "b"), e("b", "c")]).is_empty());
        let found = cycles(&[e("a", "b"), e("b", "c"), e("c", "a"), e("c", "d")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("cycle: a → b → c → a"), "{}", found[0]);
        assert!(found[0].contains("c → a: c.rs:1: a"), "{}", found[0]);
    }
}

/// The picture of the protocol at the top of `messages.rs` is true: it names every actor
/// message of the controller (each `#[rtype]` struct, wherever it is defined) and no other.
#[test]
fn the_protocol_picture_names_every_message_and_only_those() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut messages = std::collections::BTreeSet::new();
    for (_, text) in sources(&root) {
        let lines: Vec<&str> = text.lines().collect();
        for (i, _) in lines.iter().enumerate().filter(|(_, l)| l.trim_start().starts_with("#[rtype")) {
            let declared = lines[i + 1..].iter().find_map(|l| l.trim_start().strip_prefix("pub struct "));
            let name = declared.expect("an #[rtype] before a struct").split(|c: char| !c.is_alphanumeric()).next();
            messages.insert(name.expect("a struct name").to_string());
        }
    }
    assert!(messages.len() > 20, "the scan finds the messages: {messages:?}");
    let doc = std::fs::read_to_string(root.join("actors/messages.rs")).expect("actors/messages.rs");
    let picture: String = doc
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .skip_while(|l| !l.contains("```text"))
        .skip(1)
        .take_while(|l| !l.contains("```"))
        .collect::<Vec<_>>()
        .join("\n");
    let named: std::collections::BTreeSet<String> = picture
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
        .filter(|w| !["Supervisor", "Coordinator", "ClusterWatcher"].contains(w))
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = messages.difference(&named).collect();
    let unknown: Vec<_> = named.difference(&messages).collect();
    assert!(missing.is_empty() && unknown.is_empty(), "messages.rs's picture lacks {missing:?} and names {unknown:?}");
}

/// The code map at the top of `lib.rs` places every folder in its role table, and each role
/// folder's `mod.rs` has every module in its table of reasons to change, so that a newcomer
/// finds each module under the reason it changes for.
#[test]
fn the_code_map_places_every_module_in_a_role() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let unplaced = |file: &Path| -> (Vec<String>, Vec<String>) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let table: String = text.lines().filter(|l| l.starts_with("//! |")).collect::<Vec<_>>().join("\n");
        let modules: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod "))
            .map(|m| m.trim().trim_end_matches(';').to_string())
            .collect();
        let missing = modules.iter().filter(|m| !table.contains(&format!("[`{m}`]"))).cloned().collect();
        (modules, missing)
    };
    let (folders, missing) = unplaced(&root.join("lib.rs"));
    assert!(folders.len() >= 8, "the folders were read: {folders:?}");
    assert!(missing.is_empty(), "lib.rs's code map has no role for {missing:?}");
    let roles = imports::role_folders(&root);
    assert!(roles.len() >= 6, "the role folders were found: {roles:?}");
    for role in &roles {
        let (modules, missing) = unplaced(&root.join(role).join("mod.rs"));
        assert!(!modules.is_empty(), "{role}/mod.rs declares no module");
        assert!(missing.is_empty(), "{role}/mod.rs's table has no reason to change for {missing:?}");
    }
}

/// The pure decisions are pure: nothing under `decisions/` imports an actor (its messages are
/// plain data, checked above), the process's wiring or the host's records' writers, nor uses
/// actix, tokio, a kube client or a clock of its own outside its tests. A decision that needed
/// one of them could no longer be tested on values or model-checked.
#[test]
fn the_decisions_use_no_actor_client_or_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = imports::controller_imports(&root);
    let allowed = |to: &str| {
        !to.starts_with("actors::") && !to.starts_with("runtime::") && !to.starts_with("leadership::leader")
            || to == "actors::messages"
    };
    let decisions: Vec<&imports::Edge> = edges.iter().filter(|e| e.from.starts_with("decisions::")).collect();
    assert!(decisions.len() > 10, "the scan finds the decisions' imports: {decisions:?}");
    let wrong: Vec<&str> = decisions.iter().filter(|e| !allowed(&e.to)).map(|e| e.at.as_str()).collect();
    assert!(wrong.is_empty(), "the decisions import actors or the process's wiring:\n{}", wrong.join("\n"));
    let forbidden = ["actix", "tokio", "Client", "Api", "Addr"];
    let mut used = Vec::new();
    for (file, text) in sources(&root.join("decisions")) {
        if file.ends_with("/tests.rs") || file.ends_with("_tests.rs") {
            continue;
        }
        let code = imports::code_only(&text);
        // Inline tests build their values with the clock; what they do is not the decision's.
        let inline_tests = code
            .match_indices("#[cfg(test)]")
            .map(|(i, _)| i)
            .find(|i| code[i + "#[cfg(test)]".len()..].trim_start().starts_with("mod tests {"));
        let code = &code[..inline_tests.unwrap_or(code.len())];
        for (line, text) in code.lines().enumerate() {
            let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric() && c != '_').collect();
            for word in forbidden.iter().filter(|w| words.contains(w)) {
                used.push(format!("{file}:{}: `{word}`", line + 1));
            }
            // A clock read (`Instant::now()`, `Timestamp::now()`): `now` comes in as a value.
            if text.replace(' ', "").contains("::now(") {
                used.push(format!("{file}:{}: a clock read", line + 1));
            }
        }
    }
    assert!(used.is_empty(), "the decisions use an actor, a client or a clock:\n{}", used.join("\n"));
}
