//! The `sshmcp-mcp` binary: a stdio MCP server an agent launches. Logs go to stderr; stdout
//! carries MCP only.

mod answer;
mod args;
mod lean;
mod link;
mod progress;
mod server;
mod slim;
mod stdio;
mod tools;
mod toolset;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use rmcp::ServiceExt;

/// Stdio MCP server for sshmcp: connect to SSH hosts and run commands through the sshmcp daemon.
#[derive(Parser)]
#[command(name = "sshmcp-mcp", version)]
struct Flags {
    /// Where this agent's downloads, uploads and spooled output live (absolute path); else
    /// SSHMCP_LOCAL_ROOT (empty counts as unset).
    #[arg(long)]
    local_root: Option<PathBuf>,
    /// Daemon runtime directory (socket); else SSHMCP_RUNTIME_DIR (empty counts as unset);
    /// defaults to the per-user one.
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Expose only these tools: a comma-separated list of tools and groups (sessions,
    /// commands, tasks, inspect, files, transfers, forwards, and read-only for what a
    /// read-only host keeps). The session tools are always exposed. Default: every tool.
    #[arg(long, value_name = "LIST")]
    tools: Option<String>,
}

/// Log targets capped whatever `SSHMCP_SHIM_LOG` asks, as a filter of its own that no
/// directive can widen: rmcp prints every request's arguments and every answer at debug (the
/// session key is in both), and tarpc prints requests at trace. MCP hosts keep the shim's
/// stderr in files.
fn secret_safe_caps() -> tracing_subscriber::filter::Targets {
    use tracing::level_filters::LevelFilter;
    tracing_subscriber::filter::Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("rmcp", LevelFilter::INFO)
        .with_target("tarpc", LevelFilter::WARN)
}

fn main() -> ExitCode {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::FilterExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let asked = tracing_subscriber::EnvFilter::try_from_env("SSHMCP_SHIM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(asked.and(secret_safe_caps()));
    tracing_subscriber::registry().with(layer).init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sshmcp-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut flags = Flags::parse();
    // A flag, else its variable (empty counts as unset, as for the CLI).
    let from_env = sshmcp_local::paths::path_from_env;
    flags.local_root = flags.local_root.or_else(|| from_env("SSHMCP_LOCAL_ROOT"));
    flags.runtime_dir = flags.runtime_dir.or_else(|| from_env("SSHMCP_RUNTIME_DIR"));
    // A root or a runtime directory the daemon would refuse on every call is refused now,
    // where the person who configured the client sees it, not later by the agent.
    if let Some(root) = &flags.local_root {
        sshmcp_local::paths::check_local_root(root)
            .map_err(|why| anyhow::anyhow!("--local-root {}: {why}", root.display()))?;
    }
    if let Some(dir) = &flags.runtime_dir {
        sshmcp_local::paths::RuntimePaths::resolve(Some(dir.clone()))
            .check()
            .map_err(|why| anyhow::anyhow!("--runtime-dir: {why}"))?;
    }
    let tools = toolset::select(flags.tools.as_deref()).map_err(anyhow::Error::msg)?;
    // One thread: the shim only translates, and every call waits on the daemon. A second
    // worker would add its stack and malloc arena to a process agents start by the dozen.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let link = link::DaemonLink::new(flags.runtime_dir);
        let shim = server::Shim::new(link, flags.local_root, &tools);
        let service = match shim.serve(stdio::streams()).await {
            Ok(service) => service,
            // stdin closed before initialize: nothing to serve, not an error.
            Err(e) if e.to_string().contains("connection closed") => return Ok(()),
            Err(e) => return Err(e).context("MCP handshake"),
        };
        service.waiting().await.context("MCP session")?;
        Ok(())
    })
}
