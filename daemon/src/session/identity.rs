//! Who a target really is, as OpenSSH sees it: `ssh -G` evaluates the user's configuration
//! without connecting, and its effective HostName and Port identify the server.

use sshmcp_proto::session::ConnectTarget;

/// The effective settings `connect` needs from `ssh -G`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Lower-cased: host names compare case-insensitively.
    pub host: String,
    pub port: u16,
    pub user: String,
    /// Whether the configuration already asks for keepalives; without them a dead link
    /// would only be noticed by TCP, minutes later.
    pub has_keepalive: bool,
}

/// The arguments that make `ssh` address `target` (after any `-F`): shared by `ssh -G` and the
/// master so both evaluate the same configuration.
pub fn target_args(target: &ConnectTarget) -> Vec<String> {
    match target {
        ConnectTarget::Alias { alias } => vec!["--".into(), alias.clone()],
        ConnectTarget::Direct { host, user, port } => {
            let mut args = vec!["-l".into(), user.clone()];
            if let Some(port) = port {
                args.extend(["-p".into(), port.to_string()]);
            }
            args.extend(["--".into(), host.clone()]);
            args
        }
    }
}

/// Parses `ssh -G` output (`keyword value` lines, keywords lower case).
pub fn parse_ssh_g(output: &str) -> Option<Resolved> {
    let mut host = None;
    let mut port = None;
    let mut user = None;
    let mut has_keepalive = false;
    for line in output.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        match key {
            "hostname" => host = Some(value.to_ascii_lowercase()),
            "port" => port = value.parse().ok(),
            "user" => user = Some(value.to_string()),
            "serveraliveinterval" => has_keepalive = value != "0",
            _ => {}
        }
    }
    Some(Resolved {
        host: host?,
        port: port?,
        user: user?,
        has_keepalive,
    })
}

/// A host, user or alias that could be read as an option or smuggle a second word is refused
/// before it reaches `ssh`.
pub fn check_word(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if value.starts_with('-') {
        return Err(format!("{field} must not start with '-'"));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{field} must not contain whitespace or control characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_effective_identity() {
        let out = "user bob\nhostname Example.COM\nport 2222\nserveraliveinterval 0\n";
        let r = parse_ssh_g(out).unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.user.as_str()),
            ("example.com", 2222, "bob")
        );
        assert!(!r.has_keepalive);
        assert!(parse_ssh_g("hostname x\n").is_none());
    }

    #[test]
    fn direct_target_args() {
        let t = ConnectTarget::Direct {
            host: "h".into(),
            user: "u".into(),
            port: Some(2),
        };
        assert_eq!(target_args(&t), ["-l", "u", "-p", "2", "--", "h"]);
        let a = ConnectTarget::Alias {
            alias: "box".into(),
        };
        assert_eq!(target_args(&a), ["--", "box"]);
    }

    #[test]
    fn refuses_option_like_words() {
        assert!(check_word("host", "-oProxyCommand=x").is_err());
        assert!(check_word("host", "a b").is_err());
        assert!(check_word("host", "").is_err());
        assert!(check_word("host", "db-1.example.com").is_ok());
    }
}
