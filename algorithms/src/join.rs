//! Running several futures of one call at once under the caller's executor
//! (concurrent reservations, a request server beside the main work), with
//! no executor of our own: everything stays on the transport's clock.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::Result;

/// Every future's output, in order; fails with the first error met (the
/// rest are dropped).
pub(crate) async fn join_all<R, F: Future<Output = Result<R>>>(
    futures: impl IntoIterator<Item = F>,
) -> Result<Vec<R>> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut done: Vec<Option<R>> = pending.iter().map(|_| None).collect();
    let mut left = pending.len();
    std::future::poll_fn(|cx| {
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            let Some(future) = slot else { continue };
            if let Poll::Ready(result) = future.as_mut().poll(cx) {
                *slot = None;
                left -= 1;
                match result {
                    Ok(value) => *out = Some(value),
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        if left == 0 {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
    .await?;
    Ok(done
        .into_iter()
        .map(|v| v.expect("every future finished"))
        .collect())
}

/// `main`'s output, polling `beside` as long as `main` runs (a server that
/// answers peers until the call is done); an error of `beside` ends both.
pub(crate) async fn while_serving<R>(
    main: impl Future<Output = Result<R>>,
    beside: impl Future<Output = Result<()>>,
) -> Result<R> {
    let (mut main, mut beside) = (std::pin::pin!(main), std::pin::pin!(beside));
    let mut serving = true;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(result) = main.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        if serving {
            match beside.as_mut().poll(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => serving = false,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

/// Both outputs, polling both futures until each is done; fails with the
/// first error met.
pub(crate) async fn join<A, B>(
    a: impl Future<Output = Result<A>>,
    b: impl Future<Output = Result<B>>,
) -> Result<(A, B)> {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut got_a, mut got_b) = (None, None);
    std::future::poll_fn(|cx| {
        if got_a.is_none() {
            if let Poll::Ready(result) = a.as_mut().poll(cx) {
                match result {
                    Ok(value) => got_a = Some(value),
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        if got_b.is_none() {
            if let Poll::Ready(result) = b.as_mut().poll(cx) {
                match result {
                    Ok(value) => got_b = Some(value),
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        match (got_a.is_some(), got_b.is_some()) {
            (true, true) => Poll::Ready(Ok(())),
            _ => Poll::Pending,
        }
    })
    .await?;
    Ok((got_a.expect("done"), got_b.expect("done")))
}
