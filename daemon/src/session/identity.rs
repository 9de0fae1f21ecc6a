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
    /// Whether the configuration's keepalives give a dead link up as soon as the daemon's
    /// would (45 s: three every 15 s); without them it would only be noticed by TCP, or by
    /// keepalives minutes apart (Debian's OpenSSH makes `BatchMode yes` imply 300 s).
    pub has_keepalive: bool,
    /// The ciphers the configuration offers, in its order.
    pub ciphers: Option<String>,
    /// The configuration has a `KnownHostsCommand` of its own (the daemon's would replace
    /// it: the host key is then not learned).
    pub known_hosts_command: bool,
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
    let (mut interval, mut count_max) = (0u32, 3u32);
    let mut ciphers = None;
    let mut known_hosts_command = false;
    for line in output.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        match key {
            "hostname" => host = Some(canonical_host(value)),
            "port" => port = value.parse().ok(),
            "user" => user = Some(value.to_string()),
            "serveraliveinterval" => interval = value.parse().unwrap_or(0),
            "serveralivecountmax" => count_max = value.parse().unwrap_or(u32::MAX),
            "ciphers" => ciphers = Some(value.to_string()),
            "knownhostscommand" => known_hosts_command = value != "none",
            _ => {}
        }
    }
    // The user's keepalives stand in for the daemon's when they give a dead link up as soon.
    let gives_up_after = interval.saturating_mul(count_max);
    let has_keepalive = interval > 0 && gives_up_after <= super::master::KEEPALIVE_GIVES_UP_SECS;
    Some(Resolved {
        host: host?,
        port: port?,
        user: user?,
        has_keepalive,
        ciphers,
        known_hosts_command,
    })
}

/// The form in which a server's host counts as its identity: an IP literal in its canonical
/// form (every IPv4 spelling `inet_aton` takes, and every IPv4-mapped IPv6 spelling, as the
/// dotted IPv4 address; other IPv6 addresses compressed), a name lower-cased and without the
/// final `.` of a fully qualified one. Otherwise `::ffff:127.0.0.1` would be another server
/// than `127.0.0.1`, `db1.example.com.` another than `db1.example.com`, and a policy written
/// for one would not meet the other. The unspecified addresses (`0.0.0.0`, `::`) reach this
/// machine, as a connect to them does: they are its loopback address. Names are not resolved.
pub fn canonical_host(host: &str) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let lower = host.to_ascii_lowercase();
    let lower = match lower.strip_suffix('.') {
        Some(name) if !name.is_empty() && !name.ends_with('.') => name.to_string(),
        _ => lower,
    };
    let ip = inet_aton(&lower).map(IpAddr::V4).or_else(|| {
        lower
            .parse::<Ipv6Addr>()
            .ok()
            .map(|v6| match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            })
    });
    match ip {
        Some(IpAddr::V4(v4)) if v4.is_unspecified() => Ipv4Addr::LOCALHOST.to_string(),
        Some(IpAddr::V6(v6)) if v6.is_unspecified() => Ipv6Addr::LOCALHOST.to_string(),
        Some(ip) => ip.to_string(),
        None => lower,
    }
}

/// An IPv4 address as the C library's `inet_aton` reads it (and so OpenSSH and the kernel):
/// one to four parts, each decimal, octal (a leading `0`) or hexadecimal (`0x`), the last
/// part filling the bytes the others left.
fn inet_aton(text: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) = match part.strip_prefix("0x") {
            Some(hex) => (hex, 16),
            None if part.len() > 1 && part.starts_with('0') => (&part[1..], 8),
            None => (*part, 10),
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        values.push(u32::from_str_radix(digits, radix).ok()?);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&v| v > 255) {
        return None;
    }
    let last_bits = 32 - 8 * leading.len() as u32;
    if last_bits < 32 && *last >= 1 << last_bits {
        return None;
    }
    let high = leading
        .iter()
        .enumerate()
        .fold(0u32, |acc, (i, &v)| acc | v << (24 - 8 * i as u32));
    Some(std::net::Ipv4Addr::from(high | last))
}

/// The fields of a connect target, each with the characters it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// A host name, an IPv4 address or an IPv6 address (no brackets).
    Host,
    /// A user name (`@` for directory users such as `user@domain`).
    User,
    /// A Host of the user's OpenSSH configuration, possibly as `user@host`.
    Alias,
}

impl Word {
    fn field(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::User => "user",
            Self::Alias => "alias",
        }
    }

    fn allows(self, c: char) -> bool {
        c.is_ascii_alphanumeric()
            || matches!(c, '.' | '-' | '_')
            || c == ':' && self != Self::User
            || c == '@' && self != Self::Host
    }

    fn allowed(self) -> &'static str {
        match self {
            Self::Host => "letters, digits and . - _ :",
            Self::User => "letters, digits and . - _ @",
            Self::Alias => "letters, digits and . - _ : @",
        }
    }
}

/// Accepts only what host names, addresses, user names and config Hosts need. Anything else
/// is refused before it reaches `ssh`: a leading `-` would read as an option, and shell
/// characters (`$()`, backticks, `;`, `|`) would run in a local shell wherever the user's
/// configuration expands `%h` or `%u` into a `ProxyCommand`, `LocalCommand` or `Match exec`
/// (OpenSSH before 9.6 does not check them itself). The value is never repeated.
pub fn check_word(word: Word, value: &str) -> Result<(), String> {
    let field = word.field();
    if value.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if value.len() > 255 {
        return Err(format!("{field} must be at most 255 bytes"));
    }
    if value.starts_with(['-', '.', '@']) {
        return Err(format!("{field} must start with a letter, a digit, _ or :"));
    }
    if !value.chars().all(|c| word.allows(c)) {
        return Err(format!("{field} may contain only {}", word.allowed()));
    }
    // An IPv6 address has two colons at least: one is a port written into the host.
    if word == Word::Host && value.matches(':').count() == 1 {
        return Err(format!(
            "{field} holds a port (`host:port`): give it in `port`"
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
        let keepalive = |secs: &str, count: &str| {
            let out = format!(
                "user b\nhostname h\nport 22\nserveraliveinterval {secs}\n\
                 serveralivecountmax {count}\n"
            );
            parse_ssh_g(&out).unwrap().has_keepalive
        };
        assert!(keepalive("15", "3") && keepalive("5", "9") && keepalive("1", "45"));
        assert!(
            !keepalive("16", "3") && !keepalive("300", "3"),
            "ours are added"
        );
        assert!(
            !keepalive("15", "4") && !keepalive("1", "46"),
            "ours are added"
        );
    }

    #[test]
    fn ip_literals_count_in_their_canonical_form() {
        for spelling in [
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "2130706433",
            "0x7f000001",
            "0X7F000001",
            "127.000.000.001",
            "0177.0.0.1",
            "::ffff:127.0.0.1",
            "::FFFF:127.0.0.1",
            "::ffff:7f00:1",
            "0:0:0:0:0:ffff:7f00:1",
            "0000:0000:0000:0000:0000:FFFF:7F00:0001",
        ] {
            assert_eq!(canonical_host(spelling), "127.0.0.1", "{spelling}");
        }
        assert_eq!(canonical_host("0:0:0:0:0:0:0:1"), "::1");
        assert_eq!(canonical_host("FE80:0:0:0:0:0:0:1"), "fe80::1");
        assert_eq!(canonical_host("2001:DB8::0:1"), "2001:db8::1");
        for name in [
            "Example.COM",
            "1e100.net",
            "256.1.1.1",
            "1.2.3.4.5",
            "0x",
            "08.1.1.1",
        ] {
            assert_eq!(canonical_host(name), name.to_ascii_lowercase(), "{name}");
        }
        assert_eq!(canonical_host("10.0.65535"), "10.0.255.255");
        assert_eq!(canonical_host("10.0.65536"), "10.0.65536");
        assert_eq!(canonical_host("4294967295"), "255.255.255.255");
        assert_eq!(canonical_host("4294967296"), "4294967296");
    }

    #[test]
    fn a_final_dot_and_the_unspecified_addresses_name_the_server_they_reach() {
        assert_eq!(canonical_host("DB1.example.com."), "db1.example.com");
        assert_eq!(canonical_host("127.0.0.1."), "127.0.0.1");
        // Only one final dot is a fully qualified name's; more stay, as a name ssh refuses.
        assert_eq!(canonical_host("db1.example.com.."), "db1.example.com..");
        assert_eq!(canonical_host("."), ".");
        for unspecified in ["0.0.0.0", "0", "0x0", "::ffff:0.0.0.0"] {
            assert_eq!(canonical_host(unspecified), "127.0.0.1", "{unspecified}");
        }
        assert_eq!(canonical_host("::"), "::1");
        assert_eq!(canonical_host("0:0:0:0:0:0:0:0"), "::1");
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
    fn refuses_option_like_and_shell_words() {
        for bad in [
            "-oProxyCommand=x",
            "a b",
            "",
            "$(touch x)",
            "`id`",
            "h;id",
            "h|id",
            "h&",
            "h%d",
            "prod-*",
            "it's",
            "a\nb",
            ".hidden",
        ] {
            for word in [Word::Host, Word::User, Word::Alias] {
                let err = check_word(word, bad).unwrap_err();
                assert!(bad.is_empty() || !err.contains(bad), "{err}");
            }
        }
        assert!(check_word(Word::Host, &"a".repeat(255)).is_ok());
        assert!(check_word(Word::Host, &"a".repeat(256)).is_err());
    }

    #[test]
    fn accepts_names_addresses_and_users() {
        for host in ["db-1.example.com", "10.0.0.1", "::1", "fe80::1", "my_host"] {
            assert_eq!(check_word(Word::Host, host), Ok(()), "{host}");
            assert_eq!(check_word(Word::Alias, host), Ok(()), "{host}");
        }
        for user in ["alice", "svc_deploy", "first.last", "user@corp.example"] {
            assert_eq!(check_word(Word::User, user), Ok(()), "{user}");
        }
        assert!(check_word(Word::Alias, "bob@box").is_ok());
        assert!(check_word(Word::Host, "bob@box").is_err());
        assert!(check_word(Word::User, "a:b").is_err());
        let port_in_host = check_word(Word::Host, "10.0.0.1:2222").unwrap_err();
        assert!(port_in_host.contains("`port`"), "{port_in_host}");
    }
}
