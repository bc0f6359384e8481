// Streaming calls that end when their reader leaves. connect (2.x) gives a server stream no
// `return`: a `break` out of `for await` leaves the call open with its deadline timer, which
// keeps the node process alive until the deadline (minutes). A stream read through `streamed`
// is made with a signal of its own, aborted when the reader leaves (or the caller's signal
// aborts), and read once more, so that connect sees the abort and clears its timer.

/** A signal for one call, aborted by `stop` or when `outer` aborts. */
function callSignal(outer?: AbortSignal): { signal: AbortSignal; stop: () => void } {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(outer?.reason);
  if (outer?.aborted) {
    controller.abort(outer.reason);
  } else {
    outer?.addEventListener("abort", onAbort, { once: true });
  }
  return {
    signal: controller.signal,
    stop: () => {
      outer?.removeEventListener("abort", onAbort);
      controller.abort();
    },
  };
}

/** The messages of the streaming call `open` makes with the signal it is given; the call is
 * ended however the reading ends (the stream's end, an error, a `break`). A reader that
 * leaves before the end (at a terminal record, which its server follows with its end at once)
 * gives that end `lingerMs` to come by itself before the call is aborted: its trailers say who
 * answered (onAnswer). */
export async function* streamed<M>(
  open: (signal: AbortSignal) => AsyncIterable<M>,
  outer?: AbortSignal,
  lingerMs = 0,
): AsyncGenerator<M, void, undefined> {
  const call = callSignal(outer);
  const messages = open(call.signal)[Symbol.asyncIterator]();
  let reading = true; // false once the stream ended or failed by itself
  try {
    for (;;) {
      let next: IteratorResult<M>;
      try {
        next = await messages.next();
      } catch (err) {
        reading = false;
        throw err;
      }
      if (next.done) {
        reading = false;
        return;
      }
      yield next.value;
    }
  } finally {
    if (reading && lingerMs > 0) {
      await settledWithin(messages.next(), lingerMs);
    }
    call.stop();
    // Ended or failed already: answered at once. Left early: rejected (aborted), which is
    // where connect clears the call's deadline timer.
    messages.next().then(undefined, () => undefined);
  }
}

/** Waits for `promise` to settle, at most `ms`. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const elapsed = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([promise.then(undefined, () => undefined), elapsed]);
  clearTimeout(timer);
}
