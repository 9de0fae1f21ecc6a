//! The commands that need no daemon: `mcp-config`, `config` and `completions`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use serde_json::json;

use crate::cli::{Cli, Command, ConfigCommand, McpClient};

/// Runs `command` when it is one of these; None for the others.
pub fn run(command: &Command) -> Option<anyhow::Result<ExitCode>> {
    let out = &mut std::io::stdout().lock();
    let done = match command {
        Command::McpConfig {
            client: Some(client),
            local_root,
        } => mcp_config(*client, local_root.as_deref(), out),
        Command::McpConfig { client: None, .. } => clients(out),
        Command::Config { command } => config(command, out),
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "sshmcp", out);
            Ok(())
        }
        _ => return None,
    };
    Some(done.map(|()| ExitCode::SUCCESS))
}

/// The MCP server installed beside this binary.
fn shim_path() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let shim = me.with_file_name("sshmcp-mcp");
    anyhow::ensure!(
        shim.is_file(),
        "no sshmcp-mcp beside {} (install both binaries in one directory); hint: cargo \
         install --path shim",
        me.display()
    );
    Ok(shim)
}

fn mcp_config(
    client: McpClient,
    local_root: Option<&Path>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let shim = shim_path()?;
    let root = match local_root {
        Some(root) => std::path::absolute(root)?,
        // The root a daemon started now takes (its config file's, the environment's, else
        // its default), so that one root holds the agent's files whichever way sshmcp was
        // set up.
        None => crate::doctor::check_config()
            .ok()
            .and_then(|would| would.local_root)
            .or_else(sshmcp_local::paths::default_local_root)
            .ok_or_else(|| anyhow::anyhow!("HOME is not set; hint: pass --local-root"))?,
    };
    // The daemon would refuse it on every call that needs the root.
    sshmcp_local::paths::check_local_root(&root).map_err(|why| {
        anyhow::anyhow!(
            "{why}: {}; hint: pass --local-root DIR, a folder of its own",
            root.display()
        )
    })?;
    let (shim, root) = (shim.display().to_string(), root.display().to_string());
    let pinned = pinned_environment();
    match client {
        McpClient::ClaudeCode => writeln!(
            out,
            "claude mcp add sshmcp{} -- {} --local-root {}",
            pinned
                .iter()
                .map(|(name, value)| format!(" -e {}", sh_word(&format!("{name}={value}"))))
                .collect::<String>(),
            sh_word(&shim),
            sh_word(&root)
        )?,
        McpClient::ClaudeDesktop | McpClient::Cursor => {
            let mut server = json!({"command": shim, "args": ["--local-root", root]});
            if !pinned.is_empty() {
                server["env"] = json!(
                    pinned
                        .into_iter()
                        .collect::<std::collections::BTreeMap<_, _>>()
                );
            }
            let entry = json!({"mcpServers": {"sshmcp": server}});
            writeln!(out, "{}", serde_json::to_string_pretty(&entry)?)?;
            eprintln!(
                "{}",
                match client {
                    McpClient::ClaudeDesktop => {
                        "add this entry to ~/.config/Claude/claude_desktop_config.json (Linux) \
                         or ~/Library/Application Support/Claude/claude_desktop_config.json \
                         (macOS), then restart Claude Desktop"
                    }
                    _ => "add this entry to ~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
                }
            );
        }
    }
    Ok(())
}

/// The variables of this environment that decide which daemon a client finds and how one it
/// starts is set up: a client launched without them (a GUI launcher's bare environment)
/// would find, or start, another daemon than this CLI's.
fn pinned_environment() -> Vec<(String, String)> {
    [
        "SSHMCP_RUNTIME_DIR",
        "SSHMCP_STATE_DIR",
        "SSHMCP_CONFIG",
        "SSHMCP_SSH_CONFIG",
    ]
    .into_iter()
    .filter_map(|name| {
        let value = std::env::var(name).ok().filter(|v| !v.is_empty())?;
        Some((name.to_string(), value))
    })
    .collect()
}

/// `sshmcp config path|show|check`.
fn config(command: &ConfigCommand, out: &mut impl Write) -> anyhow::Result<()> {
    let file = sshmcp_local::paths::config_file()
        .ok_or_else(|| anyhow::anyhow!("HOME is not set; hint: set SSHMCP_CONFIG"))?;
    match command {
        ConfigCommand::Path => {
            writeln!(out, "{}", file.display())?;
            if !file.exists() {
                eprintln!("(it does not exist: a daemon takes the defaults)");
            }
        }
        ConfigCommand::Show => match std::fs::read_to_string(&file) {
            Ok(text) => write!(out, "{text}")?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "no config file at {}: a daemon takes the defaults",
                    file.display()
                );
            }
            Err(e) => anyhow::bail!("cannot read {}: {e}", file.display()),
        },
        ConfigCommand::Check => match crate::doctor::check_config() {
            Ok(would) => match would.config_file {
                Some(read) => writeln!(out, "{}: a daemon started now takes it", read.display())?,
                None => writeln!(
                    out,
                    "no config file at {}: a daemon started now takes the defaults",
                    file.display()
                )?,
            },
            Err(why) => anyhow::bail!("{why}"),
        },
    }
    Ok(())
}

/// The clients `mcp-config` knows, and the command for each.
fn clients(out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "sshmcp mcp-config CLIENT prints what adds sshmcp to that client:\n\
         \x20 sshmcp mcp-config claude-code      the `claude mcp add` command to run\n\
         \x20 sshmcp mcp-config claude-desktop   the entry for claude_desktop_config.json\n\
         \x20 sshmcp mcp-config cursor           the entry for ~/.cursor/mcp.json\n\
         Add --local-root DIR to choose where the agent's files go."
    )?;
    Ok(())
}

/// `s` as one shell word: as it is when it holds nothing a shell would read, else quoted.
fn sh_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(
            sh_word("/home/a/.local/bin/sshmcp-mcp"),
            "/home/a/.local/bin/sshmcp-mcp"
        );
        assert_eq!(sh_word("/home/a b/x"), "'/home/a b/x'");
        assert_eq!(sh_word("/it's"), "'/it'\\''s'");
    }
}
