//! What people see: tables fitted to the terminal (the sessions table among them), the status
//! text, and their JSON forms.

use std::time::SystemTime;

use sshmcp_proto::DaemonStatus;
use sshmcp_proto::session::SessionSummary;
use sshmcp_proto::time::parse_rfc3339;

/// The sessions as a table that fits in `width` columns when given: the target, server and
/// user columns give up room first (cut with `…`). Times are ages relative to `now`. Empty
/// listings say so in words.
pub fn sessions_table(rows: &[SessionSummary], now: SystemTime, width: Option<usize>) -> String {
    if rows.is_empty() {
        return "no sessions\n".to_string();
    }
    const HEADER: [&str; 10] = [
        "SESSION", "STATE", "TARGET", "SERVER", "USER", "AGE", "LAST USE", "CMDS", "XFERS", "FWDS",
    ];
    /// The columns that shrink, widest first, when the table is too wide.
    const SHRINKABLE: [usize; 3] = [2, 3, 4];
    let since = |at: &str| parse_rfc3339(at).map_or("?".to_string(), |t| age(now, t));
    let body: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.session_id.clone(),
                r.state.as_str().to_string(),
                r.target.clone(),
                format!("{}:{}", r.server_host, r.server_port),
                match r.remote_user.as_str() {
                    "" => "-".to_string(),
                    user => user.to_string(),
                },
                since(&r.created_at),
                since(&r.last_used_at),
                r.active_commands.to_string(),
                r.active_transfers.to_string(),
                r.active_forwards.to_string(),
            ]
        })
        .collect();
    table(&HEADER, &body, &SHRINKABLE, width)
}

/// Rows under a header, columns two spaces apart, fitted to `width` columns when given: the
/// `shrinkable` columns give up room first, widest first, down to their header or 6
/// characters, their cells cut with `…`.
pub fn table<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    shrinkable: &[usize],
    width: Option<usize>,
) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.each_ref().map(|cell| printable(cell)))
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    if let Some(width) = width {
        let total = |widths: &[usize; N]| widths.iter().sum::<usize>() + 2 * (N - 1);
        while total(&widths) > width {
            let Some(&widest) = shrinkable
                .iter()
                .filter(|&&c| widths[c] > header[c].len().max(6))
                .max_by_key(|&&c| widths[c])
            else {
                break;
            };
            widths[widest] -= 1;
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{:<w$}", fit(c, w)))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `text` safe to show on a terminal: control characters (escape sequences among them), the
/// invisible formatting ones (bidirectional overrides, zero-width characters, tags), line and
/// paragraph separators, variation selectors, and the characters that draw as blank space
/// without being space (fillers) are shown as `\u{..}` escapes. Agents write commands and paths; a person reads
/// them here, and must see every character that is there.
pub fn printable(text: &str) -> String {
    let invisible = |c: char| {
        matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
            | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{00ad}' | '\u{061c}' | '\u{034f}'
            | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}'
            | '\u{2800}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{ffa0}'
            | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || invisible(c) {
            out += &format!("\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` cut to `width` characters, its last one `…` when cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept + "…"
}

/// How long ago `then` was, in the largest unit that is at least one: `45s`, `12m`, `3h`, `2d`.
pub fn age(now: SystemTime, then: SystemTime) -> String {
    let secs = now.duration_since(then).unwrap_or_default().as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// The daemon's methods that are agents' tools (not its own internal calls), by name.
fn agent_tools(capabilities: &[String]) -> Vec<&str> {
    capabilities
        .iter()
        .map(String::as_str)
        .filter(|name| sshmcp_proto::tool::Tool::named(name).is_some())
        .collect()
}

pub fn status_text(s: &DaemonStatus, capabilities: &[String]) -> String {
    format!(
        "sshmcpd {version} is running (pid {pid}, protocol {proto}, since {since})\n\
         socket:      {socket}\n\
         log:         {log}\n\
         state dir:   {state}\n\
         local root:  {root} (default for agents that set none)\n\
         ssh config:  {cfg}\n\
         sessions:    {n} of at most {max}\n\
         output cap:  {out} bytes per stream\n\
         tools:       {tools}\n",
        version = s.daemon_version,
        pid = s.pid,
        proto = s.protocol_version,
        since = s.started_at,
        socket = s.socket,
        log = s.log_file,
        state = s.state_dir,
        root = s.default_local_root,
        cfg = s.ssh_config.as_deref().unwrap_or("the user's default"),
        n = s.sessions,
        max = s.max_sessions,
        out = s.max_output_bytes,
        tools = agent_tools(capabilities).join(", "),
    )
}

/// The status as JSON: the daemon's own fields plus the agents' tools it serves.
pub fn status_json(s: &DaemonStatus, capabilities: &[String]) -> serde_json::Value {
    let mut value = serde_json::to_value(s).unwrap_or_default();
    value["tools"] = serde_json::json!(agent_tools(capabilities));
    value
}

/// Each policy entry on a line of its own, with the live sessions it applies to.
pub fn policy_entries(report: &sshmcp_proto::policy::PolicyReport) -> String {
    let mut out = String::new();
    for e in &report.entries {
        let mut rules = Vec::new();
        if e.read_only {
            rules.push("read_only".to_string());
        }
        if !e.sudo {
            rules.push("sudo = false".to_string());
        }
        if !e.deny.is_empty() {
            rules.push(format!("deny {}", e.deny.join(", ")));
        }
        let mut governs = Vec::new();
        if !e.sessions.is_empty() {
            governs.push(format!("sessions {}", e.sessions.join(", ")));
        }
        if !e.sessions_by_key.is_empty() {
            governs.push(format!(
                "by host key: sessions {}",
                e.sessions_by_key.join(", ")
            ));
        }
        let governs = match governs.is_empty() {
            true => "no live session".to_string(),
            false => governs.join("; "),
        };
        out += &format!(
            "match {}: {} ({governs})\n",
            e.patterns.join(", "),
            match rules.is_empty() {
                true => "no rule".to_string(),
                false => rules.join("; "),
            }
        );
        for key in &e.host_keys {
            out += &format!("  host key {key}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn escapes_and_invisible_characters_are_shown_not_obeyed() {
        assert_eq!(printable("ls -l /tmp"), "ls -l /tmp");
        assert_eq!(
            printable("rm -rf /x #\x1b[2K\rls"),
            "rm -rf /x #\\u{1b}[2K\\u{d}ls"
        );
        assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(printable("é → ü"), "é → ü");
        assert_eq!(
            printable("a\u{2028}b\u{3164}c\u{e0041}d"),
            "a\\u{2028}b\\u{3164}c\\u{e0041}d"
        );
    }

    use std::time::{Duration, UNIX_EPOCH};

    use sshmcp_proto::session::SessionState;
    use sshmcp_proto::time::rfc3339;

    use super::*;

    fn row(id: &str, state: SessionState, target: &str, created: u64, used: u64) -> SessionSummary {
        SessionSummary {
            session_id: id.into(),
            state,
            target: target.into(),
            server_host: "build-server-17.internal.example.com".into(),
            server_port: 22,
            master_pid: Some(4242),
            remote_user: "deploy".into(),
            created_at: rfc3339(UNIX_EPOCH + Duration::from_secs(created)),
            last_used_at: rfc3339(UNIX_EPOCH + Duration::from_secs(used)),
            active_commands: 2,
            active_transfers: 1,
            active_forwards: 3,
        }
    }

    fn rows() -> Vec<SessionSummary> {
        vec![
            row(
                "s0123456789",
                SessionState::Ready,
                "deploy@build-server-17",
                1000,
                9_990,
            ),
            row("s9876543210", SessionState::Lost, "db", 9_000, 9_100),
        ]
    }

    const NOW: u64 = 100_000;

    #[test]
    fn the_table_as_people_see_it() {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        assert_eq!(
            sessions_table(&rows(), now, None),
            "\
SESSION      STATE  TARGET                  SERVER                                   USER    AGE  LAST USE  CMDS  XFERS  FWDS
s0123456789  ready  deploy@build-server-17  build-server-17.internal.example.com:22  deploy  1d   1d        2     1      3
s9876543210  lost   db                      build-server-17.internal.example.com:22  deploy  1d   1d        2     1      3
"
        );
    }

    #[test]
    fn a_narrow_terminal_cuts_the_long_columns_first() {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        let table = sessions_table(&rows(), now, Some(80));
        assert_eq!(
            table,
            "\
SESSION      STATE  TARGET    SERVER    USER    AGE  LAST USE  CMDS  XFERS  FWDS
s0123456789  ready  deploy@…  build-s…  deploy  1d   1d        2     1      3
s9876543210  lost   db        build-s…  deploy  1d   1d        2     1      3
"
        );
        assert!(table.lines().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn ages_in_the_largest_whole_unit() {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        let ago = |s: u64| age(now, now - Duration::from_secs(s));
        assert_eq!(
            [
                ago(0),
                ago(59),
                ago(60),
                ago(3599),
                ago(3600),
                ago(86_399),
                ago(86_400)
            ],
            ["0s", "59s", "1m", "59m", "1h", "23h", "1d"]
        );
        assert_eq!(age(now, now + Duration::from_secs(5)), "0s", "clock skew");
    }
}
