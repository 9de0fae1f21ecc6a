//! The host key a master verified, learned through OpenSSH itself and never by a second
//! connection: each master runs with `KnownHostsCommand` pointing at this daemon's binary,
//! which ssh runs while it checks the server's key (with the key as `%t %K`); the binary
//! appends what it was given to a private file of the session and prints nothing, so the
//! user's known_hosts and `StrictHostKeyChecking` decide as they always do. A master that
//! comes up got past that check, so the key it reported is the one it verified. The policy
//! follows servers by these fingerprints (see `policy`).
//!
//! Not learned (the session then has no host key, and only names match its policy) where the
//! local OpenSSH predates `KnownHostsCommand` (8.5), where the user's configuration has a
//! `KnownHostsCommand` of its own (ours would replace it), or where this binary's path is not
//! one ssh's argument splitting can carry.

use std::ffi::OsString;
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The first argument that makes this binary the reporter.
pub const REPORT_ARG: &str = "--host-key-report";

/// The file the reporter appends to (set in the master's environment, which ssh passes on).
const FILE_VAR: &str = "SSHMCP_HOST_KEY_FILE";

/// Runs the reporter when ssh started this binary as one: appends `invocation type
/// fingerprint key` to the session's file and exits 0 with nothing on stdout (no known_hosts
/// lines of its own; an exit other than 0 would fail ssh's connection).
pub fn run_if_requested() -> Option<u8> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != REPORT_ARG {
        return None;
    }
    let words: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    if let (Some(file), [invocation, kind, fingerprint, key]) =
        (std::env::var_os(FILE_VAR), &words[..])
    {
        let line = format!("{invocation} {kind} {fingerprint} {key}\n");
        let _ = append(Path::new(&file), &line);
    }
    Some(0)
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?
        .write_all(line.as_bytes())
}

/// The `-o` option that makes a master run the reporter, or `None` when this binary's path
/// cannot be carried (see [`command_word`]). The master runs it again at each rekey, also
/// after this daemon is gone, so the path is the binary's file
/// ([`crate::platform::lasting_binary`]), else, where that cannot be carried, the one that
/// names it while the daemon lives.
pub fn master_option() -> Option<OsString> {
    let word = |path: std::io::Result<std::path::PathBuf>| command_word(path.ok()?.to_str()?);
    let command =
        word(crate::platform::lasting_binary()).or_else(|| word(crate::platform::own_binary()))?;
    Some(format!("KnownHostsCommand={command} {REPORT_ARG} %I %t %f %K").into())
}

/// The environment that tells the reporter of one master start where to write.
pub fn report_env(file: &Path) -> (OsString, OsString) {
    (FILE_VAR.into(), file.as_os_str().to_owned())
}

/// `path` as the first word of a command ssh splits (double quotes, backslash escapes) and
/// percent-expands: a path with `%`, `$`, a quote, a backslash or a control character is not
/// carried, rather than risk another program.
fn command_word(path: &str) -> Option<String> {
    let plain = path.starts_with('/')
        && !path
            .chars()
            .any(|c| c.is_control() || matches!(c, '%' | '$' | '"' | '\'' | '\\'));
    plain.then(|| format!("\"{path}\""))
}

/// Whether the local OpenSSH has `KnownHostsCommand` (8.5 and later), from `ssh -V`'s
/// `OpenSSH_X.Yp…`.
pub fn version_supports(ssh_v: &str) -> bool {
    let Some(rest) = ssh_v.trim_start().strip_prefix("OpenSSH_") else {
        return false;
    };
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (8, 5)
}

/// Whether this machine's `ssh` can report host keys; asked once.
pub async fn supported() -> bool {
    static SUPPORTED: tokio::sync::OnceCell<bool> = tokio::sync::OnceCell::const_new();
    *SUPPORTED
        .get_or_init(|| async {
            let out = tokio::process::Command::new("ssh")
                .arg("-V")
                .stdin(std::process::Stdio::null())
                .output()
                .await;
            // `ssh -V` writes its version on stderr.
            out.is_ok_and(|o| version_supports(&String::from_utf8_lossy(&o.stderr)))
        })
        .await
}

/// The fingerprint (`SHA256:…`, as `ssh-keygen -l` shows it) of the key the master verified,
/// from what the reporter wrote for the host's name (the last time): ssh's own fingerprint
/// when it is SHA256 (for a host certificate it is the certified key's, not the
/// certificate's, so a re-issued certificate is the same server); else the SHA-256 of a
/// plain key (a `FingerprintHash md5` configuration); none for a certificate then.
pub fn fingerprint(reported: &str) -> Option<String> {
    let (kind, given, key) = reported.lines().rev().find_map(|l| {
        let mut words = l.split(' ');
        let (invocation, kind) = (words.next()?, words.next()?);
        let (given, key) = (words.next()?, words.next()?);
        (invocation == "HOSTNAME" && key != "NONE").then_some((kind, given, key))
    })?;
    if crate::policy::is_fingerprint(given) {
        return Some(given.to_string());
    }
    if kind.contains("-cert-") {
        return None;
    }
    let blob = base64::engine::general_purpose::STANDARD.decode(key).ok()?;
    let digest = Sha256::digest(&blob);
    Some(format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key and its fingerprint as `ssh-keygen -lf` printed it.
    const KEY: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIHgZyNgxuxUOqeyD+vmtqiBarvU/9Z2xSPAU6KIiaGsG";
    const FINGERPRINT: &str = "SHA256:OLPuDcwUB5lEI0QnKUHT2HCfQi9xlztX/w52aGiigPs";

    #[test]
    fn the_fingerprint_is_ssh_keygens_of_the_hosts_key() {
        let md5 = "MD5:aa:bb";
        let reported = format!(
            "ORDER NONE NONE NONE\nADDRESS ssh-ed25519 {md5} {KEY}\n\
             HOSTNAME ssh-ed25519 {md5} {KEY}\n"
        );
        assert_eq!(
            fingerprint(&reported).as_deref(),
            Some(FINGERPRINT),
            "from the key"
        );
        let cert = "ssh-ed25519-cert-v01@openssh.com";
        let reported = format!("HOSTNAME {cert} {FINGERPRINT} AAAAcertblob\n");
        assert_eq!(
            fingerprint(&reported).as_deref(),
            Some(FINGERPRINT),
            "ssh's own"
        );
        assert_eq!(fingerprint(&format!("HOSTNAME {cert} {md5} AAAA\n")), None);
        assert_eq!(fingerprint("ORDER NONE NONE NONE\n"), None);
        assert_eq!(fingerprint("HOSTNAME ssh-ed25519 MD5:x not*base64\n"), None);
        assert!(crate::policy::is_fingerprint(FINGERPRINT));
        assert!(
            !crate::policy::is_fingerprint("SHA256:short")
                && !crate::policy::is_fingerprint("MD5:aa:bb")
        );
    }

    #[test]
    fn only_openssh_8_5_and_later_can_report() {
        for (said, can) in [
            ("OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19", true),
            ("OpenSSH_8.5p1, LibreSSL 3.3.1", true),
            ("OpenSSH_10.0p2", true),
            ("OpenSSH_8.4p1 Debian-5+deb11u3", false),
            ("OpenSSH_7.9", false),
            ("Sun_SSH_1.1", false),
        ] {
            assert_eq!(version_supports(said), can, "{said}");
        }
    }

    #[test]
    fn only_plain_absolute_paths_are_carried() {
        assert_eq!(
            command_word("/usr/local/bin/my sshmcpd").as_deref(),
            Some("\"/usr/local/bin/my sshmcpd\"")
        );
        for bad in [
            "relative/sshmcpd",
            "/a%h",
            "/a$b",
            "/a\"b",
            "/a\\b",
            "/a'b",
            "/a\nb",
        ] {
            assert_eq!(command_word(bad), None, "{bad}");
        }
    }
}
