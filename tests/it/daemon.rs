//! The daemon's process model: one instance however many clients start it, stale sockets,
//! private runtime directories, and keys never logged. Crashes and restarts are in `lifecycle`.

use serde_json::json;
use sshmcp_tests::env::files_under;
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::exec;

#[tokio::test]
async fn concurrent_first_use_starts_exactly_one_daemon() {
    let env = TestEnv::new();
    // All six start together, so their daemon starts really race.
    let shims = futures::future::join_all((0..6).map(|_| env.mcp())).await;
    let calls = shims
        .iter()
        .map(|shim| shim.call("session_list", json!({})));
    for r in futures::future::join_all(calls).await {
        assert_eq!(r["ok"], true, "{r}");
    }
    let pid = env.daemon_pid().expect("a daemon");
    let runtime = env.runtime_dir.display().to_string();
    let daemons = sshmcp_tests::process::count_matching(&["sshmcpd", &runtime]);
    assert_eq!(daemons, 1, "exactly one daemon (pid {pid})");
    for shim in shims {
        shim.close().await;
    }
}

/// A process that holds the pidfile without serving (a daemon still starting for a client
/// whose call was cut) makes a client wait for it, and start a daemon once the pidfile is
/// free, rather than fail its call. The holder lets go only once a daemon the client started
/// has closed the pidfile again, having found it held (inotify: Linux).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_client_waits_out_a_pidfile_held_by_a_daemon_not_serving_yet() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    use std::io::BufRead;
    use std::os::unix::fs::DirBuilderExt;
    let env = TestEnv::new();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&env.runtime_dir)
        .unwrap();
    let pidfile = env.runtime_dir.join("sshmcpd.pid");
    std::fs::write(&pidfile, "999999\n").unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg(&pidfile)
        .args(["sh", "-c", "echo held; read _; true"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut held = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut held)
        .unwrap();
    assert_eq!(held, "held\n");
    let closed = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    let gave_up = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_CLOSE_NOWRITE;
    closed.add_watch(&pidfile, gave_up).unwrap();
    let mcp = env.mcp().await;
    let (_, pending) = mcp.start_call("session_list", json!({})).await;
    // Up to 30 waits of a second each for the event: never a hang when none comes.
    let seen = tokio::task::spawn_blocking(move || {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        (0..30).any(|_| {
            let mut fds = [PollFd::new(closed.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(1000u16)).unwrap() > 0
                && closed.read_events().is_ok_and(|events| !events.is_empty())
        })
    });
    assert!(seen.await.unwrap(), "no daemon found the pidfile held");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    let r = sshmcp_tests::mcp::answer(pending).await;
    assert_eq!(r["ok"], true, "{r}");
    mcp.close().await;
}

#[tokio::test]
async fn a_runtime_dir_open_to_others_is_refused() {
    let env = TestEnv::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&env.runtime_dir).unwrap();
    std::fs::set_permissions(&env.runtime_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mcp = env.mcp().await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["error"]["code"], "daemon_unavailable");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("0700"),
        "{r}"
    );
    mcp.close().await;
}

/// Every test's world also checks this on drop (see `TestEnv`); this one makes sure the
/// check has something to find: the daemon log names the session, a wrong key was tried.
#[tokio::test]
async fn session_keys_never_reach_logs_or_state_files() {
    // Every log at its most verbose.
    // A directive naming rmcp's own module must not widen the caps either.
    let trace = [
        ("SSHMCP_LOG", "trace"),
        (
            "SSHMCP_SHIM_LOG",
            "trace,rmcp::service=trace,tarpc::client=trace",
        ),
    ];
    let (env, mcp, s) = crate::connected_with(&SshdOptions::default(), &trace).await;
    exec(&mcp, &s, "echo hi", json!({})).await;
    exec(
        &mcp,
        &(s.0.clone(), format!("{}x", s.1)),
        "echo hi",
        json!({}),
    )
    .await;
    mcp.call("session_list", json!({})).await;
    mcp.call("disconnect", json!({"session_id": s.0})).await;
    mcp.close().await;
    let files: Vec<_> = [&env.state_dir, &env.runtime_dir, &env.logs_dir()]
        .iter()
        .flat_map(|d| files_under(d))
        .collect();
    let log = files.iter().find(|f| f.ends_with("sshmcpd.log"));
    let mode =
        log.map(|f| std::os::unix::fs::PermissionsExt::mode(&f.metadata().unwrap().permissions()));
    assert_eq!(
        mode.map(|m| m & 0o777),
        Some(0o600),
        "the daemon's log is private: {files:?}"
    );
    assert!(
        files.iter().any(|f| f.ends_with("sessions.json")),
        "{files:?}"
    );
    // The shim did log (at trace), and so did the daemon.
    let shim_log: u64 = std::fs::read_dir(env.logs_dir())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(shim_log > 0, "the shim logged nothing at trace");
    assert!(
        env.daemon_log_shows("call done"),
        "the daemon logged nothing at trace"
    );
    for file in &files {
        let text = String::from_utf8_lossy(&std::fs::read(file).unwrap()).into_owned();
        assert!(
            !text.contains(&s.1),
            "session key found in {}",
            file.display()
        );
    }
    assert!(env.daemon_log_shows(&s.0), "the log does name the session");
}
/// Another user cannot use the daemon even when the socket is reachable: the daemon checks the
/// peer's uid. (The 0700 runtime directory normally stops them earlier; it is opened up here
/// to reach the daemon's own check.) Switching uid needs root, as in CI.
#[tokio::test]
async fn clients_of_another_uid_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test switches uid and must run as root"
    );
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    assert_eq!(mcp.call("session_list", json!({})).await["ok"], true);
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(env.root.path(), open.clone()).unwrap();
    std::fs::set_permissions(&env.runtime_dir, open).unwrap();
    let socket = env.runtime_dir.join("sshmcpd.sock");
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    // A copy the other uid can run wherever the checkout lives (/root, any 0700 directory).
    let cli = env.root.path().join("sshmcp");
    std::fs::copy(sshmcp_tests::bins::path("sshmcp"), &cli).unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(&cli)
        .args(["daemon", "status"])
        .env_clear()
        .envs(env.env_vars())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    // The other user's client does not believe a daemon in a directory that is not theirs.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("owned by another user"), "{err}");
    // And the daemon refuses that user's connection when one is made anyway.
    let connect = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); s.recv(1)",
        socket.display().to_string()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &connect])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(env.daemon_log_shows("refusing a client of another user"));
    // The owner still gets in, once the directory is private again (a loose one is
    // refused by the owner's client too).
    assert!(!env.cli(&["daemon", "status"]).status.success());
    std::fs::set_permissions(&env.runtime_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(env.cli(&["daemon", "status"]).status.success());
    mcp.close().await;
}

/// A setting that does not parse (here its environment variable) keeps the daemon from
/// starting, and the client that started it is told which one and why.
#[tokio::test]
async fn a_setting_that_does_not_parse_is_named_to_the_client() {
    let env = TestEnv::with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_MAX_OUTPUT_BYTES", "abc")],
    );
    let mcp = env.mcp().await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["error"]["code"], "daemon_unavailable");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("invalid value 'abc' for '--max-output-bytes"),
        "{r}"
    );
    mcp.close().await;
}

/// A config file that does not parse is told to the agent in one line that says where and
/// what, and to the person in the CLI with the file's lines kept, indented.
#[tokio::test]
async fn a_config_file_that_does_not_parse_is_told_in_one_line_to_agents_and_whole_to_people() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "max-sessions = \"many\"\n").unwrap();
    let config = config.display().to_string();
    let env = TestEnv::with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_CONFIG", &config)],
    );
    let mcp = env.mcp().await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["error"]["code"], "daemon_unavailable", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(!said.contains('\n'), "{said:?}");
    assert!(
        said.contains("TOML parse error at line 1") && said.contains("expected u32"),
        "{said}"
    );
    mcp.close().await;
    let out = env.cli(&["sessions"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TOML parse error at line 1")
            && err.contains("\n  1 | max-sessions = \"many\""),
        "{err}"
    );
}

#[tokio::test]
async fn a_runtime_dir_too_long_for_unix_sockets_is_refused_clearly() {
    let long = format!("/tmp/{}", "d".repeat(90));
    let env = TestEnv::with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_RUNTIME_DIR", &long)],
    );
    // Refused as the MCP server starts, where the client's log shows it to the person.
    let out = env.mcp_refusing(&[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{said}");
    assert!(said.contains("too long for Unix sockets"), "{said}");
    // The CLI says it too.
    let out = env.cli(&["sessions"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("too long for Unix sockets"), "{said}");
    assert!(!std::path::Path::new(&long).exists(), "nothing is created");
}

/// A descriptor its starter leaked (no close-on-exec) is not kept by the long-lived daemon:
/// the other end of that pipe sees EOF once the starter is gone.
#[tokio::test]
async fn the_daemon_keeps_no_descriptor_its_starter_leaked() {
    let env = TestEnv::new();
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(["daemon", "start"])
        .env_clear()
        .envs(env.env_vars())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    drop(write_end);
    use std::os::fd::AsRawFd;
    let leaked = std::fs::read_link(format!("/proc/self/fd/{}", read_end.as_raw_fd())).unwrap();
    let daemon = env.daemon_pid().expect("daemon pid");
    let held: Vec<_> = std::fs::read_dir(format!("/proc/{daemon}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| *target == leaked)
        .collect();
    assert!(held.is_empty(), "the daemon holds {leaked:?}");
}

/// Clients connecting, running a command and disconnecting over and over leave the daemon's
/// descriptors, child processes and masters where they were after the first round. (The
/// minute-long, 50-client figures are in docs/reliability.md: `examples/churn.rs`.)
#[tokio::test]
async fn churn_leaves_no_descriptors_processes_or_masters_behind() {
    use sshmcp_tests::churn::{Footprint, churn};
    let opts = SshdOptions {
        extra_ports: 7,
        ..SshdOptions::default()
    };
    let env = TestEnv::with(&opts, &[("SSHMCP_LOG", "info")]);
    // The idle daemon: the footprint churn must come back to. (The CLI that started it may
    // still count with one descriptor for a moment: a leak is growth past it.)
    assert!(env.cli(&["daemon", "start"]).status.success());
    let idle = Footprint::of(&env);
    assert_eq!((idle.children, idle.masters), (0, 0), "{idle:?}");
    let report = churn(&env, 8, 4, std::time::Duration::from_secs(120)).await;
    assert_eq!((report.cycles, report.failures), (32, 0), "{report:?}");
    let after = Footprint::settle_to(&env, idle).await;
    assert!(
        after.fds <= idle.fds && (after.children, after.masters) == (0, 0),
        "idle {idle:?}, after {after:?}"
    );
}

/// A relative runtime directory is refused before anything is made or started.
#[tokio::test]
async fn a_relative_runtime_directory_is_refused_before_anything_starts() {
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[("SSHMCP_RUNTIME_DIR", "relative/dir")],
    );
    let out = env.cli(&["sessions"]);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("must be an absolute path"), "{said}");
    assert!(!std::path::Path::new("/relative").exists());
    assert!(!std::path::Path::new("relative").exists());
}

/// The MCP server refuses a local root the daemon would refuse on every call (`/`, home, a
/// relative path) when it starts, with stdout left to MCP (empty), where the person who
/// configured the client sees it, not later through the agent.
#[tokio::test]
async fn the_mcp_server_refuses_an_unusable_local_root_when_it_starts() {
    let env = TestEnv::new();
    let home = env
        .env_vars()
        .into_iter()
        .find(|(k, _)| k == "HOME")
        .expect("HOME")
        .1;
    for root in ["/", home.as_str(), "relative"] {
        let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp-mcp"))
            .args(["--local-root", root])
            .env_clear()
            .envs(env.env_vars())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{root}: {out:?}");
        assert!(out.stdout.is_empty(), "{root}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(&format!("--local-root {root}")), "{said}");
    }
    assert!(env.daemon_pid().is_none(), "a daemon was started");
}
