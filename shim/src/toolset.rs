//! Which tools this shim exposes (`--tools`): groups of tools, single tools, or `read-only`.
//! An agent that needs only a few tools then pays for only their descriptions.

use std::collections::BTreeSet;

/// The tools that change files and paths: a group, and one paragraph of the instructions.
pub const FILE_TOOLS: &[&str] = &[
    "write_file",
    "edit_file",
    "make_directory",
    "copy_path",
    "move_path",
    "remove_path",
];

/// The groups `--tools` takes, each with its tools, in the order the instructions follow.
pub const GROUPS: &[(&str, &[&str])] = &[
    ("sessions", &["connect", "disconnect", "session_list"]),
    (
        "commands",
        &[
            "exec",
            "sudo_exec",
            "command_start",
            "command_status",
            "command_kill",
            "command_list",
        ],
    ),
    ("tasks", &["task_launch", "task_status", "task_kill"]),
    ("inspect", &["stat", "list_directory", "read_file_range"]),
    ("files", FILE_TOOLS),
    (
        "transfers",
        &[
            "download_start",
            "upload_start",
            "transfer_status",
            "transfer_cancel",
            "transfer_list",
        ],
    ),
    (
        "forwards",
        &["forward_start", "forward_list", "forward_stop"],
    ),
];

/// The tools a `--tools` list selects: every tool when there is no list. The session tools
/// are always in, as every other tool needs a session.
pub fn select(list: Option<&str>) -> Result<BTreeSet<&'static str>, String> {
    let every = GROUPS.iter().flat_map(|(_, tools)| tools.iter().copied());
    let Some(list) = list else {
        return Ok(every.collect());
    };
    let words: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err("--tools: name at least one tool or group".to_string());
    }
    let mut chosen: BTreeSet<&'static str> = group("sessions").iter().copied().collect();
    for word in words {
        if word == "read-only" {
            let read_only = sshmcp_proto::policy::READ_ONLY_TOOLS;
            chosen.extend(every.clone().filter(|tool| read_only.contains(tool)));
        } else if let Some((_, tools)) = GROUPS.iter().find(|(name, _)| *name == word) {
            chosen.extend(tools.iter().copied());
        } else if let Some(tool) = every.clone().find(|tool| *tool == word) {
            chosen.insert(tool);
        } else {
            let groups: Vec<&str> = GROUPS.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "--tools: `{word}` is neither a tool nor a group (groups: {}, read-only)",
                groups.join(", ")
            ));
        }
    }
    Ok(chosen)
}

/// The tools of the group `name`.
fn group(name: &str) -> &'static [&'static str] {
    GROUPS
        .iter()
        .find(|(group, _)| *group == name)
        .map_or(&[], |(_, tools)| tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_list_is_every_tool_once() {
        let all = select(None).unwrap();
        let listed: usize = GROUPS.iter().map(|(_, tools)| tools.len()).sum();
        assert_eq!((all.len(), listed), (29, 29));
    }

    #[test]
    fn groups_and_tools_add_up_and_sessions_are_always_in() {
        let chosen = select(Some("inspect, exec")).unwrap();
        let expected = [
            "connect",
            "disconnect",
            "session_list",
            "stat",
            "list_directory",
            "read_file_range",
            "exec",
        ];
        assert_eq!(chosen, expected.into_iter().collect());
    }

    #[test]
    fn read_only_keeps_only_tools_a_read_only_host_keeps() {
        let chosen = select(Some("read-only")).unwrap();
        assert!(chosen.contains("read_file_range") && chosen.contains("download_start"));
        assert!(!chosen.contains("exec") && !chosen.contains("write_file"));
        let read_only = sshmcp_proto::policy::READ_ONLY_TOOLS;
        assert!(chosen.iter().all(|tool| read_only.contains(tool)));
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
