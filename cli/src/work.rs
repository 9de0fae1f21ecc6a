//! What the person does to one piece of the agents' work, with no session key: read a
//! command's output (`sshmcp output`) and stop a command, a transfer or a forward (`sshmcp
//! kill`). The daemon finds the id, or a unique prefix of one, in any session.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use base64::Engine as _;
use sshmcp_local::client::{Connection, connect_existing};
use sshmcp_local::paths::RuntimePaths;
use sshmcp_proto::command::{CommandState, OutputRequest, StreamChunk};
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::service::context_with_timeout;

/// How long one read waits for a followed command's end before printing what came.
const FOLLOW_WAIT: f64 = 1.0;

/// How long a follower waits for the next daemon when the one it read from went away (a
/// restart takes a few seconds; an upgrade's restart too).
const NEXT_DAEMON_WAIT: Duration = Duration::from_secs(30);

/// The running daemon, when it serves `method` (none runs: nothing to read or stop).
async fn daemon(paths: &RuntimePaths, method: &str) -> anyhow::Result<Connection> {
    let Some(c) = connect_existing(paths).await? else {
        bail!(
            "sshmcpd is not running: what it ran is out of reach until one runs again (its \
             sessions' masters, and the forwards they hold, may still be up)\n\
             hint: `sshmcp sessions` starts one, which takes them back; `sshmcp history` shows \
             what agents ran"
        );
    };
    if !c.capabilities.iter().any(|m| m == method) {
        bail!(
            "the running daemon is older than this CLI\nhint: `sshmcp daemon restart` \
             (sessions are kept)"
        );
    }
    Ok(c)
}

pub async fn output(
    paths: &RuntimePaths,
    id: String,
    follow: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mut c = daemon(paths, "output").await?;
    let (mut id, mut offsets) = (id, (0, 0));
    let err = &mut std::io::stderr().lock();
    // Waiting only once caught up: a backlog is read page after page at once.
    let mut caught_up = false;
    loop {
        let wait = (follow && caught_up).then_some(FOLLOW_WAIT);
        let req = OutputRequest {
            id: id.clone(),
            wait_seconds: wait,
            stdout_offset: Some(offsets.0),
            stderr_offset: Some(offsets.1),
            max_bytes: None,
        };
        let deadline = Duration::from_secs(10) + Duration::from_secs_f64(wait.unwrap_or(0.0));
        let answer = match c.client.output(context_with_timeout(deadline), req).await {
            Err(e) if follow => {
                // The daemon restarted under the follower: the next one took the handles
                // back, with their output, and says how each ended.
                writeln!(
                    err,
                    "sshmcp: the daemon went away ({e}); waiting for the next one"
                )?;
                c = next_daemon(paths).await?;
                continue;
            }
            answer => answer?,
        };
        let report = match answer {
            Ok(report) => report,
            Err(e) if offsets != (0, 0) => bail!(
                "{id} is gone ({}): its session ended or newer commands pushed it out; the \
                 output above is what there was",
                e.message
            ),
            Err(e) => bail!(
                "{}\nhint: `sshmcp watch` shows the running commands' ids",
                e.message
            ),
        };
        // The whole id from now on: a prefix could come to begin another's.
        id = report.handle_id.clone();
        // An `exec` under way keeps only the last bytes of each stream: a reader that fell
        // behind is told what it missed.
        for (name, chunk, asked) in [
            ("stdout", &report.stdout, offsets.0),
            ("stderr", &report.stderr, offsets.1),
        ] {
            if chunk.offset > asked {
                writeln!(
                    err,
                    "[… {} bytes of {name} not kept …]",
                    chunk.offset - asked
                )?;
            }
        }
        out.write_all(&bytes(&report.stdout)?)?;
        err.write_all(&bytes(&report.stderr)?)?;
        out.flush()?;
        let before = offsets;
        offsets = (report.stdout.next_offset, report.stderr.next_offset);
        let drained = [&report.stdout, &report.stderr]
            .iter()
            .all(|s| s.next_offset >= s.total_bytes);
        caught_up = drained;
        if !drained {
            // A page that moved nothing would be read again forever.
            anyhow::ensure!(
                offsets != before,
                "{id}'s output files are shorter than its byte counts; nothing more can be read"
            );
            continue;
        }
        // Ended once its end is recorded: a killed command may still be writing its last
        // bytes when its status already says so.
        if report.ended_at.is_some() {
            if !follow {
                return Ok(ExitCode::SUCCESS);
            }
            let how = report.status.how_it_ended(report.exit_code);
            writeln!(err, "sshmcp: {id} {how}")?;
            return Ok(match (report.status, report.exit_code) {
                (CommandState::Completed, Some(code)) => ExitCode::from(code.clamp(0, 255) as u8),
                _ => ExitCode::FAILURE,
            });
        }
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// The daemon that comes after the one a follower lost, within [`NEXT_DAEMON_WAIT`].
async fn next_daemon(paths: &RuntimePaths) -> anyhow::Result<Connection> {
    let give_up = tokio::time::Instant::now() + NEXT_DAEMON_WAIT;
    loop {
        // Its socket is the event, and no notice of it reaches the CLI: it looks again.
        if let Ok(Some(c)) = connect_existing(paths).await {
            return Ok(c);
        }
        if tokio::time::Instant::now() >= give_up {
            bail!(
                "no daemon came back within {} s; the output above is what was read",
                NEXT_DAEMON_WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A chunk's bytes, whatever carried them.
fn bytes(chunk: &StreamChunk) -> anyhow::Result<Vec<u8>> {
    Ok(match chunk.encoding {
        Encoding::Utf8 => chunk.data.clone().into_bytes(),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.decode(&chunk.data)?,
    })
}

/// What `given` (an id or a unique prefix) names, for the person to confirm: the whole id, and
/// it with what it is and its session; none when the daemon's overview does not show it (it
/// then says itself what the id is, or that nothing has it).
async fn described(c: &Connection, given: &str) -> Option<(String, String)> {
    let overview = c
        .client
        .overview(context_with_timeout(Duration::from_secs(10)))
        .await
        .ok()?;
    let mut found: Vec<(String, String)> = Vec::new();
    for view in &overview.sessions {
        let place = format!(
            "of session {} ({})",
            view.session.session_id,
            crate::render::printable(&view.session.target)
        );
        let mut add = |id: &str, what: String| {
            found.push((id.to_string(), format!("{id}, {what} {place}")));
        };
        for exec in &view.execs {
            add(&exec.id, format!("the {} `{}`", exec.tool, exec.preview));
        }
        for command in &view.commands {
            add(
                &command.handle_id,
                format!("the command `{}`", command.preview),
            );
        }
        for transfer in &view.transfers {
            let direction = match transfer.direction {
                sshmcp_proto::transfer::TransferDirection::Download => "download of",
                sshmcp_proto::transfer::TransferDirection::Upload => "upload to",
            };
            add(
                &transfer.operation_id,
                format!("the {direction} {}", transfer.remote_path),
            );
        }
        for forward in &view.forwards {
            let port = format!("{}:{}", forward.listen_host, forward.listen_port);
            add(
                &forward.forward_id,
                format!("the {} forward on {port}", forward.kind.as_str()),
            );
        }
    }
    let shown = |(id, said): &(String, String)| (id.clone(), crate::render::printable(said));
    if let Some(exact) = found.iter().find(|(id, _)| id == given) {
        return Some(shown(exact));
    }
    let mut matching = found.iter().filter(|(id, _)| id.starts_with(given));
    match (matching.next(), matching.next()) {
        (Some(only), None) if !given.is_empty() => Some(shown(only)),
        _ => None,
    }
}

pub async fn kill(
    paths: &RuntimePaths,
    id: String,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let c = daemon(paths, "stop_by_id").await?;
    // What the person confirms is what is stopped: the whole id, not the prefix again (it
    // could name another by the time they answer).
    let mut id = id;
    if !yes && std::io::stdin().is_terminal() {
        let (whole, what) = described(&c, &id).await.unwrap_or((id.clone(), id.clone()));
        id = whole;
        if crate::commands::ask(&format!("stop {what}, which an agent started?"))? == Some(false) {
            writeln!(out, "nothing stopped")?;
            return Ok(ExitCode::FAILURE);
        }
    }
    let ctx = context_with_timeout(Duration::from_secs(60));
    match c.client.stop_by_id(ctx, id).await? {
        Ok(stopped) => {
            writeln!(
                out,
                "{} {} of session {}: {}",
                stopped.kind, stopped.id, stopped.session_id, stopped.outcome
            )?;
            // What still runs, or may, is no success to a script.
            let stopped_for_sure = [
                "killed",
                "already_exited",
                "not_running",
                "cancelled",
                "closed",
            ];
            Ok(match stopped_for_sure.contains(&stopped.outcome.as_str()) {
                true => ExitCode::SUCCESS,
                false => ExitCode::FAILURE,
            })
        }
        Err(e) => bail!(
            "{}\nhint: `sshmcp watch` shows what runs, with its ids",
            e.message
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk's bytes are its text, or its base64 decoded; base64 that is not is an error.
    #[test]
    fn a_chunk_gives_back_its_bytes_either_way() {
        let chunk = |data: &str, encoding| StreamChunk {
            data: data.into(),
            encoding,
            offset: 0,
            next_offset: 2,
            total_bytes: 2,
            truncated: false,
        };
        assert_eq!(
            bytes(&chunk("hé", Encoding::Utf8)).unwrap(),
            "hé".as_bytes()
        );
        assert_eq!(
            bytes(&chunk("/wA=", Encoding::Base64)).unwrap(),
            [0xff, 0x00]
        );
        assert!(bytes(&chunk("not base64!", Encoding::Base64)).is_err());
    }
}
