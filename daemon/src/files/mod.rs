//! The tools that change small remote files: each one fixed `/bin/sh` program on the building
//! block, the path written into it as base64 and the content on its stdin (never argv, never
//! shell text), publishing by a rename in the file's own directory.

pub mod write;
