//! The daemon's layers point one way (tests only): the modules named by `crate::` paths in
//! each top-level module's product code (its tests left out) form no cycle, the building
//! block (`remote`) knows no session and no tool, and sessions know no tool (each tool keeps
//! its state in a slot the session does not interpret: `session::work`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The tools' modules.
const TOOLS: &[&str] = &[
    "commands",
    "exec",
    "files",
    "forwards",
    "inspect",
    "tasks",
    "tools",
    "transfers",
];

/// Each top-level module and the top-level modules its product code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if ["lib", "main", "layers", "programs"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let named = graph.entry(module.clone()).or_default();
        for name in named_modules(&product_code(&text)) {
            if name != module {
                named.insert(name);
            }
        }
    }
    graph
}

/// `text` without comments and without the items marked for tests (`#[cfg(test)]`,
/// `#[cfg(all(test, ...))]`): each such attribute and the item after it, up to the end of its
/// braces or its `;`.
fn product_code(text: &str) -> String {
    let uncommented: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = uncommented.as_str();
    while let Some(at) = ["#[cfg(test)]", "#[cfg(all(test"]
        .iter()
        .filter_map(|marker| rest.find(marker))
        .min()
    {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let item_end = match (rest.find('{'), rest.find(';')) {
            (Some(open), semi) if semi.is_none_or(|semi| open < semi) => {
                let mut depth = 0;
                let close = rest[open..].char_indices().find_map(|(i, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    (depth == 0).then_some(open + i)
                });
                close.map_or(rest.len(), |close| close + 1)
            }
            (_, Some(semi)) => semi + 1,
            _ => rest.len(),
        };
        rest = &rest[item_end..];
    }
    out.push_str(rest);
    out
}

/// The top-level modules `code` names by `crate::` paths, grouped ones (`crate::{a, b::{c,
/// d}}`) included.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + 7..];
        let paths: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut start = 0;
                let mut paths = Vec::new();
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            paths.push(&group[start..i]);
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            paths.push(&group[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                paths
            }
            None => vec![rest],
        };
        for path in paths {
            let name: String = path
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "self" {
                named.insert(name);
            }
        }
    }
    named
}

/// Whether `to` is reachable from `from`.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut next = vec![from.to_string()];
    while let Some(module) = next.pop() {
        for named in graph.get(&module).into_iter().flatten() {
            if named == to {
                return true;
            }
            if seen.insert(named.clone()) {
                next.push(named.clone());
            }
        }
    }
    false
}

#[test]
fn no_module_cycle_and_layers_point_one_way() {
    let graph = graph();
    assert!(
        graph.contains_key("session") && graph.contains_key("remote"),
        "{graph:?}"
    );
    for module in graph.keys() {
        assert!(
            !reaches(&graph, module, module),
            "{module} is in a cycle: {graph:?}"
        );
    }
    for tool in TOOLS {
        assert!(!reaches(&graph, "session", tool), "session reaches {tool}");
        assert!(!reaches(&graph, "remote", tool), "remote reaches {tool}");
    }
    assert!(
        !reaches(&graph, "remote", "session"),
        "remote reaches session"
    );
    // The graph, each module under all it uses, for `cargo test -p sshmcpd layers --
    // --nocapture` to show.
    let mut placed: Vec<&String> = Vec::new();
    while placed.len() < graph.len() {
        let before = placed.len();
        for (module, uses) in &graph {
            let ready = uses
                .iter()
                .all(|u| u == module || !graph.contains_key(u) || placed.contains(&u));
            if !placed.contains(&module) && ready {
                placed.push(module);
                let uses: Vec<&str> = uses.iter().map(String::as_str).collect();
                println!("{module} → {}", uses.join(", "));
            }
        }
        assert!(placed.len() > before, "no order: {graph:?}");
    }
}

#[test]
fn the_reading_of_crate_paths_sees_groups_and_skips_comments_and_tests() {
    let code = "use crate::{mux::{self, client}, session};\n\
                // crate::audit in a comment\n\
                #[cfg(test)]\n\
                pub fn fake(_: crate::policy::Policy) {}\n\
                fn after() { crate::remote::run(); }\n\
                #[cfg(test)]\n\
                use crate::config;\n\
                #[cfg(all(test, target_os = \"linux\"))]\n\
                mod tests { use crate::tasks; }\n";
    let named = named_modules(&product_code(code));
    let expected: BTreeSet<String> = ["mux", "session", "remote"].map(String::from).into();
    assert_eq!(named, expected);
}
