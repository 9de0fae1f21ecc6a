//! `command_list`: the session's command handles, from the daemon's own state.

use crate::commands::Commands;

crate::operation::listing!(CommandList, Commands);
