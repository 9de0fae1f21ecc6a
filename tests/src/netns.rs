//! Two network namespaces joined by a veth pair, for tests of what crosses a network (a link
//! going down). Both ends live in namespaces this test creates, so no packet can leave the
//! machine. Root only.

use std::process::Command;

/// The server side's address inside its namespace.
pub const SERVER_ADDR: &str = "10.231.0.1";
const CLIENT_ADDR: &str = "10.231.0.2";
const BLACK_HOLE_ADDR: &str = "10.231.0.9";

pub struct NetnsPair {
    pub server_ns: String,
    pub client_ns: String,
    client_link: String,
}

impl NetnsPair {
    /// Creates the pair, named after this test process so parallel tests never share one.
    pub fn create() -> Self {
        assert!(
            nix::unistd::geteuid().is_root(),
            "network namespaces need root"
        );
        // Unique per pair: tests run as threads of one process under `cargo test`.
        static PAIRS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = PAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{}{n}", std::process::id() % 100_000);
        let pair = Self {
            server_ns: format!("smcs{id}"),
            client_ns: format!("smcc{id}"),
            client_link: format!("smv{id}c"),
        };
        let server_link = format!("smv{id}s");
        ip(&["netns", "add", &pair.server_ns]);
        ip(&["netns", "add", &pair.client_ns]);
        ip(&[
            "link",
            "add",
            &server_link,
            "type",
            "veth",
            "peer",
            "name",
            &pair.client_link,
        ]);
        ip(&["link", "set", &server_link, "netns", &pair.server_ns]);
        ip(&["link", "set", &pair.client_link, "netns", &pair.client_ns]);
        for (ns, link, addr) in [
            (&pair.server_ns, &server_link, SERVER_ADDR),
            (&pair.client_ns, &pair.client_link, CLIENT_ADDR),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", link]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", link, "up"]);
        }
        pair
    }

    /// An address on the link that swallows every packet the client namespace sends it: its
    /// neighbour entry names a hardware address nobody owns, so the server's end drops the
    /// frames and a TCP connect hangs until its own timeout. Nothing leaves the namespaces.
    pub fn black_hole(&self) -> &'static str {
        ip(&[
            "-n",
            &self.client_ns,
            "neigh",
            "replace",
            BLACK_HOLE_ADDR,
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            &self.client_link,
            "nud",
            "permanent",
        ]);
        BLACK_HOLE_ADDR
    }

    /// Takes the client's end of the link down (or up again).
    pub fn set_link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        ip(&[
            "-n",
            &self.client_ns,
            "link",
            "set",
            &self.client_link,
            state,
        ]);
    }

    /// The argv prefix that runs a program inside `ns`.
    pub fn exec_in(ns: &str) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), ns.into()]
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the peer.
        for ns in [&self.client_ns, &self.server_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) {
    crate::process::run(Command::new("ip").args(args), "apt-get install -y iproute2");
}
