//! `move_path`: a remote path moved or renamed on its host (`files::paths`).

crate::files::paths::copy_or_move_tool!(MovePath, true);
