//! Which tools this shim exposes (`--tools`): groups of tools, single tools, or `read-only`.
//! An agent that needs only a few tools then pays for only their descriptions. The groups and
//! what a read-only host keeps come from the table of tools (`sshmcp_proto::tool`).

use std::collections::BTreeSet;

use sshmcp_proto::tool::{Group, Tool};

/// The tools a `--tools` list selects: every tool when there is no list. The session tools
/// are always in, as every other tool needs a session.
pub fn select(list: Option<&str>) -> Result<BTreeSet<&'static str>, String> {
    let Some(list) = list else {
        return Ok(Tool::all().map(Tool::name).collect());
    };
    let words: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err("--tools: name at least one tool or group".to_string());
    }
    let mut chosen: BTreeSet<&'static str> = Group::Sessions.tools().map(Tool::name).collect();
    for word in words {
        if word == "read-only" {
            chosen.extend(Tool::all().filter(|t| t.kept_read_only()).map(Tool::name));
        } else if let Some(group) = Group::named(word) {
            chosen.extend(group.tools().map(Tool::name));
        } else if let Some(tool) = Tool::named(word) {
            chosen.insert(tool.name());
        } else {
            let groups: Vec<&str> = Group::ALL.iter().map(|g| g.name()).collect();
            return Err(format!(
                "--tools: `{word}` is neither a tool nor a group (groups: {}, read-only)",
                groups.join(", ")
            ));
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_list_is_every_tool_once() {
        let every_group = Group::ALL.map(Group::name).join(",");
        let chosen = select(None).unwrap();
        assert_eq!(chosen, select(Some(&every_group)).unwrap());
        assert_eq!(chosen.len(), Tool::all().count());
    }

    #[test]
    fn groups_and_tools_add_up_and_sessions_are_always_in() {
        let chosen = select(Some("forwards, exec")).unwrap();
        let expected = [
            "connect",
            "disconnect",
            "session_list",
            "forward_start",
            "forward_stop",
            "forward_list",
            "exec",
        ];
        assert_eq!(chosen, expected.into_iter().collect());
    }

    #[test]
    fn read_only_keeps_only_tools_a_read_only_host_keeps() {
        let chosen = select(Some("read-only")).unwrap();
        assert!(chosen.contains("read_file_range") && chosen.contains("download_start"));
        assert!(!chosen.contains("exec") && !chosen.contains("write_file"));
        let kept = |name: &str| Tool::named(name).is_some_and(Tool::kept_read_only);
        assert!(chosen.iter().all(|tool| kept(tool)));
    }

    #[test]
    fn an_unknown_word_is_refused_with_the_groups() {
        let e = select(Some("files,shell")).unwrap_err();
        assert!(e.contains("`shell`") && e.contains("forwards"), "{e}");
        for empty in ["", " , "] {
            assert!(select(Some(empty)).is_err(), "{empty:?}");
        }
    }
}
