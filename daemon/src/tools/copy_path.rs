//! `copy_path`: a remote path copied on its host, atomically (`files::paths`).

crate::files::paths::copy_or_move_tool!(CopyPath, false);
