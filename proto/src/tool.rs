//! Every tool an agent calls, in one table: its name, its group, and how the per-host policy
//! treats it, made from the service's list of methods (`service::daemon_methods!`). The
//! daemon's capabilities, its policy checks and its audit lines, and the shim's tool groups
//! and `--tools` choices, are all derived from this table.

/// The groups `sshmcp-mcp --tools` takes, in the order the server's instructions speak of
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    Sessions,
    Commands,
    Tasks,
    Inspect,
    Files,
    Transfers,
    Forwards,
}

/// What a tool may do to a host, as the per-host policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Changes nothing on the host: a `read_only` host keeps it.
    ChangesNothing,
    /// Runs a command or changes the host: refused on a `read_only` host.
    Changes,
    /// Runs a command as root: refused on a `read_only` host and where `sudo = false`.
    Root,
}

/// One row of the table.
struct Row {
    tool: Tool,
    name: &'static str,
    group: Group,
    reach: Reach,
}

const fn row(tool: Tool, name: &'static str, group: Group, reach: Reach) -> Row {
    Row {
        tool,
        name,
        group,
        reach,
    }
}

use Group::*;
use Reach::*;

/// The tool enum and its table, from the service's list of methods: a tool is declared there
/// once (`daemon_methods!`), in wire order, which is the table's order.
macro_rules! tool_table {
    ($(
        $(#[$doc:meta])*
        $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
            $(=> $tool:ident in $group:ident, $reach:ident)?;
    )*) => {
        /// A tool an agent calls.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Tool {
            $($($tool,)?)*
        }

        /// The table, in the order of [`Tool`]'s variants (a test holds it to that).
        const TABLE: &[Row] = &[
            $($(row(Tool::$tool, stringify!($name), $group, $reach),)?)*
        ];
    };
}

crate::daemon_methods!(tool_table);

impl Tool {
    /// Every tool, group by group in [`Group::ALL`]'s order (the order people read them
    /// in), each group's in the table's.
    pub fn all() -> impl Iterator<Item = Tool> + Clone {
        Group::ALL.into_iter().flat_map(Group::tools)
    }

    /// The tool named `name`, if any.
    pub fn named(name: &str) -> Option<Tool> {
        TABLE
            .iter()
            .find(|row| row.name == name)
            .map(|row| row.tool)
    }

    /// Its name, as MCP clients, the audit trail and the policy's `deny` lists write it.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    pub fn group(self) -> Group {
        self.row().group
    }

    pub fn reach(self) -> Reach {
        self.row().reach
    }

    /// Whether a `read_only` host keeps it.
    pub fn kept_read_only(self) -> bool {
        self.reach() == ChangesNothing
    }

    fn row(self) -> &'static Row {
        &TABLE[self as usize]
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Group {
    /// Every group, in the order the instructions speak of them.
    pub const ALL: [Group; 7] = [
        Sessions, Commands, Tasks, Inspect, Files, Transfers, Forwards,
    ];

    /// Its name, as `--tools` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Sessions => "sessions",
            Commands => "commands",
            Tasks => "tasks",
            Inspect => "inspect",
            Files => "files",
            Transfers => "transfers",
            Forwards => "forwards",
        }
    }

    /// The group named `name`, if any.
    pub fn named(name: &str) -> Option<Group> {
        Self::ALL.into_iter().find(|group| group.name() == name)
    }

    /// Its tools, in the table's order.
    pub fn tools(self) -> impl Iterator<Item = Tool> + Clone {
        TABLE
            .iter()
            .map(|row| row.tool)
            .filter(move |tool| tool.group() == self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_follows_the_variants_and_names_each_tool_once() {
        for (n, row) in TABLE.iter().enumerate() {
            assert_eq!(row.tool as usize, n, "{}", row.name);
            assert_eq!(Tool::named(row.name), Some(row.tool));
        }
        let mut names: Vec<&str> = Tool::all().map(Tool::name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        assert_eq!(Tool::named("exce"), None);
    }

    #[test]
    fn every_tool_is_in_one_group_and_groups_are_named() {
        let grouped: usize = Group::ALL.iter().map(|g| g.tools().count()).sum();
        assert_eq!(grouped, TABLE.len());
        for group in Group::ALL {
            assert_eq!(Group::named(group.name()), Some(group));
        }
    }
}
