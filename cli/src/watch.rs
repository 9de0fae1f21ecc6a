//! `sshmcp watch`: the daemon's sessions, running commands, transfers and forwards, redrawn
//! about once a second until interrupted, or one snapshot (`--once`, `--json`). It reads the
//! daemon's `overview`, built from state the daemon already holds: no host is asked.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use sshmcp_local::client::connect_existing;
use sshmcp_local::paths::RuntimePaths;
use sshmcp_proto::command::CommandState;
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
            // JSON's reader gets no object, never text it cannot parse; the status says why.
            match json {
                true => eprintln!("sshmcpd is not running"),
                false => writeln!(out, "sshmcpd is not running")?,
            }
            return Ok(ExitCode::from(crate::commands::EXIT_NOT_RUNNING));
        };
        match json {
            true => writeln!(out, "{}", serde_json::to_string_pretty(&overview)?)?,
            false => write!(
                out,
                "{}",
                frame(&overview, SystemTime::now(), Look::here(View::Once))
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
            (Ok(Some(o)), false) => frame(&o, SystemTime::now(), Look::here(View::Live)),
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

/// How a frame is drawn: its width (none: lines whole), the view, and whether states are
/// coloured (a terminal that `NO_COLOR` does not turn off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    pub width: Option<usize>,
    pub view: View,
    pub colour: bool,
}

impl Look {
    /// The look on this process's stdout.
    fn here(view: View) -> Self {
        use std::io::IsTerminal;
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Look {
            width: width(),
            view,
            colour: std::io::stdout().is_terminal() && !no_colour,
        }
    }
}

/// A line's colour: a state that wants the person's eye.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tint {
    Good,
    Bad,
}

/// One screen: a header, then each session with its commands (running, or ended in the last
/// minute), transfers and forwards indented under it, every line cut to the width when there
/// is one, and the lines of a lost session or a command that failed red, of one that
/// succeeded green, when colour is on.
pub fn frame(o: &Overview, now: SystemTime, look: Look) -> String {
    let since = |at: &str| parse_rfc3339(at).map_or("?".to_string(), |t| age(now, t));
    let lines = vec![format!(
        "sshmcpd pid {} · {} session{} · audit {} · {} UTC{}",
        o.pid,
        o.sessions.len(),
        if o.sessions.len() == 1 { "" } else { "s" },
        match o.audit {
            Some(a) => format!("{} lines, {} lost", a.written, a.lost),
            None => "off".into(),
        },
        o.taken_at.get(11..19).unwrap_or("?"),
        match look.view {
            View::Live => " · Ctrl-C to quit",
            View::Once => "",
        },
    )];
    let mut lines: Vec<(String, Option<Tint>)> = lines.into_iter().map(|l| (l, None)).collect();
    if o.sessions.is_empty() {
        lines.push(("no sessions".into(), None));
    }
    for view in &o.sessions {
        lines.push((String::new(), None));
        lines.extend(session_lines(view, &since));
    }
    lines
        .iter()
        .map(|(l, tint)| {
            let l = printable(l);
            let l = look.width.map_or(l.clone(), |width| fit(&l, width));
            match (look.colour, tint) {
                (true, Some(Tint::Good)) => format!("\x1b[32m{l}\x1b[0m\n"),
                (true, Some(Tint::Bad)) => format!("\x1b[31m{l}\x1b[0m\n"),
                _ => l + "\n",
            }
        })
        .collect::<String>()
}

fn session_lines(v: &SessionView, since: &dyn Fn(&str) -> String) -> Vec<(String, Option<Tint>)> {
    let s = &v.session;
    let lost = (s.state == sshmcp_proto::session::SessionState::Lost).then_some(Tint::Bad);
    let mut lines = vec![(
        format!(
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
        ),
        lost,
    )];
    if !v.policy.is_empty() {
        lines.push((format!("  policy    {}", v.policy.join("; ")), None));
    }
    for e in &v.execs {
        let last = match e.last_line.is_empty() {
            true => String::new(),
            false => format!("  ‹{}›", e.last_line),
        };
        let line = format!(
            "  {:<9} {}  {:>5}  {}{last}",
            e.tool,
            e.id,
            since(&e.started_at),
            e.preview
        );
        lines.push((line, None));
    }
    for c in &v.commands {
        let Some(ended) = &c.ended_at else {
            let line = format!(
                "  command   {}  {:>5}  {}",
                c.handle_id,
                since(&c.started_at),
                c.preview
            );
            lines.push((line, None));
            continue;
        };
        let how = c.status.how_it_ended(c.exit_code);
        let tint = match (c.status, c.exit_code) {
            (CommandState::Completed, Some(0)) => Tint::Good,
            _ => Tint::Bad,
        };
        let line = format!(
            "  ended     {}  {:>5} ago  {how}  {}",
            c.handle_id,
            since(ended),
            c.preview
        );
        lines.push((line, Some(tint)));
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
        lines.push((
            format!(
                "  transfer  {}  {verb} {}  {percent:.0}% of {}  {}/s{}  {from} → {to}",
                t.operation_id,
                t.state.as_str(),
                bytes(t.total_bytes),
                bytes(t.rate as u64),
                t.eta
                    .map_or(String::new(), |eta| format!("  eta {}", span(eta))),
            ),
            None,
        ));
    }
    for f in &v.forwards {
        let target = match (&f.target_host, f.target_port) {
            (Some(host), Some(port)) => format!(" → {host}:{port}"),
            _ => String::new(),
        };
        lines.push((
            format!(
                "  forward   {}  {} {}:{}{target}",
                f.forward_id,
                f.kind.as_str(),
                f.listen_host,
                f.listen_port
            ),
            None,
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
    use sshmcp_proto::command::CommandSummary;
    use sshmcp_proto::exec::Encoding;
    use sshmcp_proto::forward::{ForwardInfo, ForwardKind};
    use sshmcp_proto::overview::{AuditCounts, ExecView};
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
                execs: vec![ExecView {
                    id: "cmd-9e1f".into(),
                    tool: "sudo_exec".into(),
                    preview: "apt-get upgrade -y".into(),
                    started_at: "2026-12-01T10:00:27.000Z".into(),
                    bytes: 2048,
                    last_line: "Unpacking libc6".into(),
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
                    stopped_by: None,
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
        let text = frame(&overview(), now, look(Some(200), View::Live, false));
        assert_eq!(
            text,
            "sshmcpd pid 4242 · 1 session · audit 12 lines, 0 lost · 10:00:30 UTC · Ctrl-C to quit\n\
             \n\
             s1  ready  prod-web  10.0.0.7:22  user deploy  up 1h  last use 4s ago\n\
             \x20 policy    prod-* (by name); 10.0.0.7 (by host key)\n\
             \x20 sudo_exec cmd-9e1f     3s  apt-get upgrade -y  ‹Unpacking libc6›\n\
             \x20 command   cmd-1    12s  make -j8 all\n\
             \x20 transfer  tr-1  download running  50% of 1.0 GiB  200.0 MiB/s  eta 3s  /var/db.dump → db.dump\n\
             \x20 forward   fwd-1  local 127.0.0.1:5432 → db:5432\n"
        );
        for line in frame(&overview(), now, look(Some(40), View::Live, false)).lines() {
            assert!(line.chars().count() <= 40, "{line}");
        }
        // One snapshot says nothing of keys, and with no width (a pipe) cuts nothing.
        let once = frame(&overview(), now, look(None, View::Once, false));
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
        let empty = frame(&empty, now, look(Some(200), View::Live, false));
        assert!(empty.contains("audit off") && empty.ends_with("no sessions\n"));
    }

    fn look(width: Option<usize>, view: View, colour: bool) -> Look {
        Look {
            width,
            view,
            colour,
        }
    }

    /// A command that ended in the last minute shows how it ended; colour, when on, marks a
    /// failure red and a success green, and a lost session red; off, no escape is written.
    #[test]
    fn ended_commands_show_how_and_colour_only_when_on() {
        let now = parse_rfc3339("2026-12-01T10:00:30.000Z").unwrap();
        let mut o = overview();
        let ended = |id: &str, status, exit_code| CommandSummary {
            handle_id: id.into(),
            preview: "make test".into(),
            status,
            exit_code,
            started_at: "2026-12-01T10:00:10.000Z".into(),
            ended_at: Some("2026-12-01T10:00:25.000Z".into()),
        };
        o.sessions[0]
            .commands
            .push(ended("cmd-2", CommandState::Completed, Some(2)));
        o.sessions[0]
            .commands
            .push(ended("cmd-3", CommandState::Completed, Some(0)));
        let plain = frame(&o, now, look(Some(200), View::Live, false));
        assert!(
            plain.contains("  ended     cmd-2     5s ago  completed, exit 2  make test\n"),
            "{plain}"
        );
        assert!(!plain.contains('\x1b'), "{plain:?}");
        let coloured = frame(&o, now, look(Some(200), View::Live, true));
        assert!(
            coloured.contains("\x1b[31m  ended     cmd-2"),
            "{coloured:?}"
        );
        assert!(
            coloured.contains("\x1b[32m  ended     cmd-3"),
            "{coloured:?}"
        );
        o.sessions[0].session.state = SessionState::Lost;
        let lost = frame(&o, now, look(Some(200), View::Live, true));
        assert!(lost.contains("\x1b[31ms1  lost"), "{lost:?}");
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
