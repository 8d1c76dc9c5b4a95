//! The `self` method: messages a context sends to itself.
//!
//! The smallest complete method, and the template for new ones. A send copies
//! the message into a queue; `poll` hands queued messages to the sink. Copying
//! is needed because the sender may reuse its buffer as soon as `send`
//! returns while delivery happens later, in progress, possibly on another thread.

use super::{iov_len, Cost, JobInfo, Link, Method, MethodEnv, MethodInfo, PollClass, Sink, Waiter};
use crate::error::Result;
use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const INFO: MethodInfo = MethodInfo {
    name: "self",
    summary: "messages to the same context (an in-process queue)",
    params: &[],
    init,
};

fn init(env: &MethodEnv) -> Result<Option<Arc<dyn Method>>> {
    Ok(Some(Arc::new(SelfMethod::new(env.job))))
}

/// The queue shared by the method (consumer) and its one link (producer).
struct Queue {
    msgs: Mutex<VecDeque<Vec<u8>>>,
    /// Messages queued; lets an idle poll return without taking the lock.
    len: AtomicUsize,
}

pub struct SelfMethod {
    ctx_id: u32,
    /// The job this context belongs to, so the descriptor only matches ourselves.
    job_id: String,
    queue: Arc<Queue>,
}

impl SelfMethod {
    fn new(job: &JobInfo) -> Self {
        SelfMethod {
            ctx_id: job.ctx_id,
            job_id: job.job_id.clone(),
            queue: Arc::new(Queue {
                msgs: Mutex::new(VecDeque::new()),
                len: AtomicUsize::new(0),
            }),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut d = self.ctx_id.to_le_bytes().to_vec();
        d.extend_from_slice(self.job_id.as_bytes());
        d
    }
}

struct SelfLink {
    queue: Arc<Queue>,
}

impl Link for SelfLink {
    fn method(&self) -> &'static str {
        "self"
    }

    fn send(&self, iov: &[IoSlice<'_>], _waiter: &dyn Waiter) -> Result<()> {
        let mut msg = Vec::with_capacity(iov_len(iov));
        for s in iov {
            msg.extend_from_slice(s);
        }
        let mut q = self.queue.msgs.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(msg);
        // Counted under the lock, so `len` never runs behind the queue.
        self.queue.len.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

impl Method for SelfMethod {
    fn name(&self) -> &'static str {
        "self"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.encode()
    }

    fn describe(&self, d: &[u8]) -> String {
        match d.get(..4) {
            Some(b) => format!(
                "context {} of job {}",
                u32::from_le_bytes(b.try_into().unwrap_or([0; 4])),
                String::from_utf8_lossy(&d[4..])
            ),
            None => "malformed".into(),
        }
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        remote == self.encode().as_slice()
    }

    fn connect(&self, _peer: u32, _remote: &[u8]) -> Result<Arc<dyn Link>> {
        Ok(Arc::new(SelfLink {
            queue: self.queue.clone(),
        }))
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        if self.queue.len.load(Ordering::Acquire) == 0 {
            return Ok(0);
        }
        let mut n = 0;
        // Take one message at a time and release the lock before delivering:
        // the handler may send to ourselves again.
        loop {
            let msg = {
                let mut q = self.queue.msgs.lock().unwrap_or_else(|e| e.into_inner());
                let m = q.pop_front();
                if m.is_some() {
                    self.queue.len.fetch_sub(1, Ordering::Relaxed);
                }
                m
            };
            match msg {
                Some(m) => {
                    sink.deliver(self.ctx_id, &m);
                    n += 1;
                }
                None => return Ok(n),
            }
        }
    }

    fn poll_class(&self) -> PollClass {
        PollClass::EveryIteration
    }

    fn has_pending_output(&self) -> bool {
        self.queue.len.load(Ordering::Acquire) != 0
    }

    fn cost(&self) -> Cost {
        Cost {
            latency_ns: 50,
            bandwidth_mb_s: 10_000,
        }
    }

    fn shutdown(&self) {
        self.queue
            .msgs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.queue.len.store(0, Ordering::Release);
    }
}
