//! The `sshmcp` binary: a person's view of the daemon. What shows or closes sessions
//! (`sessions`, `disconnect`) and `daemon start|restart` start a daemon when none runs;
//! `daemon status|stop|logs` and `doctor` never do.

mod cli;
mod commands;
mod doctor;
mod history;
mod local;
mod render;
mod since;
mod watch;
mod work;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // What needs no daemon needs no runtime either.
    if let Some(done) = local::run(&cli.command) {
        return finish(done);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sshmcp: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    finish(runtime.block_on(commands::run(cli.command)))
}

/// The exit of a command, its error said on stderr.
fn finish(done: anyhow::Result<ExitCode>) -> ExitCode {
    match done {
        Ok(code) => code,
        // The reader went away (`sshmcp watch | head`): what it wanted was written.
        Err(e)
            if e.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let usage = e.downcast_ref::<cli::Usage>().is_some();
            let message = format!("{e:#}");
            // A cause of several lines (a TOML error points at its line) stays readable: its
            // lines after the first are indented under it, a hint kept at the margin.
            let mut lines = message.lines();
            eprintln!("sshmcp: {}", lines.next().unwrap_or_default());
            for line in lines {
                match line.starts_with("hint:") {
                    true => eprintln!("{line}"),
                    false => eprintln!("  {line}"),
                }
            }
            if usage {
                return ExitCode::from(2);
            }
            if !message.contains("hint:") {
                eprintln!("hint: `sshmcp doctor` checks this machine's setup");
            }
            ExitCode::FAILURE
        }
    }
}
