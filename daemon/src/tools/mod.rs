//! The operations of the tools (each `tool` line of `daemon_methods!`): each is the file
//! named after its tool, `<name>.rs`, with its remote program beside it as `<name>.sh` when
//! the program is its own (a family's shared programs stay in the family's module). Their
//! `mod` lines are made from the service's list, so adding a tool touches nothing here.
//! `cargo fmt` does not reach files declared by a macro: run
//! `rustfmt --edition 2024 daemon/src/tools/*.rs` beside it.

/// A `mod` line for each `tool` line of the list.
macro_rules! tool_modules {
    ($(
        $(#[$doc:meta])*
        $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
            $(=> $tool:ident in $group:ident, $reach:ident)?;
    )*) => {
        $(tool_module!($form $name);)*

        /// The `tool` lines' names, a word each, each the name of a file here.
        #[cfg(test)]
        const OPERATIONS: &str = concat!($(operation_name!($form $name)),*);
    };
}

macro_rules! tool_module {
    (tool $name:ident) => {
        pub mod $name;
    };
    (fn $name:ident) => {};
}

#[cfg(test)]
macro_rules! operation_name {
    (tool $name:ident) => {
        concat!(stringify!($name), " ")
    };
    (fn $name:ident) => {
        ""
    };
}

sshmcp_proto::daemon_methods!(tool_modules);

#[cfg(test)]
mod tests {
    /// A file here that no `tool` line names would never be compiled, its operation and its
    /// tests silently gone: every file here is a tool's.
    #[test]
    fn every_file_here_is_a_tools_operation() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|name| name.strip_suffix(".rs").map(String::from))
            .filter(|name| name != "mod")
            .collect();
        files.sort_unstable();
        let mut operations: Vec<&str> = super::OPERATIONS.split_whitespace().collect();
        operations.sort_unstable();
        assert_eq!(files, operations);
    }
}
