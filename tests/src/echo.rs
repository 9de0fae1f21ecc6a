//! A TCP echo server on 127.0.0.1 for forward tests and figures: this machine is also the
//! remote host, so one server here is the target of both ends.

use tokio::net::TcpListener;

/// Starts the server on a free port and returns the port; every connection gets back what it
/// sends, until the test's runtime ends.
pub async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}
