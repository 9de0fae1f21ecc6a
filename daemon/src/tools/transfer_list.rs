//! `transfer_list`: the session's transfers, from the daemon's own state.

use crate::transfers::Transfers;

crate::operation::listing!(TransferList, Transfers);
