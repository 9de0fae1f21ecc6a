//! What a read-only host keeps, as the contract lists it (TOOLS.md 6b): held here, outside
//! the table's own file, so adding a tool touches its list only where it is tested.

use sshmcp_proto::tool::{Reach, Tool};

#[test]
fn a_read_only_host_keeps_what_the_contract_lists() {
    let kept: Vec<&str> = Tool::all()
        .filter(|t| t.kept_read_only())
        .map(Tool::name)
        .collect();
    assert_eq!(
        kept,
        [
            "connect",
            "disconnect",
            "session_list",
            "command_status",
            "command_list",
            "task_status",
            "stat",
            "list_directory",
            "read_file_range",
            "host_info",
            "download_start",
            "transfer_status",
            "transfer_cancel",
            "transfer_list",
            "forward_list",
            "forward_stop",
        ]
    );
    assert_eq!(Tool::SudoExec.reach(), Reach::Root);
}
