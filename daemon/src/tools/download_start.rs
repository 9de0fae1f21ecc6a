//! `download_start`: a remote file copied into the local root as a job (`transfers`).

crate::transfers::transfer_start_tool!(DownloadStart, Download);
