//! The user's per-host policy: the `[[policy]]` entries of the daemon's config file, matched
//! against each session's connect target and server host, and checked in one place (the
//! service's session path, and connect) before a call reaches the host. Agents cannot change
//! it; `sshmcp daemon reload` and SIGHUP read it again.

use serde::Deserialize;
use sshmcp_proto::policy::{PolicyEntryView, PolicyReport, READ_ONLY_TOOLS};
use sshmcp_proto::{DaemonError, ErrorCode};

/// The daemon's methods that are no tool an agent calls, though `CAPABILITIES` names them.
const NOT_TOOLS: &[&str] = &[
    "progress",
    "introduce",
    "policy",
    "reload_policy",
    "overview",
];

fn is_tool(name: &str) -> bool {
    sshmcp_proto::service::CAPABILITIES.contains(&name) && !NOT_TOOLS.contains(&name)
}

/// One `[[policy]]` entry, as the config file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Globs (`*`, `?`, `[...]`) against the connect target and the server host.
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    /// Only the tools of [`READ_ONLY_TOOLS`].
    #[serde(default)]
    pub read_only: bool,
    /// `false` refuses `sudo_exec`.
    #[serde(default = "allowed")]
    pub sudo: bool,
    /// Tools refused by name.
    #[serde(default)]
    pub deny: Vec<String>,
}

fn allowed() -> bool {
    true
}

impl Entry {
    /// Whether the entry applies to a session of `target` (as `connect` displays it) and
    /// `server_host`. The host named in a direct target counts on its own too: `connect`
    /// with `host: "prod-web"` goes through the `Host prod-web` block of the user's ssh
    /// config just as the alias does, so it must meet the same entries.
    fn matches(&self, target: &str, server_host: &str) -> bool {
        let named = named_host(target);
        self.patterns
            .iter()
            .any(|p| glob(p, target) || glob(p, named) || glob(p, server_host))
    }
}

/// The host a displayed target names: `user@host:port` and `user@host` give `host` (a port
/// is taken off only after a single colon, so an IPv6 address stays whole); an alias is
/// itself.
fn named_host(target: &str) -> &str {
    let host = target.rsplit_once('@').map_or(target, |(_, host)| host);
    match host.split_once(':') {
        Some((name, port))
            if !port.contains(':')
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            name
        }
        _ => host,
    }
}

/// The entries in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    entries: Vec<Entry>,
}

impl Policy {
    /// Checks what the file said: every entry matches something, and names only tools.
    pub fn new(entries: Vec<Entry>) -> Result<Self, String> {
        for (n, entry) in entries.iter().enumerate() {
            let place = format!("[[policy]] entry {}", n + 1);
            if entry.patterns.is_empty() || entry.patterns.iter().any(String::is_empty) {
                return Err(format!(
                    "{place}: `match` needs at least one non-empty pattern"
                ));
            }
            if let Some(unknown) = entry.deny.iter().find(|d| !is_tool(d)) {
                return Err(format!(
                    "{place}: `deny` names {unknown:?}, which is no tool of this daemon"
                ));
            }
        }
        Ok(Self { entries })
    }

    fn matching<'a>(
        &'a self,
        target: &'a str,
        server_host: &'a str,
    ) -> impl Iterator<Item = &'a Entry> {
        self.entries
            .iter()
            .filter(move |e| e.matches(target, server_host))
    }

    /// Refuses `tool` on a session of `target` and `server_host` when any matching entry
    /// does, naming the entry and the rule.
    pub fn check(&self, tool: &str, target: &str, server_host: &str) -> Result<(), DaemonError> {
        for entry in self.matching(target, server_host) {
            let rule = if entry.deny.iter().any(|d| d == tool) {
                format!("deny = [\"{tool}\"]")
            } else if entry.read_only && !READ_ONLY_TOOLS.contains(&tool) {
                "read_only = true".to_string()
            } else if !entry.sudo && tool == "sudo_exec" {
                "sudo = false".to_string()
            } else {
                continue;
            };
            return Err(DaemonError::new(
                ErrorCode::PolicyDenied,
                format!(
                    "{tool} is refused on this host by the user's policy: the entry \
                     match = {:?} has {rule}; nothing reached the host. Do not retry or work \
                     around it: ask the user (agents cannot change the policy)",
                    entry.patterns
                ),
            ));
        }
        Ok(())
    }

    /// The entries, each with the sessions (id, target, server host) it matches.
    pub fn report(
        &self,
        source: Option<String>,
        sessions: &[(String, String, String)],
        reload_error: Option<String>,
    ) -> PolicyReport {
        PolicyReport {
            source,
            entries: self
                .entries
                .iter()
                .map(|e| PolicyEntryView {
                    patterns: e.patterns.clone(),
                    read_only: e.read_only,
                    sudo: e.sudo,
                    deny: e.deny.clone(),
                    sessions: sessions
                        .iter()
                        .filter(|(_, target, host)| e.matches(target, host))
                        .map(|(id, _, _)| id.clone())
                        .collect(),
                })
                .collect(),
            reload_error,
        }
    }
}

/// Whether `text` matches the shell-style `pattern` as a whole: `*` any run of characters,
/// `?` one, `[abc]`, `[a-z]` and `[!a-z]` one of a set. Letters compare without case, as host
/// names do; a `[` without its `]` is taken literally.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    // Iterative matching with one backtrack point (the last `*`): linear in practice, never
    // exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(1),
            Some('[') => match class(&p[pi..], t[ti]) {
                Some((true, len)) => Some(len),
                Some((false, _)) => None,
                None => (t[ti] == '[').then_some(1),
            },
            Some(&c) => (c == t[ti]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(len), _) => {
                pi += len;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A `[...]` set at the start of `p`: whether `c` is in it, and the set's length; `None`
/// when the `]` is missing.
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let negated = matches!(p.get(1), Some('!' | '^'));
    let start = if negated { 2 } else { 1 };
    // A `]` right after the opening is a member, not the end.
    let end = start + 1 + p.get(start + 1..)?.iter().position(|&x| x == ']')?;
    let set = &p[start..end];
    let mut found = false;
    let mut i = 0;
    while i < set.len() {
        if i + 2 < set.len() && set[i + 1] == '-' {
            found |= set[i] <= c && c <= set[i + 2];
            i += 3;
        } else {
            found |= set[i] == c;
            i += 1;
        }
    }
    Some((found != negated, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names_without_case() {
        for (pattern, text) in [
            ("prod-*", "prod-web"),
            ("prod-*", "PROD-db"),
            ("db?.example.com", "db1.example.com"),
            ("*", ""),
            ("*.example.com", "a.b.example.com"),
            ("web[0-9]", "web7"),
            ("web[!0-9]", "webx"),
            ("a[]]b", "a]b"),
            ("x[y", "x[y"),
            ("*a*b*c*", "xaybzc"),
        ] {
            assert!(glob(pattern, text), "{pattern} {text}");
        }
        for (pattern, text) in [
            ("prod-*", "preprod-web"),
            ("db?.example.com", "db12.example.com"),
            ("web[0-9]", "webx"),
            ("web[!0-9]", "web7"),
            ("prod", "prod-web"),
            ("*a*b*c*", "xaybz"),
        ] {
            assert!(!glob(pattern, text), "{pattern} {text}");
        }
        // No blow-up on a pathological pattern.
        assert!(!glob(
            &"*a".repeat(30),
            &"a".repeat(200).replace("aa", "ab")
        ));
    }

    fn policy(toml_text: &str) -> Result<Policy, String> {
        #[derive(Deserialize)]
        struct File {
            policy: Vec<Entry>,
        }
        let file: File = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        Policy::new(file.policy)
    }

    #[test]
    fn entries_refuse_by_read_only_sudo_and_name_and_say_which() {
        let p = policy(
            r#"
            [[policy]]
            match = ["prod-*"]
            read_only = true
            [[policy]]
            match = ["10.0.0.*"]
            sudo = false
            deny = ["forward_start"]
            "#,
        )
        .unwrap();
        let e = p.check("exec", "prod-web", "10.1.1.1").unwrap_err();
        assert_eq!(e.code, ErrorCode::PolicyDenied);
        assert!(e.message.contains("[\"prod-*\"]") && e.message.contains("read_only = true"));
        for tool in READ_ONLY_TOOLS {
            assert!(p.check(tool, "prod-web", "10.1.1.1").is_ok(), "{tool}");
        }
        for tool in [
            "upload_start",
            "write_file",
            "sudo_exec",
            "forward_start",
            "task_kill",
        ] {
            assert!(p.check(tool, "prod-web", "10.1.1.1").is_err(), "{tool}");
        }
        // The second entry by server host.
        assert!(p.check("exec", "dev", "10.0.0.5").is_ok());
        let e = p.check("sudo_exec", "dev", "10.0.0.5").unwrap_err();
        assert!(e.message.contains("sudo = false"), "{}", e.message);
        let e = p.check("forward_start", "dev", "10.0.0.5").unwrap_err();
        assert!(
            e.message.contains("deny = [\"forward_start\"]"),
            "{}",
            e.message
        );
        assert!(p.check("sudo_exec", "dev", "192.168.0.1").is_ok());
        // A host given directly meets the entries of its alias's name.
        assert!(p.check("exec", "deploy@prod-web:2222", "10.9.9.9").is_err());
        assert!(p.check("exec", "deploy@prod-web", "10.9.9.9").is_err());
        assert!(p.check("exec", "deploy@[::1]", "::1").is_ok());
        assert_eq!(named_host("u@::1"), "::1");
        assert_eq!(named_host("u@h:22"), "h");
        assert_eq!(named_host("alias"), "alias");
        let report = p.report(
            None,
            &[
                ("s1".into(), "prod-web".into(), "10.0.0.9".into()),
                ("s2".into(), "dev".into(), "192.168.0.1".into()),
            ],
            None,
        );
        assert_eq!(report.entries[0].sessions, ["s1"]);
        assert_eq!(report.entries[1].sessions, ["s1"]);
    }

    #[test]
    fn a_bad_entry_is_refused_with_its_place() {
        let e = policy("[[policy]]\nmatch = []\n").unwrap_err();
        assert!(e.contains("entry 1") && e.contains("match"), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\ndeny = [\"exce\"]\n").unwrap_err();
        assert!(e.contains("\"exce\""), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\ndeny = [\"overview\"]\n").unwrap_err();
        assert!(e.contains("\"overview\""), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\nreadonly = true\n").unwrap_err();
        assert!(e.contains("readonly"), "{e}");
    }
}
