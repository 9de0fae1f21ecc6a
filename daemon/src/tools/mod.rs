//! The operations of the tools declared in one place (their line in `daemon_methods!` ends in
//! `derived`): each is the file named after its tool, `<name>.rs`, with its remote program
//! beside it as `<name>.sh` when the program is its own (a family's shared programs stay in
//! the family's module). Their `mod` lines are made from the service's list, so adding such
//! a tool touches nothing here. `cargo fmt` does not reach files declared by a macro: run
//! `rustfmt --edition 2024 daemon/src/tools/*.rs` beside it.

/// A `mod` line for each derived tool of the list.
macro_rules! tool_modules {
    ($(
        $(#[$doc:meta])*
        $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
            $(=> $tool:ident in $group:ident, $reach:ident $(, $derived:ident)?)?;
    )*) => {
        $(tool_module!($name $($($derived)?)?);)*

        /// The derived tools' names, a word each, each the name of a file here.
        #[cfg(test)]
        const DERIVED: &str = concat!($(derived_name!($name $($($derived)?)?)),*);
    };
}

macro_rules! tool_module {
    ($name:ident derived) => {
        pub mod $name;
    };
    ($name:ident) => {};
}

#[cfg(test)]
macro_rules! derived_name {
    ($name:ident derived) => {
        concat!(stringify!($name), " ")
    };
    ($name:ident) => {
        ""
    };
}

sshmcp_proto::daemon_methods!(tool_modules);

#[cfg(test)]
mod tests {
    /// A file here whose tool's line lacks `derived` would never be compiled, its operation
    /// and its tests silently gone: every file here is a derived tool's.
    #[test]
    fn every_file_here_is_a_derived_tools() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|name| name.strip_suffix(".rs").map(String::from))
            .filter(|name| name != "mod")
            .collect();
        files.sort_unstable();
        let mut derived: Vec<&str> = super::DERIVED.split_whitespace().collect();
        derived.sort_unstable();
        assert_eq!(files, derived);
    }
}
