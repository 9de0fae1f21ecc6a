//! `sshmcp history`: the audit trail read back, newest first, filtered, as a table or as the
//! trail's own JSON lines. It reads the files, so it works whether or not the daemon runs.

use std::io::Write;
use std::path::Path;

use sshmcp_proto::audit::{AuditEntry, PENDING_FILE, PendingLine, audit_files};
use sshmcp_proto::time::rfc3339;

/// Which lines to show.
#[derive(Debug)]
pub struct Filter {
    pub session: Option<String>,
    /// Matches the connect target or the server host, exactly.
    pub target: Option<String>,
    /// RFC 3339 UTC, as the trail writes it: lines at or after it.
    pub since: Option<String>,
    /// The outcome, exactly: `ok`, `timed_out`, `cancelled` or an error code.
    pub outcome: Option<String>,
    pub limit: usize,
}

impl Filter {
    /// The filter, with `since` read (see [`crate::since`]) and brought to the trail's own
    /// format, so that lines compare as text.
    pub fn new(
        session: Option<String>,
        target: Option<String>,
        since: Option<String>,
        outcome: Option<String>,
        limit: usize,
    ) -> anyhow::Result<Self> {
        let since = match since {
            Some(text) => {
                let at =
                    crate::since::parse(&text, std::time::SystemTime::now()).ok_or_else(|| {
                        crate::cli::Usage(format!(
                            "--since {text:?} is no time this reads\nhint: give an RFC 3339 \
                             time (2026-12-05T07:45:23Z or with an offset, +01:00), a date \
                             (2026-12-05, from midnight UTC) or a span back from now (30m, \
                             1h, 2d)"
                        ))
                    })?;
                Some(rfc3339(at))
            }
            None => None,
        };
        if let Some(outcome) = &outcome {
            let shown = |prefix: &str, valid: fn(&str) -> bool| {
                outcome.strip_prefix(prefix).is_some_and(valid)
            };
            let known = ["ok", "timed_out", "cancelled"].contains(&outcome.as_str())
                || shown("exit ", |code| code.parse::<i32>().is_ok())
                || shown("signal ", |name| !name.is_empty())
                || sshmcp_proto::ErrorCode::ALL
                    .iter()
                    .any(|code| code.as_str() == outcome);
            if !known {
                return Err(crate::cli::Usage(format!(
                    "--outcome {outcome:?} is no outcome a call can have\nhint: ok, timed_out, \
                     cancelled, or an error code of docs/errors.md (such as policy_denied)"
                ))
                .into());
            }
        }
        Ok(Self {
            session,
            target,
            since,
            outcome,
            limit,
        })
    }

    fn admits(&self, e: &AuditEntry) -> bool {
        self.session
            .as_ref()
            .is_none_or(|s| e.session_id.starts_with(s.as_str()))
            && self
                .target
                .as_ref()
                .is_none_or(|t| *t == e.target || *t == e.server_host)
            && self.since.as_ref().is_none_or(|s| e.time >= *s)
            && self
                .outcome
                .as_ref()
                .is_none_or(|o| *o == e.outcome || *o == outcome_shown(e))
    }
}

/// A line's outcome as the table shows it (and `--outcome` takes it too): `exit N` or
/// `signal NAME` for a command that answered, else the outcome itself.
fn outcome_shown(e: &AuditEntry) -> String {
    match (e.outcome.as_str(), e.exit_code, &e.signal) {
        ("ok", Some(code), _) => format!("exit {code}"),
        ("ok", None, Some(signal)) => format!("signal {signal}"),
        (outcome, _, _) => outcome.to_string(),
    }
}

/// The calls that answered but whose lines the daemons' writers have not put in the trail
/// yet (they gather lines for a moment before each write): their journals hold them,
/// newest first. A journal no daemon holds (its daemon was killed outright) adds the calls it
/// holds as begun: they were cut off with it, and their lines say so (`cancelled`), as the
/// next daemon will write them.
fn answered_not_written(state_dir: &Path) -> Vec<AuditEntry> {
    let Ok(dir) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let prefix = format!("{PENDING_FILE}.");
    let mut found = Vec::new();
    for entry in dir.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let Ok(mut file) = std::fs::File::open(entry.path()) else {
            continue;
        };
        // A live daemon holds its journal locked; a moment's shared lock tells a dead one's.
        let dead = file.try_lock_shared().is_ok();
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut file, &mut text);
        drop(file);
        let mut answered = std::collections::BTreeMap::new();
        for note in text
            .lines()
            .filter_map(|l| serde_json::from_str::<PendingLine>(l).ok())
        {
            match note {
                PendingLine::Finished { finished, entry } => {
                    answered.insert(finished, *entry);
                }
                PendingLine::Ended { ended } => {
                    answered.remove(&ended);
                }
                PendingLine::Begun { begun, entry } if dead => {
                    answered.entry(begun).or_insert(*entry);
                }
                PendingLine::Begun { .. } => {}
            }
        }
        found.extend(answered.into_values());
    }
    found.sort_by(|a, b| b.time.cmp(&a.time));
    found
}

/// The lines `filter` admits, newest first, at most `filter.limit`, and how many lines could
/// not be read (a line cut by a full disk, say). The calls that answered a moment ago come
/// first, from the journals, even before their lines reach the trail.
pub fn read(state_dir: &Path, filter: &Filter) -> std::io::Result<(Vec<AuditEntry>, usize)> {
    let pending = answered_not_written(state_dir);
    let mut found: Vec<AuditEntry> = pending
        .iter()
        .filter(|e| filter.admits(e))
        .take(filter.limit)
        .cloned()
        .collect();
    if found.len() == filter.limit {
        return Ok((found, 0));
    }
    let mut unreadable = 0;
    for file in audit_files(state_dir) {
        // Bytes, not text: a line cut by a full disk may end inside a character.
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        // Every generation is read even with `--since`: a line is stamped when its call came
        // and written when it answered, so a long call's line can follow newer ones, into
        // the next file after a rotation.
        for line in bytes.split(|&b| b == b'\n').rev().filter(|l| !l.is_empty()) {
            let Ok(entry) = serde_json::from_slice::<AuditEntry>(line) else {
                unreadable += 1;
                continue;
            };
            // Written meanwhile, and still in its journal a moment: shown once.
            if filter.admits(&entry) && !pending.contains(&entry) {
                found.push(entry);
                if found.len() == filter.limit {
                    return Ok((found, unreadable));
                }
            }
        }
    }
    Ok((found, unreadable))
}

/// The lines as a table fitted to `width` columns when given; the summary, last, gives up
/// room first.
pub fn table(entries: &[AuditEntry], width: Option<usize>) -> String {
    if entries.is_empty() {
        return "no calls recorded\n".to_string();
    }
    const HEADER: [&str; 8] = [
        "TIME (UTC)",
        "SESSION",
        "TARGET",
        "TOOL",
        "OUTCOME",
        "SECONDS",
        "CLIENT",
        "SUMMARY",
    ];
    let rows: Vec<[String; 8]> = entries
        .iter()
        .map(|e| {
            [
                // 2026-12-01T10:00:00.123Z → 2026-12-01 10:00:00
                e.time.get(..19).unwrap_or(&e.time).replacen('T', " ", 1),
                match e.session_id.as_str() {
                    "" => "-".into(),
                    id => id.into(),
                },
                e.target.clone(),
                e.tool.clone(),
                outcome_shown(e),
                format!("{:.3}", e.duration),
                e.client.clone().unwrap_or_else(|| "-".into()),
                // One line per call, whatever the command or the error's message held; the
                // message says why a call failed.
                match &e.message {
                    Some(why) => format!("{} — {why}", e.summary),
                    None => e.summary.clone(),
                }
                .replace(['\n', '\r', '\t'], " "),
            ]
        })
        .collect();
    crate::render::table(&HEADER, &rows, &[7, 2, 6], width)
}

/// Prints the lines, as a table or as JSON lines.
pub fn print(
    entries: &[AuditEntry],
    json: bool,
    width: Option<usize>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if json {
        for e in entries {
            writeln!(out, "{}", serde_json::to_string(e)?)?;
        }
    } else {
        out.write_all(table(entries, width).as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: &str, session: &str, target: &str, tool: &str) -> AuditEntry {
        AuditEntry {
            time: time.into(),
            session_id: session.into(),
            target: target.into(),
            server_host: format!("{target}.example.com"),
            server_port: 22,
            tool: tool.into(),
            summary: "uname -a\necho two".into(),
            outcome: "ok".into(),
            message: None,
            exit_code: Some(0),
            signal: None,
            duration: 0.0123,
            client: Some("claude-code 2.1".into()),
        }
    }

    fn write(dir: &Path, name: &str, entries: &[AuditEntry]) {
        let mut text = String::new();
        for e in entries {
            text += &serde_json::to_string(e).unwrap();
            text += "\n";
        }
        std::fs::write(dir.join(name), text).unwrap();
    }

    /// A call that answered a moment ago is shown from its daemon's journal before its line
    /// reaches the trail, and once only when both hold it.
    #[test]
    fn a_call_that_just_answered_is_shown_from_the_journal_once() {
        let dir = tempfile::tempdir().unwrap();
        let written = entry("2026-12-01T10:00:00.000Z", "s1", "a", "stat");
        let just = entry("2026-12-01T10:00:01.000Z", "s1", "a", "exec");
        let both = entry("2026-12-01T10:00:02.000Z", "s1", "a", "write_file");
        write(dir.path(), "audit.jsonl", &[written.clone(), both.clone()]);
        let mut journal = String::new();
        for note in [
            PendingLine::Finished {
                finished: 1,
                entry: Box::new(just.clone()),
            },
            PendingLine::Finished {
                finished: 2,
                entry: Box::new(both.clone()),
            },
            PendingLine::Finished {
                finished: 3,
                entry: Box::new(written.clone()),
            },
            PendingLine::Ended { ended: 3 },
        ] {
            journal += &serde_json::to_string(&note).unwrap();
            journal += "\n";
        }
        std::fs::write(dir.path().join("audit.pending.99.0"), journal).unwrap();
        let filter = Filter::new(None, None, None, None, 10).unwrap();
        let (found, _) = read(dir.path(), &filter).unwrap();
        assert_eq!(found, [both, just, written]);
    }

    /// A call a daemon had begun when it was killed outright is shown as cut off
    /// (`cancelled`, as the next daemon writes it) from its journal, which no daemon holds
    /// then; while its daemon lives (it holds the journal locked) the call is under way, and
    /// not shown.
    #[test]
    fn a_call_a_dead_daemon_had_begun_is_shown_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut cut = entry("2026-12-01T10:00:01.000Z", "s1", "a", "exec");
        (cut.outcome, cut.exit_code) = ("cancelled".into(), None);
        let note = PendingLine::Begun {
            begun: 1,
            entry: Box::new(cut.clone()),
        };
        let journal = dir.path().join("audit.pending.99.0");
        std::fs::write(&journal, serde_json::to_string(&note).unwrap() + "\n").unwrap();
        let filter = Filter::new(None, None, None, None, 10).unwrap();
        let held = std::fs::File::open(&journal).unwrap();
        held.try_lock().unwrap();
        assert_eq!(read(dir.path(), &filter).unwrap().0, []);
        drop(held);
        assert_eq!(read(dir.path(), &filter).unwrap().0, [cut]);
    }

    /// A trail of two generations: the rotated file and the live one.
    fn generations(older: &[AuditEntry], live: &[AuditEntry]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "audit.jsonl.1", older);
        write(dir.path(), "audit.jsonl", live);
        dir
    }

    /// A call's time, `s` seconds into the minute.
    fn at(s: u32) -> String {
        format!("2026-12-01T10:00:{s:02}.000Z")
    }

    #[test]
    fn newest_first_across_generations_with_filters_and_limit() {
        let dir = generations(
            &[
                entry(&at(1), "s1", "prod", "exec"),
                entry(&at(2), "s2", "dev", "stat"),
            ],
            &[
                entry(&at(3), "s1", "prod", "exec"),
                entry(&at(4), "s2", "dev", "exec"),
            ],
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("audit.jsonl"))
            .unwrap()
            .write_all(b"{\"cut by a full disk \xe2\x86\n")
            .unwrap();
        let all = Filter::new(None, None, None, None, 100).unwrap();
        let (found, unreadable) = read(dir.path(), &all).unwrap();
        let times: Vec<&str> = found.iter().map(|e| &e.time[17..19]).collect();
        assert_eq!(times, ["04", "03", "02", "01"]);
        assert_eq!(unreadable, 1);

        let prod = Filter::new(None, Some("prod.example.com".into()), None, None, 100).unwrap();
        assert_eq!(read(dir.path(), &prod).unwrap().0.len(), 2);
        let prefix = Filter::new(Some("s".into()), None, None, None, 100).unwrap();
        assert_eq!(
            read(dir.path(), &prefix).unwrap().0.len(),
            4,
            "a prefix takes both"
        );
        let s2 = Filter::new(Some("s2".into()), None, None, None, 1).unwrap();
        let (found, _) = read(dir.path(), &s2).unwrap();
        assert_eq!((found.len(), found[0].time.as_str()), (1, at(4).as_str()));
        let since =
            Filter::new(None, None, Some("2026-12-01T10:00:02Z".into()), None, 100).unwrap();
        assert_eq!(read(dir.path(), &since).unwrap().0.len(), 3);
        assert!(Filter::new(None, None, Some("yesterday".into()), None, 1).is_err());
    }

    /// A line is stamped when its call came and written when it answered: a long call that
    /// answered just after a rotation opens the new file with a time older than the lines
    /// of the file before. `--since` still finds those.
    #[test]
    fn since_reads_past_a_long_calls_older_line_in_a_newer_file() {
        let dir = generations(
            &[
                entry(&at(5), "s1", "prod", "stat"),
                entry(&at(6), "s1", "prod", "stat"),
            ],
            &[
                entry(&at(1), "s1", "prod", "exec"),
                entry(&at(7), "s1", "prod", "stat"),
            ],
        );
        let since =
            Filter::new(None, None, Some("2026-12-01T10:00:04Z".into()), None, 100).unwrap();
        let times: Vec<String> = read(dir.path(), &since)
            .unwrap()
            .0
            .iter()
            .map(|e| e.time[17..19].to_string())
            .collect();
        assert_eq!(times, ["07", "06", "05"]);
    }

    #[test]
    fn the_table_keeps_one_line_per_call_and_fits_the_width() {
        let entries = [entry("2026-12-01T10:00:01.000Z", "s1", "prod", "exec")];
        let text = table(&entries, None);
        assert_eq!(
            text,
            "TIME (UTC)           SESSION  TARGET  TOOL  OUTCOME  SECONDS  CLIENT           SUMMARY\n\
             2026-12-01 10:00:01  s1       prod    exec  exit 0   0.012    claude-code 2.1  uname -a echo two\n"
        );
        for line in table(&entries, Some(80)).lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
    }

    /// A failed call shows its code, and why it failed after its summary; a command its
    /// timeout ended shows `timed_out`; `--outcome` keeps only the lines of one outcome.
    #[test]
    fn outcomes_say_how_each_call_went_and_filter() {
        let mut failed = entry(&at(1), "", "prod", "connect");
        failed.summary = "prod".into();
        failed.outcome = "connection_start_failed".into();
        failed.exit_code = None;
        failed.message = Some("ssh: connect to host prod port 22:\nConnection refused".into());
        let mut timed_out = entry(&at(2), "s1", "prod", "exec");
        timed_out.outcome = "timed_out".into();
        timed_out.exit_code = None;
        let mut killed = entry(&at(3), "s1", "prod", "exec");
        (killed.exit_code, killed.signal) = (None, Some("TERM".into()));
        let text = table(&[timed_out.clone(), failed.clone(), killed], None);
        assert!(text.contains("timed_out"), "{text}");
        assert!(text.contains("signal TERM"), "{text}");
        assert!(
            text.contains(
                "connection_start_failed  0.012    claude-code 2.1  prod — ssh: connect to host \
                 prod port 22: Connection refused"
            ),
            "{text}"
        );
        let dir = generations(&[], &[failed, timed_out.clone()]);
        assert!(Filter::new(None, None, None, Some("timeout".into()), 100).is_err());
        let only = Filter::new(None, None, None, Some("timed_out".into()), 100).unwrap();
        assert_eq!(read(dir.path(), &only).unwrap().0, [timed_out]);
        // As the table shows them, too.
        let exit = entry(&at(4), "s1", "prod", "exec");
        let dir = generations(&[], std::slice::from_ref(&exit));
        let only = Filter::new(None, None, None, Some("exit 0".into()), 100).unwrap();
        assert_eq!(read(dir.path(), &only).unwrap().0, [exit]);
        assert!(Filter::new(None, None, None, Some("exit x".into()), 100).is_err());
    }
}
