//! The proxy's event loop: its parent's channel, its children's
//! channels (a site leader), fences, heartbeats, and the end of the job.

use super::*;

impl Proxy {
    pub(super) fn event_loop(&mut self, sigfd: RawFd) {
        let mut buf = vec![0u8; 64 * 1024];
        let ping_every = self.heartbeat / 4;
        loop {
            let now = Instant::now();
            if self.all_finished() {
                break;
            }
            // fds: 0 signals, then up read, up write, children r/w, PMI, streams.
            let mut fds: Vec<libc::pollfd> = Vec::new();
            let mut what: Vec<Slot> = Vec::new();
            let mut add = |fd: Option<RawFd>, ev: i16, s: Slot, fds: &mut Vec<libc::pollfd>| {
                if let Some(fd) = fd {
                    fds.push(libc::pollfd {
                        fd,
                        events: ev,
                        revents: 0,
                    });
                    what.push(s);
                }
            };
            add(Some(sigfd), libc::POLLIN, Slot::Signals, &mut fds);
            if self.orphaned.is_none() {
                add(self.up.read_fd(), libc::POLLIN, Slot::UpRead, &mut fds);
                if self.up.wants_write() {
                    add(self.up.write_fd(), libc::POLLOUT, Slot::UpWrite, &mut fds);
                }
            }
            if !self.stdin.pending.is_empty() {
                add(
                    self.stdin.pipe.as_ref().map(|f| f.as_raw_fd()),
                    libc::POLLOUT,
                    Slot::StdinWrite,
                    &mut fds,
                );
            }
            let up_full = self.up.queued() > HIGH_WATER;
            for (i, c) in self.children.iter().enumerate() {
                if !up_full {
                    add(
                        c.channel.read_fd(),
                        libc::POLLIN,
                        Slot::ChildRead(i),
                        &mut fds,
                    );
                }
                if c.channel.wants_write() {
                    add(
                        c.channel.write_fd(),
                        libc::POLLOUT,
                        Slot::ChildWrite(i),
                        &mut fds,
                    );
                }
            }
            for (i, r) in self.ranks.iter().enumerate() {
                if let Some(fd) = &r.pmi {
                    let mut ev = if r.pmi_out.len() < MAX_QUEUED_REPLY {
                        libc::POLLIN
                    } else {
                        0
                    };
                    if !r.pmi_out.is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    add(Some(fd.as_raw_fd()), ev, Slot::Pmi(i), &mut fds);
                }
                if !up_full {
                    for (k, s) in r.streams.iter().enumerate() {
                        add(
                            s.0.as_ref().map(|f| f.as_raw_fd()),
                            libc::POLLIN,
                            Slot::Stream(i, k),
                            &mut fds,
                        );
                    }
                }
            }
            let mut wait = ping_every.min(Duration::from_millis(250));
            if let Some(t) = self.term_sent.filter(|_| !self.kill_sent) {
                wait = wait.min((t + KILL_GRACE).saturating_duration_since(now));
            }
            let _ = sys::poll(&mut fds, wait.as_millis() as i32 + 1);

            for (pfd, slot) in fds.iter().zip(what) {
                if pfd.revents == 0 {
                    continue;
                }
                match slot {
                    Slot::Signals => {
                        for sig in sys::read_signals(sigfd) {
                            if sig != libc::SIGCHLD {
                                // A signal to the proxy itself (ssh hang-up,
                                // an operator): end this host's part.
                                self.orphan(format!("received {}", sys::signal_name(sig)));
                            }
                        }
                    }
                    Slot::UpRead => {
                        self.up.read_some(&mut buf);
                        self.handle_up();
                    }
                    Slot::UpWrite => self.up.flush(),
                    Slot::ChildRead(i) => {
                        self.children[i].channel.read_some(&mut buf);
                        let image = self.image.clone();
                        self.children[i].after_read(&image);
                        self.handle_child(i);
                    }
                    Slot::ChildWrite(i) => {
                        self.children[i].channel.flush();
                        // Room again: the rest of a staged file.
                        self.serve_children_files();
                    }
                    Slot::Pmi(i) => {
                        if pfd.revents & libc::POLLOUT != 0 {
                            self.flush_pmi(i);
                        }
                        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                            self.read_pmi(i, &mut buf);
                        }
                    }
                    Slot::Stream(i, k) => self.read_stream(i, k, &mut buf),
                    Slot::StdinWrite => self.write_stdin(),
                }
            }
            self.reap();
            self.check_children();
            let now = Instant::now();
            if self.orphaned.is_none() {
                if let Some(why) = self.up.broken.clone() {
                    self.orphan(why);
                } else if self.up.silent_for(now) > self.heartbeat {
                    self.orphan(format!(
                        "no word for {} s (GW_HEARTBEAT_TIMEOUT)",
                        self.heartbeat.as_secs()
                    ));
                } else {
                    self.up.keep_alive(now, ping_every);
                }
            }
            for c in &mut self.children {
                if !c.finished() {
                    c.channel.keep_alive(now, ping_every);
                }
            }
            if let Some(t) = self.term_sent {
                if !self.kill_sent && now.duration_since(t) >= KILL_GRACE {
                    self.signal_ranks(libc::SIGKILL);
                    for c in &mut self.children {
                        c.channel.send_msg(Msg::Kill {
                            signal: libc::SIGKILL,
                        });
                    }
                }
            }
        }
    }

    /// Frames from the parent.
    pub(super) fn handle_up(&mut self) {
        loop {
            let f = match self.up.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    self.orphan(format!("protocol error: {e}"));
                    return;
                }
            };
            match f {
                Frame::Msg(Msg::Ping) => {}
                Frame::Msg(Msg::Kill { signal }) => {
                    let sig = if signal == libc::SIGKILL || self.term_sent.is_some() {
                        libc::SIGKILL
                    } else if matches!(
                        signal,
                        libc::SIGINT
                            | libc::SIGTERM
                            | libc::SIGHUP
                            | libc::SIGQUIT
                            | libc::SIGUSR1
                            | libc::SIGUSR2
                    ) {
                        signal
                    } else {
                        libc::SIGTERM
                    };
                    self.kill(sig);
                }
                Frame::Msg(Msg::Kvs {
                    epoch,
                    pairs,
                    world,
                }) if world != 0 => self.complete_world_fence(world, epoch, pairs),
                Frame::Msg(Msg::World(w)) => self.add_spawned_world(*w),
                Frame::Msg(Msg::WorldFailed { world, msg }) => {
                    self.spawned_world_failed(world, msg)
                }
                Frame::Msg(Msg::WorldReady { world }) => self.spawned_world_ready(world),
                Frame::Msg(Msg::SpawnRefused { rank, msg }) => self.spawn_refused(rank, msg),
                Frame::Msg(Msg::Kvs { epoch, pairs, .. }) => {
                    if epoch != self.epoch || self.fences_locally() {
                        self.orphan(format!(
                            "fence {epoch} answered during fence {}",
                            self.epoch
                        ));
                        return;
                    }
                    self.complete_fence(epoch, pairs);
                }
                Frame::FileData { hash, data } => {
                    // For us and our children: the leader keeps every
                    // staged file in its cache and serves its hosts.
                    if let Err(e) = self.stage.receive(&hash, &data) {
                        self.up.send_msg(Msg::Trouble {
                            host: self.hello.host,
                            msg: e,
                            code: 1,
                        });
                        self.kill(libc::SIGTERM);
                        return;
                    }
                    self.serve_children_files();
                    self.stage_or_start();
                }
                Frame::Stdin(data) => {
                    if let Some(c) = self.child_with_rank0() {
                        self.children[c].channel.send(&Frame::Stdin(data));
                    } else if self.stdin.pending.len().saturating_add(data.len()) > STDIN_LIMIT {
                        // The front end keeps within its credit: more is a
                        // protocol error.
                        self.orphan("more stdin than the credit allows".into());
                        return;
                    } else {
                        self.stdin.pending.extend_from_slice(&data);
                        self.write_stdin();
                    }
                }
                Frame::Msg(Msg::StdinEof) => {
                    if let Some(c) = self.child_with_rank0() {
                        self.children[c].channel.send_msg(Msg::StdinEof);
                    } else {
                        self.stdin.eof = true;
                        self.write_stdin();
                    }
                }
                Frame::Msg(other) => {
                    self.orphan(format!("unexpected message from the parent: {other:?}"));
                    return;
                }
                Frame::Output { .. } => {
                    self.orphan("unexpected output frame from the parent".into());
                    return;
                }
            }
        }
    }

    /// Frames from child proxy `i`: passed up, except what the leader
    /// answers itself (Ready, Need, Fence, Ping).
    pub(super) fn handle_child(&mut self, i: usize) {
        loop {
            let f = match self.children[i].channel.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    self.children[i].lose(format!("protocol error: {e}"));
                    return;
                }
            };
            let child_host = self.children[i].host;
            match f {
                Frame::Msg(Msg::Ping) => {}
                Frame::Msg(Msg::Ready { version, .. }) => {
                    if version != VERSION {
                        self.children[i]
                            .lose(format!("speaks protocol version {version}, we {VERSION}"));
                        return;
                    }
                    self.children[i].ready = true;
                }
                Frame::Msg(Msg::Need { hashes, .. }) => {
                    self.stage.child_needs(i, hashes);
                    let mine = self.stage.take_requests();
                    if !mine.is_empty() {
                        self.up.send_msg(Msg::Need {
                            host: self.hello.host,
                            hashes: mine,
                        });
                    }
                    self.serve_children_files();
                }
                Frame::Msg(Msg::Fence {
                    epoch,
                    ranks,
                    pairs,
                    local: false,
                    world,
                }) if world != 0 => self.child_world_fence(i, world, epoch, ranks, pairs),
                Frame::Msg(Msg::Fence {
                    epoch,
                    ranks,
                    pairs,
                    local,
                    ..
                }) => {
                    // Only a site's leader completes fences itself.
                    if epoch != self.epoch || local {
                        self.children[i].lose(format!("fence {epoch} during fence {}", self.epoch));
                        return;
                    }
                    self.below_fence.0 += ranks;
                    self.below_fence.1.extend(pairs);
                    self.maybe_fence_up();
                }
                Frame::Msg(Msg::Done { host, stats }) => {
                    if host == child_host {
                        self.children[i].done = true;
                    }
                    self.up.send_msg(Msg::Done { host, stats });
                }
                Frame::Msg(
                    m @ (Msg::Started { .. }
                    | Msg::Exit { .. }
                    | Msg::Abort { .. }
                    | Msg::Trouble { .. }
                    | Msg::SpawnRequest { .. }
                    | Msg::WorldTrouble { .. }
                    | Msg::WorldKnown { .. }
                    | Msg::StdinAck { .. }),
                ) => self.up.send_msg(m),
                Frame::Output { .. } => self.up.send(&f),
                other => {
                    self.children[i].lose(format!("unexpected frame {other:?}"));
                    return;
                }
            }
        }
    }

    /// Children whose channel broke before Done: reported up once.
    pub(super) fn check_children(&mut self) {
        let now = Instant::now();
        for c in &mut self.children {
            if !c.finished()
                && c.channel.silent_for(now)
                    > self.heartbeat
                        + if c.ready {
                            Duration::ZERO
                        } else {
                            Duration::from_secs(30)
                        }
            {
                c.lose(format!(
                    "no word for {} s (GW_HEARTBEAT_TIMEOUT)",
                    self.heartbeat.as_secs()
                ));
            }
            if !c.done && !c.reported {
                let why = c.lost.clone().or_else(|| c.channel.broken.clone());
                if let Some(why) = why {
                    c.reported = true;
                    let name = self.hello.plan.hosts[c.host].name.clone();
                    if self.orphaned.is_none() {
                        self.up.send_msg(Msg::Trouble {
                            host: c.host,
                            msg: format!("lost the proxy on host {name}: {why}"),
                            code: 1,
                        });
                    }
                }
            }
        }
    }

    pub(super) fn serve_children_files(&mut self) {
        for (i, c) in self.children.iter_mut().enumerate() {
            while c.channel.queued() < HIGH_WATER {
                match self.stage.next_chunk_for(i) {
                    Some(frame) => c.channel.send(&frame),
                    None => break,
                }
            }
        }
    }

    /// Sends the fence up when this host and every host below are in it.
    pub(super) fn maybe_fence_up(&mut self) {
        // A host without ranks (a gateway that only relays) is always in.
        let own = match &self.own_fence {
            Some(own) => own.clone(),
            None if self.plan().hosts[self.hello.host].ranks.is_empty() => Vec::new(),
            None => return,
        };
        if self.fence_sent {
            return;
        }
        if self.below_fence.0 < self.ranks_below {
            return;
        }
        let mut pairs = own;
        pairs.extend(std::mem::take(&mut self.below_fence.1));
        let ranks = self.plan().hosts[self.hello.host].ranks.len() + self.below_fence.0;
        let local = self.fences_locally();
        let up_pairs = if local {
            pairs.clone()
        } else {
            std::mem::take(&mut pairs)
        };
        self.up.send_msg(Msg::Fence {
            epoch: self.epoch,
            ranks,
            pairs: up_pairs,
            local,
            world: 0,
        });
        self.fence_sent = true;
        if local {
            self.complete_fence(self.epoch, pairs);
        }
    }

    /// A job inside one site, and this proxy its leader (its parent is
    /// the front end, every host of the job below it): fences complete
    /// here, without the round trip to the front end, which is told
    /// afterwards. (With several sites the front end joins them.)
    pub(super) fn fences_locally(&self) -> bool {
        let plan = self.plan();
        let host = self.hello.host;
        let site = plan.hosts[host].site;
        plan.sites[site].leader == host && plan.hosts.iter().all(|h| h.site == site)
    }

    /// Fence `epoch` is complete with `pairs` (every host's puts): pass
    /// them down, answer the local ranks' barriers.
    fn complete_fence(&mut self, epoch: u64, pairs: Vec<(String, String)>) {
        for c in &mut self.children {
            c.channel.send_msg(Msg::Kvs {
                epoch,
                pairs: pairs.clone(),
                world: 0,
            });
        }
        if let Err(e) = self.server.insert_remote(pairs) {
            self.up.send_msg(Msg::Trouble {
                host: self.hello.host,
                msg: e,
                code: 1,
            });
            self.kill(libc::SIGTERM);
            return;
        }
        self.epoch += 1;
        self.own_fence = None;
        self.fence_sent = false;
        self.below_fence = (0, Vec::new());
        let out = self.server.release_barrier();
        self.deliver(out.replies);
    }

    pub(super) fn finish(&mut self) -> i32 {
        self.signal_ranks(libc::SIGKILL);
        if let Some(mut r) = self.relay.take() {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
        sys::kill_orphans();
        sys::remove_shm(&self.hello.plan.job_id);
        self.stage.cleanup();
        if self.orphaned.is_none() {
            let stats = self
                .server
                .take_fresh()
                .into_iter()
                .filter(|(k, _)| k.starts_with("gw.stats."))
                .collect();
            self.up.send_msg(Msg::Done {
                host: self.hello.host,
                stats,
            });
            flush_blocking(&mut self.up);
        }
        // Child proxies' ssh processes: they end with their channel.
        for c in &mut self.children {
            c.channel.close();
        }
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            // SAFETY: waitpid with WNOHANG on any child; status discarded.
            let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if pid < 0 {
                break;
            }
            if pid == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for c in &self.children {
            sys::kill_group(c.pid, libc::SIGKILL);
        }
        if self.orphaned.is_some() {
            1
        } else {
            0
        }
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Signals,
    UpRead,
    UpWrite,
    ChildRead(usize),
    ChildWrite(usize),
    Pmi(usize),
    Stream(usize, usize),
    StdinWrite,
}
