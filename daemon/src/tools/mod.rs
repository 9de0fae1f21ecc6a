//! The operations of the tools declared in one place (their line in `daemon_methods!` ends in
//! `derived`): each is the file named after its tool, `<name>.rs`, with its remote program
//! beside it as `<name>.sh`. Their `mod` lines are made from the service's list, so adding such
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
    };
}

macro_rules! tool_module {
    ($name:ident derived) => {
        pub mod $name;
    };
    ($name:ident) => {};
}

sshmcp_proto::daemon_methods!(tool_modules);
