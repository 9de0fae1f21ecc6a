//! The `sshmcpd` binary: settings, single instance, logging, then the async runtime.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use sshmcpd::config::{Flags, Settings};
use sshmcpd::lifecycle::{self, Instance, ReadyReport};

fn main() -> ExitCode {
    // OpenSSH runs us as the master's KnownHostsCommand (see host_key.rs); first, as its
    // environment also holds the askpass variables.
    if let Some(status) = sshmcpd::session::host_key::run_if_requested() {
        return ExitCode::from(status);
    }
    // OpenSSH runs us as its askpass program for every prompt (see askpass.rs).
    if let Some(status) = sshmcpd::session::askpass::run_if_requested() {
        return ExitCode::from(status);
    }
    // rsync runs us as its remote shell for every transfer (see transfers/relay.rs).
    if let Some(status) = sshmcpd::transfers::relay::run_if_requested() {
        return ExitCode::from(status);
    }
    close_inherited_descriptors();
    let flags = match Flags::try_parse() {
        Ok(flags) => flags,
        Err(e) => {
            // A setting that does not parse (a flag, or its SSHMCP_ variable): a client that
            // started us reads why on its pipe rather than "exited before reporting ready".
            if e.use_stderr() && std::env::args_os().any(|a| a == "--report-ready") {
                let said = e.to_string();
                let first = said.lines().next().unwrap_or_default();
                ReadyReport::new(true).error(first.trim_start_matches("error: "));
            }
            e.exit()
        }
    };
    if flags.check_config {
        return match check_config(&flags) {
            // What it would use, for `sshmcp doctor` when no daemon runs to say.
            Ok(settings) => {
                let shown = |path: &std::path::Path| path.to_string_lossy().into_owned();
                let would = serde_json::json!({
                    "local_root": shown(&settings.local_root),
                    "ssh_config": settings.ssh_config.as_deref().map(shown),
                    // The file it would read: none when the default one is not there.
                    "config_file": settings.config_file.as_deref().filter(|f| f.exists()).map(shown),
                });
                println!("{would}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sshmcpd: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let report = ReadyReport::new(flags.report_ready);
    match run(&flags, &report) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report.error(&format!("{e:#}"));
            eprintln!("sshmcpd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What a start checks of its settings before it touches anything: whether a daemon could
/// start with them (`--check-config`; the directories are checked where they exist, as a
/// start would create the others).
fn check_config(flags: &Flags) -> anyhow::Result<Settings> {
    let settings = Settings::load(flags).map_err(anyhow::Error::msg)?;
    settings.runtime.check().map_err(anyhow::Error::msg)?;
    log_filter(&settings)?;
    for (dir, what) in [
        (&settings.runtime.dir, "runtime directory"),
        (&settings.state_dir, "state directory"),
    ] {
        if dir.exists() {
            sshmcp_local::paths::check_private_dir(dir).context(what)?;
        }
    }
    Ok(settings)
}

fn log_filter(settings: &Settings) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    tracing_subscriber::EnvFilter::try_new(format!("{},tarpc=warn", settings.log))
        .context("log filter")
}

fn run(flags: &Flags, report: &ReadyReport) -> anyhow::Result<()> {
    let settings = Settings::load(flags).map_err(anyhow::Error::msg)?;
    settings.runtime.check().map_err(anyhow::Error::msg)?;
    settings.runtime.ensure().context("runtime directory")?;
    // The lock comes before the runtime and the log: a losing duplicate touches nothing.
    let mut pidfile = match lifecycle::claim_instance(settings.runtime.pidfile())? {
        Instance::Mine(pidfile) => pidfile,
        Instance::Running(pid) => {
            report.running(pid);
            return Ok(());
        }
    };
    sshmcp_local::paths::ensure_private_dir(&settings.state_dir).context("state directory")?;
    let log = sshmcpd::logfile::RotatingLog::open(&settings.log_file()).context("log file")?;
    let (writer, _flush_guard) = tracing_appender::non_blocking(log);
    let filter = log_filter(&settings)?;
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .init();
    raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(lifecycle::run(settings, report, &mut pidfile));
    // Nothing of ours may still run once the lock is free for the next daemon: a close that
    // outlived the teardown's cap gets a moment, then goes with the runtime.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    drop(pidfile);
    result.context("daemon")
}

/// Closes every descriptor above stderr that whoever started us leaked (a client's sockets or
/// pipes without close-on-exec): a long-lived daemon holding them would keep their other ends
/// from ever seeing EOF. The askpass relay never gets here, so ssh's descriptors stay its own.
fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir(sshmcpd::platform::OWN_FDS_DIR) else {
        return;
    };
    let fds: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: nothing in this process owns a descriptor yet, so closing one cannot pull
        // it from under an owner; the directory's own is already closed (EBADF, ignored).
        unsafe { nix::libc::close(fd) };
    }
}

/// Each running command holds a control socket and three pipes: raise the soft descriptor limit
/// to the hard one so a busy daemon does not run out at the common default of 1024 (macOS:
/// 256). macOS's hard limit is unlimited, which its kernel refuses as a soft limit: there the
/// soft limit becomes `OPEN_MAX` (10,240), which it always takes.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const OPEN_MAX: u64 = 10_240;
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            let raised = setrlimit(Resource::RLIMIT_NOFILE, hard, hard).or_else(|_| {
                setrlimit(Resource::RLIMIT_NOFILE, hard.min(OPEN_MAX).max(soft), hard)
            });
            if let Err(e) = raised {
                tracing::warn!("cannot raise the open file limit from {soft}: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot read the open file limit: {e}"),
    }
}
