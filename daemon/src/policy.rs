//! The user's per-host policy: the `[[policy]]` entries of the daemon's config file, matched
//! against each session's connect target and server host, and followed by host key (a server
//! is who its key says, whatever name, address or forwarded port reached it), and checked in
//! one place (the service's session path, and connect) before a call reaches the host. Agents
//! cannot change it; `sshmcp daemon reload` and SIGHUP read it again.

use serde::Deserialize;
use sshmcp_proto::policy::{PolicyEntryView, PolicyReport};
use sshmcp_proto::tool::{Reach, Tool};
use sshmcp_proto::{DaemonError, ErrorCode};

/// One `[[policy]]` entry, as the config file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Globs (`*`, `?`, `[...]`) against the connect target and the server host.
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    /// Only the tools that change nothing on the host ([`Reach::ChangesNothing`]).
    #[serde(default)]
    pub read_only: bool,
    /// `false` refuses `sudo_exec`.
    #[serde(default = "allowed")]
    pub sudo: bool,
    /// Tools refused by name.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Host key fingerprints (`SHA256:…`, as `ssh-keygen -l` shows them): a session whose
    /// master verified one of them is governed whatever name reached it.
    #[serde(default)]
    pub host_keys: Vec<String>,
}

/// What a session is to the policy: the names that reached it and the key its master
/// verified, when known.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub target: &'a str,
    pub server_host: &'a str,
    pub host_key: Option<&'a str>,
}

/// Why an entry governs a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A `match` glob met its target or server host.
    Name,
    /// Its master verified a host key the entry lists, or saw on a session it matched by name.
    HostKey,
}

/// The host keys each entry has seen on the sessions it matched by name, by the entry's
/// `match` (its identity across edits of its rules); kept in the state directory, so a
/// server stays known across restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct LearnedKeys {
    entries: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl LearnedKeys {
    fn of(&self, entry: &Entry) -> Option<&std::collections::BTreeSet<String>> {
        self.entries.get(&entry.identity())
    }
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

    /// Whether, and why, the entry governs `subject`.
    fn governs(&self, subject: &Subject<'_>, learned: &LearnedKeys) -> Option<Why> {
        if self.matches(subject.target, subject.server_host) {
            return Some(Why::Name);
        }
        let key = subject.host_key?;
        let seen = learned.of(self).is_some_and(|keys| keys.contains(key));
        (seen || self.host_keys.iter().any(|k| k == key)).then_some(Why::HostKey)
    }

    /// What names the entry across reloads: its `match`.
    fn identity(&self) -> String {
        self.patterns.join("\n")
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
            if let Some(unknown) = entry.deny.iter().find(|d| Tool::named(d).is_none()) {
                return Err(format!(
                    "{place}: `deny` names {unknown:?}, which is no tool of this daemon"
                ));
            }
            // session_list answers from the daemon alone, about every host at once: no
            // entry can refuse it, so naming it would promise what no check keeps.
            if entry.deny.iter().any(|d| d == Tool::SessionList.name()) {
                return Err(format!(
                    "{place}: `deny` names \"session_list\", which reaches no host and lists \
                     every session, so no host's entry can refuse it"
                ));
            }
            if let Some(bad) = entry.host_keys.iter().find(|k| !is_fingerprint(k)) {
                return Err(format!(
                    "{place}: `host_keys` holds {bad:?}, which is no SHA256 fingerprint as \
                     `ssh-keygen -l -E sha256` prints it (SHA256: then 43 characters)"
                ));
            }
        }
        Ok(Self { entries })
    }

    /// How many entries it holds.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// The entries that govern `subject`, each with why.
    fn governing<'a>(
        &'a self,
        subject: &'a Subject<'a>,
        learned: &'a LearnedKeys,
    ) -> impl Iterator<Item = (&'a Entry, Why)> {
        self.entries
            .iter()
            .filter_map(move |e| Some((e, e.governs(subject, learned)?)))
    }

    /// Refuses `tool` on `subject` when any entry that governs it does, naming the entry,
    /// the rule and, for an entry that governs by host key, that it does so.
    pub fn check(
        &self,
        tool: Tool,
        subject: &Subject<'_>,
        learned: &LearnedKeys,
    ) -> Result<(), DaemonError> {
        for (entry, why) in self.governing(subject, learned) {
            let rule = if entry.deny.iter().any(|d| d == tool.name()) {
                format!("deny = [\"{tool}\"]")
            } else if entry.read_only && !tool.kept_read_only() {
                "read_only = true".to_string()
            } else if !entry.sudo && tool.reach() == Reach::Root {
                "sudo = false".to_string()
            } else {
                continue;
            };
            let by_key = match why {
                Why::Name => "",
                Why::HostKey => " (it governs this server by its host key)",
            };
            return Err(DaemonError::new(
                ErrorCode::PolicyDenied,
                format!(
                    "{tool} is refused on this host by the user's policy: the entry \
                     match = {:?}{by_key} has {rule}; nothing reached the host. Do not retry \
                     or work around it: ask the user (agents cannot change the policy)",
                    entry.patterns
                ),
            ));
        }
        Ok(())
    }

    /// Notes `subject`'s host key for every entry that matches it by name; whether that
    /// taught `learned` anything new.
    pub fn learn(&self, subject: &Subject<'_>, learned: &mut LearnedKeys) -> bool {
        let Some(key) = subject.host_key else {
            return false;
        };
        let mut changed = false;
        for entry in &self.entries {
            if entry.matches(subject.target, subject.server_host) {
                changed |= learned
                    .entries
                    .entry(entry.identity())
                    .or_default()
                    .insert(key.to_string());
            }
        }
        changed
    }

    /// How each entry that governs `subject` is shown: its `match`, and why.
    pub fn explain(&self, subject: &Subject<'_>, learned: &LearnedKeys) -> Vec<String> {
        self.governing(subject, learned)
            .map(|(entry, why)| {
                let why = match why {
                    Why::Name => "by name",
                    Why::HostKey => "by host key",
                };
                format!("{} ({why})", entry.patterns.join(", "))
            })
            .collect()
    }

    /// The entries, each with its host keys (listed and learned) and the sessions it
    /// governs, by name or by host key.
    pub fn report(
        &self,
        source: Option<String>,
        sessions: &[(String, Subject<'_>)],
        learned: &LearnedKeys,
        reload_error: Option<String>,
    ) -> PolicyReport {
        let governed = |e: &Entry, why: Why| -> Vec<String> {
            sessions
                .iter()
                .filter(|(_, subject)| e.governs(subject, learned) == Some(why))
                .map(|(id, _)| id.clone())
                .collect()
        };
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
                    sessions: governed(e, Why::Name),
                    host_keys: e
                        .host_keys
                        .iter()
                        .chain(learned.of(e).into_iter().flatten())
                        .cloned()
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect(),
                    sessions_by_key: governed(e, Why::HostKey),
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

/// Whether `text` has the form of a host key fingerprint as entries list them
/// (`SHA256:` and 43 base64 digits of 32 bytes, as OpenSSH prints them).
pub fn is_fingerprint(text: &str) -> bool {
    use base64::Engine as _;
    text.strip_prefix("SHA256:").is_some_and(|b| {
        b.len() == 43
            && base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(b)
                .is_ok_and(|d| d.len() == 32)
    })
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

    /// `p`'s check on a session of `target` and `server_host` whose host key is unknown.
    fn check(p: &Policy, tool: &str, target: &str, server_host: &str) -> Result<(), DaemonError> {
        let subject = Subject {
            target,
            server_host,
            host_key: None,
        };
        let tool = Tool::named(tool).expect("a tool's name");
        p.check(tool, &subject, &LearnedKeys::default())
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
        let e = check(&p, "exec", "prod-web", "10.1.1.1").unwrap_err();
        assert_eq!(e.code, ErrorCode::PolicyDenied);
        assert!(e.message.contains("[\"prod-*\"]") && e.message.contains("read_only = true"));
        for tool in Tool::all().filter(|t| t.kept_read_only()) {
            assert!(
                check(&p, tool.name(), "prod-web", "10.1.1.1").is_ok(),
                "{tool}"
            );
        }
        for tool in [
            "upload_start",
            "write_file",
            "sudo_exec",
            "forward_start",
            "task_kill",
        ] {
            assert!(check(&p, tool, "prod-web", "10.1.1.1").is_err(), "{tool}");
        }
        // The second entry by server host.
        assert!(check(&p, "exec", "dev", "10.0.0.5").is_ok());
        let e = check(&p, "sudo_exec", "dev", "10.0.0.5").unwrap_err();
        assert!(e.message.contains("sudo = false"), "{}", e.message);
        let e = check(&p, "forward_start", "dev", "10.0.0.5").unwrap_err();
        assert!(
            e.message.contains("deny = [\"forward_start\"]"),
            "{}",
            e.message
        );
        assert!(check(&p, "sudo_exec", "dev", "192.168.0.1").is_ok());
        // A host given directly meets the entries of its alias's name.
        assert!(check(&p, "exec", "deploy@prod-web:2222", "10.9.9.9").is_err());
        assert!(check(&p, "exec", "deploy@prod-web", "10.9.9.9").is_err());
        assert!(check(&p, "exec", "deploy@[::1]", "::1").is_ok());
        assert_eq!(named_host("u@::1"), "::1");
        assert_eq!(named_host("u@h:22"), "h");
        assert_eq!(named_host("alias"), "alias");
        let subject = |target, server_host| Subject {
            target,
            server_host,
            host_key: None,
        };
        let report = p.report(
            None,
            &[
                ("s1".into(), subject("prod-web", "10.0.0.9")),
                ("s2".into(), subject("dev", "192.168.0.1")),
            ],
            &LearnedKeys::default(),
            None,
        );
        assert_eq!(report.entries[0].sessions, ["s1"]);
        assert_eq!(report.entries[1].sessions, ["s1"]);
    }

    /// An entry that matched a session by name follows its server's host key to a session
    /// reached by any other name; one may list keys itself; a bad fingerprint is refused.
    #[test]
    fn an_entry_follows_the_host_keys_it_saw_and_lists() {
        const KEY: &str = "SHA256:OLPuDcwUB5lEI0QnKUHT2HCfQi9xlztX/w52aGiigPs";
        const OTHER: &str = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU";
        let p = policy(&format!(
            "[[policy]]\nmatch = [\"127.0.0.1\"]\nread_only = true\n\n\
             [[policy]]\nmatch = [\"listed\"]\nhost_keys = [\"{OTHER}\"]\nsudo = false\n"
        ))
        .unwrap();
        let mut learned = LearnedKeys::default();
        let by_address = Subject {
            target: "u@127.0.0.1:22",
            server_host: "127.0.0.1",
            host_key: Some(KEY),
        };
        let by_alias = Subject {
            target: "other-name",
            server_host: "localhost",
            host_key: Some(KEY),
        };
        assert!(
            p.check(Tool::Exec, &by_alias, &learned).is_ok(),
            "not seen yet"
        );
        assert!(p.learn(&by_address, &mut learned));
        assert!(!p.learn(&by_address, &mut learned), "nothing new");
        let e = p.check(Tool::Exec, &by_alias, &learned).unwrap_err();
        assert!(e.message.contains("by its host key"), "{}", e.message);
        assert_eq!(p.explain(&by_alias, &learned), ["127.0.0.1 (by host key)"]);
        assert_eq!(p.explain(&by_address, &learned), ["127.0.0.1 (by name)"]);
        // A listed key governs without ever being seen.
        let listed = Subject {
            target: "x",
            server_host: "y",
            host_key: Some(OTHER),
        };
        let e = p.check(Tool::SudoExec, &listed, &learned).unwrap_err();
        assert!(e.message.contains("sudo = false"), "{}", e.message);
        let report = p.report(
            None,
            &[("s1".into(), by_address), ("s2".into(), by_alias)],
            &learned,
            None,
        );
        assert_eq!(report.entries[0].sessions, ["s1"]);
        assert_eq!(report.entries[0].sessions_by_key, ["s2"]);
        assert_eq!(report.entries[0].host_keys, [KEY]);
        assert_eq!(report.entries[1].host_keys, [OTHER]);
        let e = policy("[[policy]]\nmatch = [\"a\"]\nhost_keys = [\"MD5:aa\"]\n").unwrap_err();
        assert!(e.contains("host_keys") && e.contains("entry 1"), "{e}");
    }

    #[test]
    fn a_bad_entry_is_refused_with_its_place() {
        let e = policy("[[policy]]\nmatch = []\n").unwrap_err();
        assert!(e.contains("entry 1") && e.contains("match"), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\ndeny = [\"exce\"]\n").unwrap_err();
        assert!(e.contains("\"exce\""), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\ndeny = [\"overview\"]\n").unwrap_err();
        assert!(e.contains("\"overview\""), "{e}");
        // Nothing could enforce it: refused rather than silently kept.
        let e = policy("[[policy]]\nmatch = [\"a\"]\ndeny = [\"session_list\"]\n").unwrap_err();
        assert!(e.contains("reaches no host"), "{e}");
        let e = policy("[[policy]]\nmatch = [\"a\"]\nreadonly = true\n").unwrap_err();
        assert!(e.contains("readonly"), "{e}");
    }
}
