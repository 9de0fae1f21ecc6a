//! `sshmcp watch`: the daemon's sessions, running commands, transfers and forwards, redrawn
//! about once a second until interrupted, or one snapshot (`--once`, `--json`). It reads the
//! daemon's `overview`, built from state the daemon already holds: no host is asked.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use sshmcp_local::client::connect_existing;
use sshmcp_local::paths::RuntimePaths;
use sshmcp_proto::overview::{Overview, SessionView};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::time::parse_rfc3339;
use sshmcp_proto::transfer::TransferDirection;

use crate::render::{age, fit, printable};

const REFRESH: Duration = Duration::from_secs(1);
/// The alternate screen on, the cursor hidden; and back.
const ENTER_SCREEN: &str = "\x1b[?1049h\x1b[?25l";
const LEAVE_SCREEN: &str = "\x1b[?25h\x1b[?1049l";
/// Cursor home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub async fn run(
    paths: &RuntimePaths,
    once: bool,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    if once {
        let Some(overview) = snapshot(paths).await? else {
            writeln!(out, "sshmcpd is not running")?;
            return Ok(ExitCode::from(crate::commands::EXIT_NOT_RUNNING));
        };
        match json {
            true => writeln!(out, "{}", serde_json::to_string_pretty(&overview)?)?,
            false => write!(
                out,
                "{}",
                frame(&overview, SystemTime::now(), width(), View::Once)
            )?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    use std::io::IsTerminal;
    let screen = !json && std::io::stdout().is_terminal();
    // Restores the terminal however the view ends (an error, a panic unwinding).
    let _restore = screen.then(|| {
        print!("{ENTER_SCREEN}");
        Screen
    });
    refresh(paths, json, screen, out).await?;
    Ok(ExitCode::SUCCESS)
}

/// The alternate screen, left when this is dropped.
struct Screen;

impl Drop for Screen {
    fn drop(&mut self) {
        print!("{LEAVE_SCREEN}");
        let _ = std::io::stdout().flush();
    }
}

/// Redraws until Ctrl-C or SIGTERM; a daemon that goes away is shown as such and looked for
/// again at the next refresh.
async fn refresh(
    paths: &RuntimePaths,
    json: bool,
    screen: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Registered once: a Ctrl-C that comes while a snapshot is read is kept for the select.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut quit = signal(SignalKind::quit())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut tick = tokio::time::interval(REFRESH);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            _ = quit.recv() => return Ok(()),
            _ = hangup.recv() => return Ok(()),
        }
        let text = match (snapshot(paths).await, json) {
            (Ok(Some(o)), true) => serde_json::to_string(&o)? + "\n",
            (Ok(None) | Err(_), true) => continue,
            (Ok(Some(o)), false) => frame(&o, SystemTime::now(), width(), View::Live),
            (Ok(None), false) => "sshmcpd is not running (looking again every second)\n".into(),
            (Err(e), false) => format!("{e:#}\n(looking again every second)\n"),
        };
        if screen {
            write!(out, "{CLEAR}")?;
        } else if !json {
            writeln!(out)?;
        }
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
}

/// The daemon's overview, or `None` when no daemon runs.
async fn snapshot(paths: &RuntimePaths) -> anyhow::Result<Option<Overview>> {
    let Some(conn) = connect_existing(paths).await? else {
        return Ok(None);
    };
    if !conn.capabilities.iter().any(|c| c == "overview") {
        anyhow::bail!(
            "the running daemon is older than this CLI and has no overview\nhint: `sshmcp \
             daemon restart` (sessions are kept)"
        );
    }
    Ok(Some(
        conn.client
            .overview(context_with_timeout(Duration::from_secs(5)))
            .await?,
    ))
}

/// The terminal's width, or `COLUMNS`; none when the output goes to a pipe or a file that
/// sets none, which then gets whole lines.
fn width() -> Option<usize> {
    crate::commands::terminal_width()
}

/// Whether a frame is the live view, which says how to leave it, or one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Live,
    Once,
}

/// One screen: a header, then each session with its commands, transfers and forwards
/// indented under it, every line cut to `width` when there is one.
pub fn frame(o: &Overview, now: SystemTime, width: Option<usize>, view: View) -> String {
    let since = |at: &str| parse_rfc3339(at).map_or("?".to_string(), |t| age(now, t));
    let mut lines = vec![format!(
        "sshmcpd pid {} · {} session{} · audit {} · {} UTC{}",
        o.pid,
        o.sessions.len(),
        if o.sessions.len() == 1 { "" } else { "s" },
        match o.audit {
            Some(a) => format!("{} lines, {} lost", a.written, a.lost),
            None => "off".into(),
        },
        o.taken_at.get(11..19).unwrap_or("?"),
        match view {
            View::Live => " · Ctrl-C to quit",
            View::Once => "",
        },
    )];
    if o.sessions.is_empty() {
        lines.push("no sessions".into());
    }
    for view in &o.sessions {
        lines.push(String::new());
        lines.extend(session_lines(view, &since));
    }
    lines
        .iter()
        .map(|l| {
            let l = printable(l);
            width.map_or(l.clone(), |width| fit(&l, width)) + "\n"
        })
        .collect::<String>()
}

fn session_lines(v: &SessionView, since: &dyn Fn(&str) -> String) -> Vec<String> {
    let s = &v.session;
    let mut lines = vec![format!(
        "{}  {}  {}  {}:{}  user {}  up {}  last use {} ago",
        s.session_id,
        s.state.as_str(),
        s.target,
        s.server_host,
        s.server_port,
        if s.remote_user.is_empty() {
            "-"
        } else {
            &s.remote_user
        },
        since(&s.created_at),
        since(&s.last_used_at),
    )];
    if !v.policy.is_empty() {
        lines.push(format!("  policy    {}", v.policy.join("; ")));
    }
    for c in &v.commands {
        lines.push(format!(
            "  command   {}  {:>5}  {}",
            c.handle_id,
            since(&c.started_at),
            c.preview
        ));
    }
    for t in &v.transfers {
        let percent = match t.total_bytes {
            0 => 100.0,
            total => t.bytes_transferred as f64 * 100.0 / total as f64,
        };
        let (verb, from, to) = match t.direction {
            TransferDirection::Download => ("download", &t.remote_path, &t.local_path),
            TransferDirection::Upload => ("upload", &t.local_path, &t.remote_path),
        };
        lines.push(format!(
            "  transfer  {}  {verb} {}  {percent:.0}% of {}  {}/s{}  {from} → {to}",
            t.operation_id,
            t.state.as_str(),
            bytes(t.total_bytes),
            bytes(t.rate as u64),
            t.eta
                .map_or(String::new(), |eta| format!("  eta {}", span(eta))),
        ));
    }
    for f in &v.forwards {
        let target = match (&f.target_host, f.target_port) {
            (Some(host), Some(port)) => format!(" → {host}:{port}"),
            _ => String::new(),
        };
        lines.push(format!(
            "  forward   {}  {} {}:{}{target}",
            f.forward_id,
            f.kind.as_str(),
            f.listen_host,
            f.listen_port
        ));
    }
    lines
}

/// A byte count in the largest binary unit that keeps it at least 1.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

/// A span of seconds as people read it: `45s`, `12m 5s`, `21h 54m`, `3d 2h`.
fn span(secs: f64) -> String {
    let secs = secs.max(0.0).round() as u64;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::command::{CommandState, CommandSummary};
    use sshmcp_proto::exec::Encoding;
    use sshmcp_proto::forward::{ForwardInfo, ForwardKind};
    use sshmcp_proto::overview::AuditCounts;
    use sshmcp_proto::session::{SessionState, SessionSummary};
    use sshmcp_proto::transfer::{TransferReport, TransferState};

    fn overview() -> Overview {
        Overview {
            pid: 4242,
            taken_at: "2026-12-01T10:00:30.000Z".into(),
            audit: Some(AuditCounts {
                written: 12,
                lost: 0,
            }),
            sessions: vec![SessionView {
                session: SessionSummary {
                    session_id: "s1".into(),
                    state: SessionState::Ready,
                    target: "prod-web".into(),
                    server_host: "10.0.0.7".into(),
                    server_port: 22,
                    master_pid: Some(99),
                    remote_user: "deploy".into(),
                    created_at: "2026-12-01T09:00:30.000Z".into(),
                    last_used_at: "2026-12-01T10:00:26.000Z".into(),
                    active_commands: 1,
                    active_transfers: 1,
                    active_forwards: 1,
                },
                commands: vec![CommandSummary {
                    handle_id: "cmd-1".into(),
                    preview: "make -j8 all".into(),
                    status: CommandState::Running,
                    exit_code: None,
                    started_at: "2026-12-01T10:00:18.000Z".into(),
                    ended_at: None,
                }],
                transfers: vec![TransferReport {
                    operation_id: "tr-1".into(),
                    direction: TransferDirection::Download,
                    local_path: "db.dump".into(),
                    remote_path: "/var/db.dump".into(),
                    remote_path_encoding: Encoding::Utf8,
                    state: TransferState::Running,
                    bytes_transferred: 512 << 20,
                    reused_bytes: None,
                    total_bytes: 1 << 30,
                    rate: (200 << 20) as f64,
                    eta: Some(2.6),
                    sha256: None,
                    final_path: None,
                    error: None,
                    started_at: "2026-12-01T10:00:27.000Z".into(),
                    ended_at: None,
                }],
                forwards: vec![ForwardInfo {
                    forward_id: "fwd-1".into(),
                    kind: ForwardKind::Local,
                    listen_host: "127.0.0.1".into(),
                    listen_port: 5432,
                    target_host: Some("db".into()),
                    target_port: Some(5432),
                    created_at: "2026-12-01T09:10:00.000Z".into(),
                }],
                policy: vec!["prod-* (by name)".into(), "10.0.0.7 (by host key)".into()],
            }],
        }
    }

    #[test]
    fn a_frame_shows_each_session_with_its_work_and_fits_the_width() {
        let now = parse_rfc3339("2026-12-01T10:00:30.000Z").unwrap();
        let text = frame(&overview(), now, Some(200), View::Live);
        assert_eq!(
            text,
            "sshmcpd pid 4242 · 1 session · audit 12 lines, 0 lost · 10:00:30 UTC · Ctrl-C to quit\n\
             \n\
             s1  ready  prod-web  10.0.0.7:22  user deploy  up 1h  last use 4s ago\n\
             \x20 policy    prod-* (by name); 10.0.0.7 (by host key)\n\
             \x20 command   cmd-1    12s  make -j8 all\n\
             \x20 transfer  tr-1  download running  50% of 1.0 GiB  200.0 MiB/s  eta 3s  /var/db.dump → db.dump\n\
             \x20 forward   fwd-1  local 127.0.0.1:5432 → db:5432\n"
        );
        for line in frame(&overview(), now, Some(40), View::Live).lines() {
            assert!(line.chars().count() <= 40, "{line}");
        }
        // One snapshot says nothing of keys, and with no width (a pipe) cuts nothing.
        let once = frame(&overview(), now, None, View::Once);
        assert!(
            once.starts_with(
                "sshmcpd pid 4242 · 1 session · audit 12 lines, 0 lost · 10:00:30 UTC\n"
            )
        );
        assert!(once.contains("/var/db.dump → db.dump\n"), "{once}");
        let empty = Overview {
            sessions: vec![],
            audit: None,
            ..overview()
        };
        let empty = frame(&empty, now, Some(200), View::Live);
        assert!(empty.contains("audit off") && empty.ends_with("no sessions\n"));
    }

    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(span(2.6), "3s");
        assert_eq!(span(725.0), "12m 5s");
        assert_eq!(span(78_899.0), "21h 54m");
        assert_eq!(span(266_400.0), "3d 2h");
        assert_eq!(span(-1.0), "0s");
    }

    #[test]
    fn byte_counts_take_the_largest_unit() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(1 << 30), "1.0 GiB");
    }
}
