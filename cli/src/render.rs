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

pub fn status_text(s: &DaemonStatus, tools: &[String]) -> String {
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
        tools = tools.join(", "),
    )
}

/// The status as JSON: the daemon's own fields plus the tools it serves.
pub fn status_json(s: &DaemonStatus, tools: &[String]) -> serde_json::Value {
    let mut value = serde_json::to_value(s).unwrap_or_default();
    value["tools"] = serde_json::json!(tools);
    value
}
