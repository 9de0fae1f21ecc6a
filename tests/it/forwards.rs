//! Port forwards on the session's master: local, remote and SOCKS, through the real sshd
//! (this machine is also the remote host, so one echo server here is both ends' target).

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use sshmcp_tests::echo::echo_server;

use crate::{code, connect_watcher, connected, on_session, remote_out};

type Session = (String, String);

async fn start(mcp: &sshmcp_tests::McpClient, s: &Session, args: Value) -> Value {
    on_session(mcp, s, "forward_start", args).await
}

/// forward_stop of the forward `f` (an answer of forward_start).
async fn stop(mcp: &sshmcp_tests::McpClient, s: &Session, f: &Value) -> Value {
    on_session(
        mcp,
        s,
        "forward_stop",
        json!({"forward_id": f["forward_id"]}),
    )
    .await
}

/// A `kind` forward (`local` or `remote`) to 127.0.0.1:`target`; it must open.
async fn start_to(mcp: &sshmcp_tests::McpClient, s: &Session, kind: &str, target: u16) -> Value {
    let f = start(
        mcp,
        s,
        json!({"kind": kind, "target_host": "127.0.0.1", "target_port": target}),
    )
    .await;
    assert_eq!(f["ok"], true, "{f}");
    f
}

/// Sends `data` through `stream` and reads as much back, writing and reading at once.
async fn round_trip(stream: TcpStream, data: &[u8]) -> Vec<u8> {
    let (mut r, mut w) = stream.into_split();
    let sent = data.to_vec();
    let writer = tokio::spawn(async move { w.write_all(&sent).await.map(|()| w) });
    let mut back = vec![0u8; data.len()];
    r.read_exact(&mut back).await.unwrap();
    drop(writer.await.unwrap().unwrap());
    back
}

fn logins(env: &sshmcp_tests::TestEnv) -> usize {
    env.sshd.log_text().matches("Accepted publickey").count()
}

/// Whether something listens on 127.0.0.1:`port` (a bind fails).
fn listening(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
}

#[tokio::test]
async fn a_local_forward_carries_a_megabyte_both_ways_without_a_new_login() {
    let (env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let before = logins(&env);
    let f = start_to(&mcp, &s, "local", echo).await;
    assert_eq!(f["kind"], "local");
    assert_eq!(f["listen_host"], "127.0.0.1");
    assert_eq!(f["target_port"], echo);
    let port = f["listen_port"].as_u64().unwrap() as u16;
    assert_ne!(port, 0, "the port in force");
    let data: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert!(round_trip(stream, &data).await == data, "byte for byte");
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(list["sessions"][0]["active_forwards"], 1);
    assert_eq!(logins(&env), before, "no new authentication");
    mcp.close().await;
}

#[tokio::test]
async fn a_remote_forward_is_reached_from_the_host() {
    let (env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let before = logins(&env);
    let f = start_to(&mcp, &s, "remote", echo).await;
    let port = f["listen_port"].as_u64().unwrap();
    assert_ne!(port, 0, "the server's allocated port");
    let script =
        format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; printf ping >&3; head -c 4 <&3'");
    assert_eq!(remote_out(&mcp, &s, &script).await, "ping");
    assert_eq!(logins(&env), before, "no new authentication");
    // The same again would only alias the first (the master keeps one listener).
    let again = start(
        &mcp,
        &s,
        json!({"kind": "remote", "target_host": "127.0.0.1", "target_port": echo}),
    )
    .await;
    assert_eq!(code(&again), "forward_failed");
    let id = f["forward_id"].as_str().unwrap();
    assert_eq!(again["error"]["forward_id"], id, "{again}");
    assert!(
        again["error"]["message"].as_str().unwrap().contains(id),
        "{again}"
    );
    let stopped = stop(&mcp, &s, &f).await;
    assert_eq!(stopped["listen_port"], port, "{stopped}");
    let r = crate::exec(&mcp, &s, &script, json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_ne!(r["exit_code"], 0, "closed on the host: {r}");
    mcp.close().await;
}

#[tokio::test]
async fn a_socks5_connection_goes_through_a_dynamic_forward() {
    let (_env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let f = start(&mcp, &s, json!({"kind": "dynamic"})).await;
    assert_eq!(f["ok"], true, "{f}");
    assert_eq!(f["target_host"], Value::Null);
    let port = f["listen_port"].as_u64().unwrap() as u16;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // Greeting: version 5, one method, no authentication.
    stream.write_all(&[5, 1, 0]).await.unwrap();
    let mut chosen = [0u8; 2];
    stream.read_exact(&mut chosen).await.unwrap();
    assert_eq!(chosen, [5, 0]);
    // CONNECT to 127.0.0.1:echo.
    let mut request = vec![5, 1, 0, 1, 127, 0, 0, 1];
    request.extend(echo.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    stream.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[..2], [5, 0], "succeeded");
    assert_eq!(round_trip(stream, b"through socks").await, b"through socks");
    mcp.close().await;
}

#[tokio::test]
async fn forwards_belong_to_their_session_and_end_with_it() {
    let (env, mcp, s) = connected().await;
    let (other_mcp, other) = connect_watcher(&env).await;
    let echo = echo_server().await;
    let a = start_to(&mcp, &s, "local", echo).await;
    let b = start(&mcp, &s, json!({"kind": "dynamic"})).await;
    let c = start_to(&other_mcp, &other, "local", echo).await;
    let ids = |list: &Value| -> Vec<String> {
        list["forwards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["forward_id"].as_str().unwrap().to_string())
            .collect()
    };
    let mine = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(
        ids(&mine),
        [
            a["forward_id"].as_str().unwrap(),
            b["forward_id"].as_str().unwrap()
        ]
    );
    let theirs = on_session(&other_mcp, &other, "forward_list", json!({})).await;
    assert_eq!(ids(&theirs), [c["forward_id"].as_str().unwrap()]);
    let refused = stop(&other_mcp, &other, &a).await;
    assert_eq!(code(&refused), "forward_not_found");
    let port = |f: &Value| f["listen_port"].as_u64().unwrap() as u16;
    assert!(
        [&a, &b, &c].iter().all(|f| listening(port(f))),
        "all three listen"
    );
    // forward_stop frees the port at once.
    let stopped = stop(&other_mcp, &other, &c).await;
    assert_eq!(stopped["forward_id"], c["forward_id"]);
    assert!(!listening(port(&c)), "the port is free again");
    let again = stop(&other_mcp, &other, &c).await;
    assert_eq!(code(&again), "forward_not_found");
    // disconnect closes every forward of the session.
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed", "{r}");
    assert!(!listening(port(&a)) && !listening(port(&b)));
    let list = other_mcp.call("session_list", json!({})).await;
    assert_eq!(
        list["sessions"][0]["active_forwards"],
        json!(null),
        "0: {list}"
    );
    other_mcp.close().await;
    mcp.close().await;
}

#[tokio::test]
async fn public_addresses_and_busy_ports_are_refused_and_nothing_listens() {
    let (_env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let r = start(
        &mcp,
        &s,
        json!({"kind": "local", "listen_host": "0.0.0.0",
                                    "target_host": "127.0.0.1", "target_port": echo}),
    )
    .await;
    assert_eq!(code(&r), "forward_not_allowed");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-public-forwards")
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().port();
    let r = start(
        &mcp,
        &s,
        json!({"kind": "local", "listen_port": taken,
                                    "target_host": "127.0.0.1", "target_port": echo}),
    )
    .await;
    assert_eq!(code(&r), "forward_failed");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("127.0.0.1:{taken}")) && message.contains("in use"),
        "{message}"
    );
    let r = start(
        &mcp,
        &s,
        json!({"kind": "remote", "target_host": "127.0.0.1"}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "a target needs its port");
    let list = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(list["forwards"], json!([]), "no failed forward is listed");
    mcp.close().await;
}

/// An sshd that forbids forwarding refuses a remote forward: `forward_failed` in our words,
/// and the session goes on. `localhost` listens on 127.0.0.1 and says so.
#[tokio::test]
async fn a_server_that_forbids_forwarding_is_forward_failed() {
    let opts = sshmcp_tests::SshdOptions {
        tcp_forwarding: false,
        ..Default::default()
    };
    let (_env, mcp, s) = crate::connected_with(&opts, &[]).await;
    let r = start(
        &mcp,
        &s,
        json!({"kind": "remote", "target_host": "127.0.0.1", "target_port": 9}),
    )
    .await;
    assert_eq!(code(&r), "forward_failed");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("AllowTcpForwarding"), "{message}");
    assert!(
        !message.contains("remote port forwarding failed"),
        "not OpenSSH's own text"
    );
    let r = start(
        &mcp,
        &s,
        json!({"kind": "dynamic", "listen_host": "localhost"}),
    )
    .await;
    assert_eq!(r["listen_host"], "127.0.0.1", "{r}");
    assert_eq!(remote_out(&mcp, &s, "echo alive").await, "alive\n");
    mcp.close().await;
}

/// An sshd with `GatewayPorts yes` listens for a remote forward on every address, whatever
/// the client asks: the forward is closed again and refused (`forward_not_allowed`), nothing
/// is listed, and the port is free on the host.
#[tokio::test]
async fn a_remote_forward_a_server_opens_on_every_address_is_closed_and_refused() {
    let opts = sshmcp_tests::SshdOptions {
        gateway_ports: true,
        ..Default::default()
    };
    let (_env, mcp, s) = crate::connected_with(&opts, &[]).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = start(
        &mcp,
        &s,
        json!({"kind": "remote", "listen_port": port, "target_host": "127.0.0.1", "target_port": 9}),
    )
    .await;
    assert_eq!(code(&r), "forward_not_allowed", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("GatewayPorts"), "{message}");
    assert!(
        message.contains(&format!("0.0.0.0 port {port}")),
        "{message}"
    );
    let list = crate::on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(list["forwards"], json!([]), "{list}");
    // Closed on the host: nothing accepts there (the master's cancel is acted on at once,
    // before sshd answers it).
    let script = format!(
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo open || echo closed"
    );
    assert_eq!(remote_out(&mcp, &s, &script).await, "closed\n");
    mcp.close().await;
}

/// A forward's answer holds across a crash right after it: the forward it names is in the
/// record, so the next daemon lists it and can close it.
#[tokio::test]
async fn a_forward_holds_across_a_crash_right_after_its_answer() {
    let (env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let f = start_to(&mcp, &s, "local", echo).await;
    env.crash_daemon();
    let list = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(list["forwards"][0]["forward_id"], f["forward_id"], "{list}");
    let stopped = stop(&mcp, &s, &f).await;
    assert_eq!(stopped["ok"], true, "{stopped}");
    let port = f["listen_port"].as_u64().unwrap() as u16;
    assert!(!listening(port), "closed by the new daemon");
    mcp.close().await;
}

#[tokio::test]
async fn forwards_survive_a_daemon_restart_with_their_session() {
    let (env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let f = start_to(&mcp, &s, "local", echo).await;
    let port = f["listen_port"].as_u64().unwrap() as u16;
    let out = env.cli(&["daemon", "restart"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(
        list["forwards"][0],
        f.as_object()
            .map(|o| {
                let mut o = o.clone();
                o.remove("ok");
                Value::Object(o)
            })
            .unwrap(),
        "listed as it was opened"
    );
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(round_trip(stream, b"still here").await, b"still here");
    let table = String::from_utf8_lossy(&env.cli(&["sessions"]).stdout).into_owned();
    assert!(table.lines().next().unwrap().ends_with("FWDS"), "{table}");
    assert!(table.lines().nth(1).unwrap().ends_with(" 1"), "{table}");
    let stopped = stop(&mcp, &s, &f).await;
    assert_eq!(stopped["ok"], true, "{stopped}");
    assert!(!listening(port), "closed by the new daemon");
    mcp.close().await;
}

/// A stopped master (SIGSTOP) cannot take a forward: forward_start says so up front instead
/// of waiting out its control socket, and works again once the master continues.
#[tokio::test]
async fn a_stopped_master_refuses_a_forward_up_front() {
    let (_env, mcp, s) = connected().await;
    let list = mcp.call("session_list", json!({})).await;
    let master = list["sessions"][0]["master_pid"].as_u64().unwrap() as i32;
    let signal = |sig| nix::sys::signal::kill(nix::unistd::Pid::from_raw(master), sig).unwrap();
    signal(nix::sys::signal::Signal::SIGSTOP);
    // The kernel shows the stop in the process's state: wait for it.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{master}/stat"))
        .unwrap()
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    {
        assert!(std::time::Instant::now() < give_up, "the master stopped");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let r = start(&mcp, &s, json!({"kind": "dynamic"})).await;
    assert_eq!(code(&r), "internal_error");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("SIGSTOP"), "{message}");
    signal(nix::sys::signal::Signal::SIGCONT);
    let f = start(&mcp, &s, json!({"kind": "dynamic"})).await;
    assert_eq!(f["ok"], true, "{f}");
    let list = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(
        list["forwards"].as_array().unwrap().len(),
        1,
        "only the one that opened"
    );
    mcp.close().await;
}

/// The TCP ports `pids` listen on (their sockets found in /proc/net/tcp and tcp6).
fn listening_ports(pids: &[i32]) -> std::collections::BTreeSet<u16> {
    let inodes: Vec<String> = pids
        .iter()
        .flat_map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|table| {
            std::fs::read_to_string(table)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let port = u16::from_str_radix(cols.get(1)?.rsplit(':').next()?, 16).ok()?;
            let inode = cols.get(9)?;
            (cols.get(3)? == &"0A" && inodes.iter().any(|i| i == inode)).then_some(port)
        })
        .collect()
}

/// A remote forward the server answers too late (its sshd stopped past the master's exchange
/// timeout): forward_start fails, and once the server answers, the forward it opened is
/// withdrawn, with a port asked for and with one the server chose: nothing listens unlisted.
#[tokio::test]
async fn a_remote_forward_answered_too_late_is_withdrawn() {
    use nix::sys::signal::{Signal, kill};
    let (env, mcp, s) = connected().await;
    let echo = echo_server().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sshds = crate::connection_sshds(&env);
    assert!(!sshds.is_empty(), "no sshd serves the session");
    let signal = |sig| {
        for pid in &sshds {
            let _ = kill(nix::unistd::Pid::from_raw(*pid), sig);
        }
    };
    let before = listening_ports(&sshds);
    signal(Signal::SIGSTOP);
    let asked = json!({"kind": "remote", "listen_port": port, "target_host": "127.0.0.1",
                       "target_port": echo});
    let r = start(&mcp, &s, asked.clone()).await;
    let chosen = json!({"kind": "remote", "target_host": "127.0.0.1", "target_port": echo});
    let r0 = start(&mcp, &s, chosen.clone()).await;
    // The master still holds both requests and would answer one alike at once, granted or
    // not: a retry meanwhile is refused.
    for again in [&asked, &chosen] {
        let r = start(&mcp, &s, again.clone()).await;
        assert_eq!(code(&r), "forward_failed", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("still waits"),
            "{r}"
        );
    }
    signal(Signal::SIGCONT);
    assert_eq!(
        (code(&r), code(&r0)),
        ("forward_failed", "forward_failed"),
        "{r} {r0}"
    );
    let withdrawn = "opened after its request timed out was withdrawn: Ok(())";
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while env.daemon_log().matches(withdrawn).count() < 2 {
        assert!(std::time::Instant::now() < give_up, "{}", env.daemon_log());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The master answers a close before the server acted on it.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while listening_ports(&sshds) != before {
        assert!(
            std::time::Instant::now() < give_up,
            "the host still listens: {:?} against {before:?} before",
            listening_ports(&sshds)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!listening(port), "the asked port still listens on the host");
    let list = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(list["forwards"], json!([]), "{list}");
    // Once withdrawn, the same start works and carries connections.
    let f = start(&mcp, &s, asked).await;
    assert_eq!(f["listen_port"], port, "{f}");
    let script =
        format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; printf ping >&3; head -c 4 <&3'");
    assert_eq!(remote_out(&mcp, &s, &script).await, "ping");
    mcp.close().await;
}
