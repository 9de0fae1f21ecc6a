//! `upload_start`: a file of the local root copied to the host as a job (`transfers`).

crate::transfers::transfer_start_tool!(UploadStart, Upload);
