//! Accepting clients on the Unix socket: refuse other users, serve each connection's requests
//! concurrently, abort a connection's in-flight work the moment that client goes away, and on
//! the daemon's way out answer the calls still in flight before letting go.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Sink, Stream, StreamExt};
use pin_project_lite::pin_project;
use sshmcp_proto::service::{Codec, Daemon as _, framed};
use tarpc::server::{BaseChannel, Channel};
use tokio::net::UnixListener;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::service::DaemonService;

/// How the daemon lets its clients go: `stop` ends accepting and reading requests, while the
/// calls in flight run on and are answered; `abort` drops those still running.
#[derive(Clone, Default)]
pub struct Ending {
    pub stop: CancellationToken,
    pub abort: CancellationToken,
}

/// Serves `listener` until `ending.stop` fires, counting connected clients in `clients`: a
/// connection counts until its last answer is written (or it is aborted).
pub async fn serve(
    listener: UnixListener,
    service: DaemonService,
    ending: Ending,
    clients: tokio::sync::watch::Sender<usize>,
) {
    let my_uid = nix::unistd::geteuid().as_raw();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
            _ = ending.stop.cancelled() => return,
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == my_uid => {}
            Ok(cred) => {
                tracing::warn!(uid = cred.uid(), "refusing a client of another user");
                continue;
            }
            Err(e) => {
                tracing::warn!("cannot read peer credentials: {e}");
                continue;
            }
        }
        let client = ClientCount::new(&clients);
        let connection = serve_connection(stream, service.for_connection(), ending.clone());
        tokio::spawn(async move {
            connection.await;
            drop(client);
        });
    }
}

/// Runs every request of one client in its own task; when the client disconnects (or the
/// daemon aborts), aborts what is still running so remote commands get killed. When the
/// daemon stops, it reads no more requests but answers those in flight (the stop's teardown
/// ends them: a command whose session closes is stopped and says so), then lets go.
async fn serve_connection(stream: tokio::net::UnixStream, service: DaemonService, ending: Ending) {
    let closed = CancellationToken::new();
    let transport = NotifyOnClose {
        inner: tarpc::serde_transport::new(framed(stream), Codec::default()),
        closed: closed.clone(),
        stop: ending.stop.clone().cancelled_owned(),
    };
    let mut requests =
        std::pin::pin!(BaseChannel::with_defaults(transport).execute(service.serve()));
    let mut inflight = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            next = requests.next() => match next {
                Some(request) => { inflight.spawn(request); }
                None => break,
            },
            Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
            _ = closed.cancelled() => break,
            _ = ending.abort.cancelled() => break,
        }
    }
    // Until every aborted call is dropped (a connect's reservation undone with it), the
    // connection counts: the stop seals its record only after.
    inflight.shutdown().await;
}

/// One connected client, counted while it lives (the idle policy reads the count).
struct ClientCount(tokio::sync::watch::Sender<usize>);

impl ClientCount {
    fn new(clients: &tokio::sync::watch::Sender<usize>) -> Self {
        clients.send_modify(|n| *n += 1);
        Self(clients.clone())
    }
}

impl Drop for ClientCount {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

pin_project! {
    /// A transport that fires `closed` when its read side ends: tarpc's own request stream
    /// only ends once every in-flight response is done, too late to cancel them. Once `stop`
    /// fires, it reads as ended without firing `closed`: tarpc then writes the answers of the
    /// calls in flight and ends the stream after the last.
    struct NotifyOnClose<T> {
        #[pin]
        inner: T,
        closed: CancellationToken,
        #[pin]
        stop: WaitForCancellationFutureOwned,
    }
}

impl<T, I, E> Stream for NotifyOnClose<T>
where
    T: Stream<Item = Result<I, E>>,
{
    type Item = Result<I, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if this.stop.poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        let polled = this.inner.poll_next(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.closed.cancel();
        }
        polled
    }
}

impl<T, Item> Sink<Item> for NotifyOnClose<T>
where
    T: Sink<Item>,
{
    type Error = T::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.project().inner.poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Item) -> Result<(), Self::Error> {
        self.project().inner.start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.project().inner.poll_close(cx)
    }
}
