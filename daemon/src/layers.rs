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
        // Product code only: a module's tests sit at its end.
        let product = text.split("#[cfg(test)]").next().unwrap_or_default();
        let named = graph.entry(module.clone()).or_default();
        for (at, _) in product.match_indices("crate::") {
            let rest = &product[at + 7..];
            // `crate::a::b`, or a group: `crate::{a, b::c}`.
            let names = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(0)]
                    .split(',')
                    .map(str::trim)
                    .collect(),
                None => vec![rest],
            };
            for path in names {
                let name: String = path
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module && name != "self" {
                    named.insert(name);
                }
            }
        }
    }
    graph
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
}
