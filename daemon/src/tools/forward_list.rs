//! `forward_list`: the session's open forwards, from the daemon's own state.

use crate::forwards::Forwards;

crate::operation::listing!(ForwardList, Forwards);
