//! A throwaway OpenSSH server on 127.0.0.1 (or inside a network namespace of the test's): its
//! own host key, client key, known_hosts and an ssh_config with aliases, all inside one temp
//! directory, stopped on drop.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const SSHD: &str = "/usr/sbin/sshd";

#[derive(Debug, Clone)]
pub struct SshdOptions {
    /// sshd's MaxSessions (channels per connection); OpenSSH's default is 10.
    pub max_sessions: u32,
    /// Run sshd inside this network namespace, listening on `netns::SERVER_ADDR`.
    pub netns: Option<String>,
    /// Ports beyond the first, each a server identity of its own (loopback only).
    pub extra_ports: usize,
    /// Run sshd (and so every session) in a private mount namespace where `sudo` is covered
    /// by `/dev/null`: a host without sudo. Root only.
    pub without_sudo: bool,
    /// sshd's AllowTcpForwarding: off, it refuses every port forward.
    pub tcp_forwarding: bool,
    /// sshd's GatewayPorts yes: a remote forward listens on every address, whatever the
    /// client asked.
    pub gateway_ports: bool,
    /// sshd's LogLevel: VERBOSE by default; DEBUG1 also logs each connection's cipher.
    pub log_level: &'static str,
    /// Chroot `users::BUSYBOX_USER`'s sessions into `users::BUSYBOX_ROOT` (a host with only
    /// BusyBox), with `/proc` mounted there in sshd's own mount namespace. Root only.
    pub busybox: bool,
}

impl Default for SshdOptions {
    fn default() -> Self {
        Self {
            max_sessions: 10,
            netns: None,
            extra_ports: 0,
            without_sudo: false,
            tcp_forwarding: true,
            gateway_ports: false,
            log_level: "VERBOSE",
            busybox: false,
        }
    }
}

impl SshdOptions {
    /// The defaults, with `MaxSessions` at `max_sessions`.
    pub fn allowing_sessions(max_sessions: u32) -> Self {
        Self {
            max_sessions,
            ..Self::default()
        }
    }
}

pub struct Sshd {
    pub dir: PathBuf,
    /// Where it listens: 127.0.0.1, or the server address of its network namespace.
    pub addr: String,
    pub port: u16,
    /// Every port it listens on, `port` first.
    pub ports: Vec<u16>,
    /// The remote login user of the `testbed` alias.
    pub user: String,
    pub client_key: PathBuf,
    pub known_hosts: PathBuf,
    pub ssh_config: PathBuf,
    pub log: PathBuf,
    /// One sshd per [`PORTS_PER_SSHD`] ports.
    children: Vec<Child>,
}

/// sshd listens on at most 16 sockets (its MAX_LISTEN_SOCKS): more identities take more
/// sshd processes, sharing keys, users and log.
const PORTS_PER_SSHD: usize = 16;

impl Sshd {
    /// Starts sshd in `dir`. Panics (loudly, never skipping) when sshd is not installed.
    pub fn start(dir: &Path, opts: &SshdOptions) -> Self {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: these tests need a real sshd (apt-get install -y openssh-server)"
        );
        if nix::unistd::geteuid().is_root() {
            std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        }
        std::fs::create_dir_all(dir).expect("sshd dir");
        // sshd reads authorized_keys as the target user: the path must be traversable.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let user = crate::users::test_user();
        let host_key = dir.join("host_key");
        let client_key = dir.join("client_key");
        keygen(&host_key, "");
        keygen(&client_key, "");
        let authorized = dir.join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).expect("authorized_keys");
        std::fs::set_permissions(&authorized, std::fs::Permissions::from_mode(0o644)).unwrap();
        let log = dir.join("sshd.log");
        let addr = match &opts.netns {
            Some(_) => crate::netns::SERVER_ADDR.to_string(),
            None => "127.0.0.1".to_string(),
        };
        for _attempt in 0..5 {
            // A fresh namespace has every port free.
            let ports = if opts.netns.is_some() {
                vec![2222]
            } else {
                free_ports(1 + opts.extra_ports)
            };
            let port = ports[0];
            let netns = opts.netns.as_deref();
            let mut children = Vec::new();
            for (n, chunk) in ports.chunks(PORTS_PER_SSHD).enumerate() {
                let config = dir.join(format!("sshd_config.{n}"));
                let text = sshd_config(dir, n, &addr, chunk, opts);
                std::fs::write(&config, text).expect("sshd_config");
                match spawn_until_listening(&config, &log, netns, opts, chunk.len()) {
                    Some(child) => children.push(child),
                    None => break,
                }
            }
            if children.len() < ports.len().div_ceil(PORTS_PER_SSHD) {
                for mut child in children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                continue;
            }
            {
                let known_hosts = dir.join("known_hosts");
                let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
                let host_pub: Vec<&str> = host_pub.split_whitespace().take(2).collect();
                let line = host_pub.join(" ");
                let known: String = ports
                    .iter()
                    .map(|p| format!("[{addr}]:{p} {line}\n[localhost]:{p} {line}\n"))
                    .collect();
                std::fs::write(&known_hosts, known).unwrap();
                let ssh_config = dir.join("ssh_config");
                let sshd = Self {
                    dir: dir.into(),
                    addr,
                    port,
                    ports,
                    user,
                    client_key,
                    known_hosts,
                    ssh_config,
                    log,
                    children,
                };
                std::fs::write(&sshd.ssh_config, sshd.client_config()).unwrap();
                return sshd;
            }
        }
        panic!(
            "sshd did not start; its log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// The client configuration: alias `testbed` for the test user, and defaults every host
    /// of this server shares (key, known_hosts, batch mode).
    fn client_config(&self) -> String {
        format!(
            "Host testbed\n  HostName {addr}\n  Port {port}\n  User {user}\n\n\
             Host * !locked*\n  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {kh}\n  \
             StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n",
            addr = self.addr,
            port = self.port,
            user = self.user,
            key = self.client_key.display(),
            kh = self.known_hosts.display(),
        )
    }

    /// Lists this server's host key in known_hosts under `name` too (OpenSSH looks a host up
    /// by the name it was given, so another spelling of the address is a host it does not
    /// know yet).
    pub fn trust_host_name(&self, name: &str) {
        let known = std::fs::read_to_string(&self.known_hosts).unwrap();
        let line = known
            .lines()
            .next()
            .and_then(|l| l.split_once(' '))
            .map(|(_, key)| key.to_string())
            .expect("a known_hosts line");
        let added: String = self
            .ports
            .iter()
            .map(|p| format!("[{name}]:{p} {line}\n"))
            .collect();
        std::fs::write(&self.known_hosts, known + &added).unwrap();
    }

    /// The fingerprint of this server's host key, as `ssh-keygen -l` shows it (`SHA256:…`).
    pub fn host_key_fingerprint(&self) -> String {
        let out = Command::new("ssh-keygen")
            .args(["-l", "-E", "sha256", "-f"])
            .arg(self.dir.join("host_key.pub"))
            .output()
            .expect("run ssh-keygen");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .nth(1)
            .expect("a fingerprint")
            .to_string()
    }

    /// Puts `block` (a `Host ...` section) before the shared defaults, so it wins.
    pub fn add_host_block(&self, block: &str) {
        let config = std::fs::read_to_string(&self.ssh_config).unwrap();
        std::fs::write(&self.ssh_config, format!("{block}\n\n{config}")).unwrap();
    }

    /// Creates a client key protected by `passphrase`, authorized on this server.
    pub fn authorize_new_key(&self, name: &str, passphrase: &str) -> PathBuf {
        let path = self.dir.join(name);
        keygen(&path, passphrase);
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        let authorized = self.dir.join("authorized_keys");
        let mut keys = std::fs::read_to_string(&authorized).unwrap();
        keys.push_str(&public);
        std::fs::write(&authorized, keys).unwrap();
        path
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many SSH connections authenticated so far.
    pub fn accepted_connections(&self) -> usize {
        self.log_text().matches("Accepted publickey").count()
    }

    /// The listening sshd processes, whose children serve every connection: what a benchmark
    /// pins to a CPU of its own.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn keygen(path: &Path, passphrase: &str) {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args([
        "-q",
        "-t",
        "ed25519",
        "-C",
        "sshmcp-test",
        "-N",
        passphrase,
        "-f",
    ])
    .arg(path);
    crate::process::run(&mut cmd, "apt-get install -y openssh-client");
}

/// `n` distinct free ports (each held until all are chosen).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("free port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("port").port())
        .collect()
}

/// sshd's config. Client-alive probes end a connection whose client vanished without closing
/// it (a network namespace deleted under it) within 30 s, so no test leaves sessions behind.
fn sshd_config(dir: &Path, n: usize, addr: &str, ports: &[u16], opts: &SshdOptions) -> String {
    let ports: String = ports.iter().map(|p| format!("Port {p}\n")).collect();
    format!(
        "{ports}ListenAddress {addr}\nHostKey {d}/host_key\nPidFile {d}/sshd.{n}.pid\n\
         AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nMaxSessions {max}\n\
         MaxStartups 100:30:200\nLogLevel {level}\nClientAliveInterval 15\nClientAliveCountMax 2\n\
         AllowTcpForwarding {forwarding}\nGatewayPorts {gateway}\n{chroot}",
        d = dir.display(),
        max = opts.max_sessions,
        level = opts.log_level,
        forwarding = if opts.tcp_forwarding { "yes" } else { "no" },
        gateway = if opts.gateway_ports { "yes" } else { "no" },
        chroot = match opts.busybox {
            true => format!(
                "Match User {}\n  ChrootDirectory {}\n",
                crate::users::BUSYBOX_USER,
                crate::users::BUSYBOX_ROOT
            ),
            false => String::new(),
        },
    )
}

/// Spawns sshd and waits for its `listeners` "Server listening" lines; copies its log to `log`
/// from then on. None when it exited first (typically: a port was taken meanwhile).
fn spawn_until_listening(
    config: &Path,
    log: &Path,
    netns: Option<&str>,
    opts: &SshdOptions,
    listeners: usize,
) -> Option<Child> {
    let mut argv: Vec<String> = netns
        .map(crate::netns::NetnsPair::exec_in)
        .unwrap_or_default();
    // What sshd's own mount namespace changes: gone with it, nothing to undo.
    let mut mounts = Vec::new();
    if opts.without_sudo {
        // A file that is not executable stands where sudo was: `command -v sudo` finds none.
        mounts.push("mount --bind /dev/null \"$(command -v sudo)\"".to_string());
    }
    if opts.busybox {
        // The root a mount of its own, as a host's `/` is (`df` finds it in /proc/mounts).
        let root = crate::users::BUSYBOX_ROOT;
        mounts.push(format!(
            "mount --bind {root} {root} && mount -t proc proc {root}/proc"
        ));
    }
    if !mounts.is_empty() {
        let script = format!("{} && exec \"$@\"", mounts.join(" && "));
        for word in ["unshare", "-m", "--propagation", "private", "sh", "-c"] {
            argv.push(word.into());
        }
        argv.push(script);
        argv.push("sh".into());
    }
    argv.push(SSHD.into());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .args(["-D", "-e", "-f"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sshd");
    let stderr = child.stderr.take().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut listening = 0;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(file, "{line}");
            if line.contains("Server listening on") {
                listening += 1;
                if listening == listeners {
                    let _ = ready_tx.send(());
                }
            }
        }
    });
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => Some(child),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}
