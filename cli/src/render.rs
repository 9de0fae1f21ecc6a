//! What people see: the sessions table, the status text, and their JSON forms.

use sshmcp_proto::DaemonStatus;
use sshmcp_proto::session::SessionSummary;

/// A fixed-column table; empty listings say so in words.
pub fn sessions_table(rows: &[SessionSummary]) -> String {
    if rows.is_empty() {
        return "no sessions\n".to_string();
    }
    let header = [
        "SESSION",
        "STATE",
        "TARGET",
        "SERVER",
        "MASTER",
        "CREATED",
        "LAST USED",
        "CMDS",
    ];
    let body: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.session_id.clone(),
                r.state.as_str().to_string(),
                r.target.clone(),
                format!("{}:{}", r.server_host, r.server_port),
                r.master_pid
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.created_at.clone(),
                r.last_used_at.clone(),
                r.active_commands.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &body {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &body {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

pub fn status_text(s: &DaemonStatus) -> String {
    format!(
        "sshmcpd {version} is running (pid {pid}, protocol {proto}, since {since})\n\
         socket:      {socket}\n\
         log:         {log}\n\
         state dir:   {state}\n\
         local root:  {root} (default for agents that set none)\n\
         ssh config:  {cfg}\n\
         sessions:    {n} of at most {max}\n\
         output cap:  {out} bytes per stream\n",
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
    )
}

pub fn status_json(s: &DaemonStatus) -> serde_json::Value {
    serde_json::json!({
        "pid": s.pid,
        "daemon_version": s.daemon_version,
        "protocol_version": s.protocol_version,
        "started_at": s.started_at,
        "socket": s.socket,
        "state_dir": s.state_dir,
        "log_file": s.log_file,
        "default_local_root": s.default_local_root,
        "ssh_config": s.ssh_config,
        "sessions": s.sessions,
        "max_sessions": s.max_sessions,
        "max_output_bytes": s.max_output_bytes,
        "max_transfers": s.max_transfers,
    })
}
